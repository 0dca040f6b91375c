"""Fuse a 2-D MatMul by a constant matrix and the constant bias Add after it into Gemm."""

from __future__ import annotations

from ..ir import Graph, Node
from .context import PassContext
from .graph_edit import constant, consumers, only_reader, producers


def fuse_matmul_add(graph: Graph, ctx: PassContext) -> int:
    """Replace MatMul(A, B) + C by Gemm(A, B, C) for rank-2 float A; return how many."""
    if not any(node.op_type == "MatMul" and not node.domain for node in graph.nodes):
        return 0
    made, readers = producers(graph), consumers(graph)
    fused = 0
    for add in list(graph.nodes):
        if add.domain or add.op_type != "Add" or len(add.inputs) != 2:
            continue
        for index in (0, 1):
            matmul = made.get(add.inputs[index])
            if matmul is None or matmul.op_type != "MatMul" or matmul.domain:
                continue
            if only_reader(graph, readers, matmul.outputs[0]) is not add:
                continue
            left = ctx.types(graph).get(matmul.inputs[0])
            weight, bias = constant(graph, matmul.inputs[1]), constant(graph, add.inputs[1 - index])
            if left is None or left.shape is None or len(left.shape) != 2 or weight is None or bias is None:
                continue
            if weight.ndim != 2 or weight.dtype.kind != "f" or bias.dtype != weight.dtype:
                continue
            if bias.shape not in ((weight.shape[1],), (1, weight.shape[1])):
                continue
            gemm = Node("Gemm", [*matmul.inputs, add.inputs[1 - index]], list(add.outputs), name=matmul.name)
            if not ctx.may_replace(graph, [matmul, add], gemm):
                continue
            graph.nodes[graph.nodes.index(matmul)] = gemm
            graph.nodes.remove(add)
            fused += 1
            break
    return fused
