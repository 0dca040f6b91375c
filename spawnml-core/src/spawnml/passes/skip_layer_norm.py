"""Fuse a residual Add and the LayerNormalization after it into ``com.microsoft`` SkipLayerNormalization.

Both addends must have the same known rank-3 shape, as onnxruntime's kernel requires. When
the sum is read elsewhere too, the fused node gives it as its fourth output. A bias Add that
makes one addend (``x + b``, ``b`` a constant vector, as after a projection) is taken in as the
fused node's bias, as onnxruntime's fusion does.
"""

from __future__ import annotations

from ..ir import Graph, Node
from .bias_add import Readers, bias_add
from .context import MS_DOMAIN, PassContext, import_domain
from .graph_edit import consumers, output_names, producers


def fuse_skip_layer_norm(graph: Graph, ctx: PassContext) -> int:
    """Replace Add -> LayerNormalization pairs by SkipLayerNormalization; return how many."""
    if not any(node.op_type == "LayerNormalization" and not node.domain for node in graph.nodes):
        return 0
    made, readers = producers(graph), consumers(graph)
    outputs = output_names(graph)
    fused = 0
    for norm in list(graph.nodes):
        if norm.op_type != "LayerNormalization" or norm.domain or any(norm.outputs[1:]):
            continue
        add = made.get(norm.inputs[0])
        if add is None or add.op_type != "Add" or add.domain:
            continue
        types = [ctx.types(graph).get(name) for name in add.inputs]
        shapes = [known.shape for known in types if known is not None and known.shape is not None]
        if len(shapes) < len(types):
            continue
        shape = shapes[0]
        if (
            len(shape) != 3
            or shapes[1] != shape
            or None in shape
            or norm.attrs.get("axis", -1) not in (-1, 2)
        ):
            continue
        shared = len(readers.get(add.outputs[0], [])) > 1 or add.outputs[0] in outputs
        fused_outputs = [norm.outputs[0], "", "", add.outputs[0]] if shared else [norm.outputs[0]]
        attrs = {"epsilon": norm.attrs.get("epsilon", 1e-5)}
        inputs, replaced = _inputs(graph, ctx, made, readers, add, norm)
        node = Node("SkipLayerNormalization", inputs, fused_outputs, attrs, norm.name, MS_DOMAIN)
        if not ctx.may_replace(graph, replaced, node):
            continue
        import_domain(graph, MS_DOMAIN)
        graph.nodes[graph.nodes.index(norm)] = node
        for gone in replaced[:-1]:
            graph.nodes.remove(gone)
        made.update({name: node for name in fused_outputs if name})
        fused += 1
    return fused


def _inputs(
    graph: Graph, ctx: PassContext, made: dict[str, Node], readers: Readers, add: Node, norm: Node
) -> tuple[list[str], list[Node]]:
    """The fused node's inputs (input, skip, gamma, beta, bias) and the nodes it replaces, ``norm`` last."""
    gamma, beta = norm.inputs[1], norm.inputs[2] if len(norm.inputs) > 2 else ""
    for index in (0, 1) if add.inputs[0] != add.inputs[1] else ():
        found = bias_add(graph, ctx, made, readers, add.inputs[index])
        if found is not None:
            inputs = [found.x, add.inputs[1 - index], gamma, beta, found.bias]
            return inputs, [found.node, add, norm]
    return [*add.inputs, gamma, beta] if beta else [*add.inputs, gamma], [add, norm]
