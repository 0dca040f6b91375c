"""Graph optimization levels, as onnxruntime names them, and the passes each one runs.

- ``disable``: the graph as loaded.
- ``basic``: semantics-preserving simplifications that any provider benefits from: constant
  and shape folding, inlining of If nodes with a constant condition, no-op and transpose-pair
  elimination, common-subexpression and dead-node elimination.
- ``extended``: ``basic`` plus transpose optimization (Transposes pushed through layout-agnostic
  operators until they cancel, as onnxruntime's transpose optimizer does for models converted
  from NHWC frameworks), then fusions: Conv with BatchNormalization and constant Mul/Add,
  Conv with its activation (FusedConv), constant scalar Muls into the weights of the MatMul they
  scale, MatMul + Add to Gemm, the dynamically quantized products of ``quantize_dynamic`` into
  MatMulIntegerToFloat or DynamicQuantizeMatMul, MatMuls of one input by constant weights into
  one MatMul and a Split, GELU, LayerNormalization and SkipLayerNormalization (taking in the
  bias Add of one addend). A fused operator is only introduced where a provider of the
  session runs it.
- ``all``: ``extended`` plus elementwise-chain fusion: runs of float32 elementwise operators
  become one ``ai.spawnml::FusedElementwise`` (one generated kernel).

Passes rewrite every graph: the top-level one first, then subgraph bodies (If branches, Loop and
Scan bodies), each as a graph of its own that also knows the enclosing scopes' constants and
inferred types. Graph inputs, outputs, their names, types and shapes never change, in bodies
too.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from ..backend import Backend
from ..ir import Graph, Node
from ..ops.registry import OperatorRegistry
from ..ops.schema import TensorType
from .common_subexpressions import eliminate_common_subexpressions
from .constant_folding import fold_constants
from .context import PassContext
from .conv_activation import fuse_conv_activation
from .conv_folding import fold_into_conv
from .dead_nodes import eliminate_dead_nodes
from .elementwise_fusion import fuse_elementwise
from .eliminate import eliminate_no_ops
from .gelu import fuse_gelu
from .if_inlining import inline_constant_ifs
from .layer_norm import fuse_layer_norm
from .matmul_add import fuse_matmul_add
from .quantized_matmul import fuse_quantized_matmul
from .scale_folding import fold_scales
from .shape_folding import fold_shapes
from .shape_inference import InferenceMemo
from .sibling_matmuls import merge_sibling_matmuls
from .skip_layer_norm import fuse_skip_layer_norm
from .transpose import cancel_transposes
from .transpose_optimizer import optimize_transposes

Pass = Callable[[Graph, PassContext], int]

#: Rounds of the basic passes at most: each round enables the next, and few are ever needed.
MAX_ROUNDS = 8


class GraphOptimizationLevel(enum.IntEnum):
    """onnxruntime's ``GraphOptimizationLevel``, with the same names and values."""

    ORT_DISABLE_ALL = 0
    ORT_ENABLE_BASIC = 1
    ORT_ENABLE_EXTENDED = 2
    ORT_ENABLE_ALL = 99

    @classmethod
    def of(cls, level: GraphOptimizationLevel | int | str) -> GraphOptimizationLevel:
        """A level from itself, its number, or ``"disable"``/``"basic"``/``"extended"``/``"all"``."""
        if isinstance(level, str):
            return LEVEL_NAMES[level.lower()]
        return cls(level)


LEVEL_NAMES = {
    "disable": GraphOptimizationLevel.ORT_DISABLE_ALL,
    "basic": GraphOptimizationLevel.ORT_ENABLE_BASIC,
    "extended": GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
    "all": GraphOptimizationLevel.ORT_ENABLE_ALL,
}

BASIC_PASSES: tuple[Pass, ...] = (
    fold_constants,
    fold_shapes,
    inline_constant_ifs,
    eliminate_no_ops,
    cancel_transposes,
    eliminate_common_subexpressions,
)
EXTENDED_PASSES: tuple[Pass, ...] = (
    optimize_transposes,  # first: a Transpose between a Conv and what fuses into it goes
    fold_into_conv,
    fuse_conv_activation,
    fold_scales,
    fuse_matmul_add,
    fuse_quantized_matmul,
    merge_sibling_matmuls,
    fuse_gelu,
    fuse_layer_norm,
    fuse_skip_layer_norm,
)

ALL_PASSES: tuple[Pass, ...] = (fuse_elementwise,)

#: Passes that find nothing right after they changed a graph: constant folding visits the nodes
#: in dependency order, so whatever a fold makes foldable is folded in the same run; elementwise
#: fusion gathers every chain at once, and what it leaves (single nodes, chains with too many
#: inputs or no provider) it would leave again, as a fused node is no link of a chain.
IDEMPOTENT: frozenset[Pass] = frozenset({fold_constants, fuse_elementwise})


