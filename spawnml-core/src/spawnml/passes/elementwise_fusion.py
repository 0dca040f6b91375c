"""Fuse chains of float32 elementwise nodes into one ``ai.spawnml::FusedElementwise``.

A node takes in the chain of each producer whose output only it and the nodes already in its
chain read (and which is no graph output), so one fused node may gather a tree of operators:
``y = a * b + c; y * sigmoid(y)`` becomes a single kernel with inputs ``a``, ``b`` and ``c``.
The chain is the operators in graph order, with their attributes resolved to the schema's
defaults (see :mod:`spawnml.ops.defs.fused`). Only float32 values take part, and only where a
provider runs the fused node.
"""

from __future__ import annotations

import numpy as np

from ..ir import Graph, Node
from ..kernel.library.chain import Step, encode, step
from ..ops.defs.fused import DOMAIN
from .context import PassContext, import_domain
from .graph_edit import consumers, output_names

FLOAT32 = np.dtype(np.float32)
FLOAT32_NAME = FLOAT32.name  # numpy builds a dtype's name on every read
#: The most inputs one fused node takes (a compiled CPU ufunc takes at most 32 operands).
MAX_INPUTS = 16

#: The ai.onnx operators a chain may hold (all elementwise over broadcast inputs).
FUSIBLE = frozenset(
    {
        "Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Sum", "Mean", "PRelu", "Clip",
        "Abs", "Neg", "Sign", "Reciprocal", "Sqrt", "Exp", "Log", "Erf", "Floor", "Ceil", "Round",
        "Sin", "Cos", "Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Tanh", "Asinh", "Acosh", "Atanh",
        "Relu", "Sigmoid", "HardSigmoid", "HardSwish", "LeakyRelu", "Elu", "Selu", "Celu",
        "ThresholdedRelu", "Softplus", "Softsign", "Mish", "Gelu", "Shrink",
    }
)  # fmt: skip


def fuse_elementwise(graph: Graph, ctx: PassContext) -> int:
    """Replace each chain of two or more fusible float32 nodes by one fused node; return how many."""
    readers, outputs = consumers(graph), output_names(graph)
    chains: dict[str, list[Node]] = {}  # each chain so far, by its output (read outside it alone)
    for node in graph.nodes:
        if not _fusible(graph, ctx, node):
            continue
        chain = [node]
        grown = True
        while grown:  # absorb every chain whose output only this chain reads
            members = {id(member) for member in chain}
            names = dict.fromkeys(name for member in chain for name in member.inputs)
            absorbed = [
                name
                for name in names
                if name in chains
                and name not in outputs
                and all(id(reader) in members for reader in readers[name])
            ]
            for name in absorbed:
                chain = chains.pop(name) + chain
            grown = bool(absorbed)
        chains[node.outputs[0]] = chain
    order = {id(node): index for index, node in enumerate(graph.nodes)}
    replaced: dict[int, Node | None] = {}  # by id: a fused node in place of its last part, None for the rest
    for nodes in chains.values():
        nodes = sorted(nodes, key=lambda node: order[id(node)])
        fused = _fused(graph, ctx, nodes) if len(nodes) > 1 else None
        if fused is not None:
            replaced |= dict.fromkeys(map(id, nodes[:-1])) | {id(nodes[-1]): fused}
    if replaced:
        import_domain(graph, DOMAIN)
        kept = (replaced.get(id(node), node) for node in graph.nodes)
        graph.nodes = [node for node in kept if node is not None]
    return sum(node is not None for node in replaced.values())


def _fusible(graph: Graph, ctx: PassContext, node: Node) -> bool:
    if node.domain or node.op_type not in FUSIBLE or len(node.outputs) != 1 or any(node.subgraphs()):
        return False
    if ctx.operators.lookup("", node.op_type, graph.opset()) is None:
        return False
    types = ctx.types(graph)
    values = [name for name in (*node.inputs, *node.outputs) if name]
    return all(name in types and types[name].dtype == FLOAT32 for name in values)


def _fused(graph: Graph, ctx: PassContext, nodes: list[Node]) -> Node | None:
    """One FusedElementwise for ``nodes`` (in graph order), or None where it would take too many
    inputs or no provider runs it where they run."""
    internal = {node.outputs[0]: index for index, node in enumerate(nodes)}
    inputs = list(
        dict.fromkeys(name for node in nodes for name in node.inputs if name and name not in internal)
    )
    if len(inputs) > MAX_INPUTS:
        return None
    chain = tuple(_step(graph, ctx, node, inputs, internal) for node in nodes)
    last = nodes[-1]
    fused = Node("FusedElementwise", inputs, [last.outputs[0]], {"chain": encode(chain)}, last.name, DOMAIN)
    return fused if ctx.may_replace(graph, nodes, fused) else None


def _step(graph: Graph, ctx: PassContext, node: Node, inputs: list[str], internal: dict[str, int]) -> Step:
    schema = ctx.operators.lookup("", node.op_type, graph.opset())
    assert schema is not None  # checked by _fusible
    attrs = schema.resolve_attrs(node)
    present = [name for name in node.inputs if name]
    if node.op_type == "Clip" and graph.opset() >= 11:
        names = [*node.inputs, "", ""][1:3]
        attrs |= {"has_min": bool(names[0]), "has_max": bool(names[1])}
    refs = [len(inputs) + internal[name] if name in internal else inputs.index(name) for name in present]
    return step(node.op_type, refs, FLOAT32_NAME, attrs)
