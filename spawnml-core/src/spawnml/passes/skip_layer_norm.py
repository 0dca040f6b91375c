"""Fuse a residual Add and the LayerNormalization after it into ``com.microsoft`` SkipLayerNormalization.

Both addends must have the same known rank-3 shape, as onnxruntime's kernel requires. When
the sum is read elsewhere too, the fused node gives it as its fourth output.
"""

from __future__ import annotations

from ..ir import Graph, Node
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
        shapes = [ctx.types(graph).get(name) for name in add.inputs]
        if any(known is None or known.shape is None for known in shapes):
            continue
        shape = shapes[0].shape
        if (
            len(shape) != 3
            or shapes[1].shape != shape
            or None in shape
            or norm.attrs.get("axis", -1) not in (-1, 2)
        ):
            continue
        shared = len(readers.get(add.outputs[0], [])) > 1 or add.outputs[0] in outputs
        fused_outputs = [norm.outputs[0], "", "", add.outputs[0]] if shared else [norm.outputs[0]]
        gamma_beta = [name for name in norm.inputs[1:3] if name]
        attrs = {"epsilon": norm.attrs.get("epsilon", 1e-5)}
        node = Node(
            "SkipLayerNormalization", [*add.inputs, *gamma_beta], fused_outputs, attrs, norm.name, MS_DOMAIN
        )
        if not ctx.may_replace(graph, [add, norm], node):
            continue
        import_domain(graph, MS_DOMAIN)
        graph.nodes[graph.nodes.index(norm)] = node
        graph.nodes.remove(add)
        made.update({name: node for name in fused_outputs if name})
        fused += 1
    return fused