def optimize(
    graph: Graph,
    level: GraphOptimizationLevel | int | str = GraphOptimizationLevel.ORT_ENABLE_ALL,
    providers: Sequence[Backend] = (),
    operators: OperatorRegistry | None = None,
    memo: InferenceMemo | None = None,
) -> Graph:
    """An optimized copy of ``graph`` (the original is not changed; weights are shared).

    Constant folding runs the nodes on ``providers``; without providers nothing is folded.
    ``memo`` keeps what inferring the graph found, for a caller that infers the optimized
    graph again (the planner).
    """
    level = GraphOptimizationLevel.of(level)
    if level == GraphOptimizationLevel.ORT_DISABLE_ALL:
        return graph
    if operators is None:
        from ..discovery import operators as loaded

        operators = loaded()
    work = _copy(graph)
    _optimize_graph(work, level, operators, list(providers), {}, {}, memo or InferenceMemo())
    return work


def _optimize_graph(
    graph: Graph,
    level: GraphOptimizationLevel,
    operators: OperatorRegistry,
    providers: list[Backend],
    outer: Mapping[str, np.ndarray],
    outer_types: Mapping[str, TensorType],
    memo: InferenceMemo,
) -> None:
    """Optimize ``graph`` in place, then the bodies of its nodes; ``outer`` and ``outer_types`` are
    the constants and the known types of the enclosing scopes' values."""
    ctx = PassContext(operators, providers, outer, outer_types, memo)
    held = _subgraphs(graph)
    for body in held:  # the passes only edit them through rename_uses, which makes them forget
        body.remember_free_names()
    rounds = _Rounds(graph, ctx)
    rounds.until_stable(BASIC_PASSES)
    if level >= GraphOptimizationLevel.ORT_ENABLE_EXTENDED:
        rounds.until_stable(EXTENDED_PASSES + BASIC_PASSES)
    if level >= GraphOptimizationLevel.ORT_ENABLE_ALL:
        rounds.until_stable(ALL_PASSES)
    bodies = _subgraphs(graph)
    if not bodies:
        return  # the held ones, if any, went with their nodes
    free, feedable = graph.free_names(), {value.name for value in graph.inputs}
    constants = {name: outer[name] for name in free if name in outer}  # none is redefined here
    constants.update((name, array) for name, array in graph.initializers.items() if name not in feedable)
    types = {name: outer_types[name] for name in free if name in outer_types} | ctx.types(graph)
    for body in held:  # they change from here on
        body.remember_free_names(False)
    for body in bodies:
        _optimize_graph(body, level, operators, providers, constants, types, InferenceMemo())
        for domain, version in body.opset_imports.items():  # a fusion in a body imports on the model
            graph.opset_imports.setdefault(domain, version)
    eliminate_dead_nodes(graph)  # what the bodies no longer read


def _subgraphs(graph: Graph) -> list[Graph]:
    return [body for node in graph.nodes for body in node.subgraphs()]


@dataclass
class _Rounds:
    """Rounds of passes over one graph until none changes it.

    A pass that found nothing to do is not run again until the graph has changed (passes
    depend on the graph alone, so it would find nothing again), nor an idempotent pass until
    another edit follows its own.
    """

    graph: Graph
    ctx: PassContext
    edits: int = 0  # how many times the graph has changed
    idle: dict[Pass | None, int] = field(default_factory=dict)  # pass (None: dead nodes) -> edits then

    def until_stable(self, passes: Sequence[Pass]) -> None:
        for _ in range(MAX_ROUNDS):
            changed = 0
            for run in passes:
                if self.idle.get(run) == self.edits:
                    continue
                found = run(self.graph, self.ctx)
                if found:
                    self.ctx.changed()
                    self.edits += 1
                    changed += 1
                if not found or run in IDEMPOTENT:
                    self.idle[run] = self.edits
            if self.idle.get(None) != self.edits and eliminate_dead_nodes(self.graph):
                self.edits += 1
                changed += 1
            self.idle[None] = self.edits
            if not changed:
                return


def _copy(graph: Graph) -> Graph:
    """A copy whose nodes, wiring, subgraphs and dicts can be edited freely; arrays are shared."""
    return replace(
        graph,
        nodes=[_copy_node(node) for node in graph.nodes],
        inputs=list(graph.inputs),
        outputs=list(graph.outputs),
        initializers=dict(graph.initializers),
        value_info=dict(graph.value_info),
        opset_imports=dict(graph.opset_imports),
        metadata=dict(graph.metadata),
    )


def _copy_node(node: Node) -> Node:
    attrs = {name: _copy_attr(value) for name, value in node.attrs.items()}
    return Node(node.op_type, list(node.inputs), list(node.outputs), attrs, node.name, node.domain)


def _copy_attr(value: Any) -> Any:
    if isinstance(value, Graph):
        return _copy(value)
    if isinstance(value, list):
        return [_copy_attr(item) for item in value]
    return value
