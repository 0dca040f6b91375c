"""Fuse the dynamically quantized products ``quantize_dynamic`` writes into onnxruntime's
``com.microsoft`` MatMulIntegerToFloat and DynamicQuantizeMatMul, as its graph optimizer does.

``quantize_dynamic`` writes each product as DynamicQuantizeLinear(x) -> MatMulInteger(x_q, W,
x_zero, W_zero) -> Cast(to float) -> Mul(., Mul(x_scale, W_scale)), sometimes + a constant bias.
The chain from MatMulInteger on becomes MatMulIntegerToFloat(x_q, W, x_scale, W_scale, x_zero,
W_zero, bias), which computes the same float32 operations (the int32 sums, converted, times the
product of the two scales, plus the bias); where the DynamicQuantizeLinear feeds nothing else, it
is taken in too, as DynamicQuantizeMatMul(x, W, W_scale, W_zero, bias).
"""

from __future__ import annotations

from typing import NamedTuple

from ..ir import Graph, Node
from ..ops.schema import TensorType
from .context import MS_DOMAIN, PassContext, import_domain
from .graph_edit import constant, consumers, only_reader, output_names, producers

#: ONNX's element type code of float32 (Cast's ``to``).
FLOAT = 1


class Chain(NamedTuple):
    """MatMulInteger -> Cast -> Mul (-> Add of a constant bias), and the Mul of the two scales."""

    matmul: Node
    cast: Node
    scale: Node
    scales: Node
    bias: Node | None


def fuse_quantized_matmul(graph: Graph, ctx: PassContext) -> int:
    """Replace the chains by MatMulIntegerToFloat or DynamicQuantizeMatMul; return how many."""
    if not any(node.op_type == "MatMulInteger" and not node.domain for node in graph.nodes):
        return 0
    fused = 0
    for matmul in [node for node in graph.nodes if node.op_type == "MatMulInteger" and not node.domain]:
        made, readers = producers(graph), consumers(graph)
        chain = _chain(graph, ctx, made, readers, matmul)
        if chain is not None and _fuse(graph, ctx, made, readers, chain):
            fused += 1
    return fused


def _chain(
    graph: Graph, ctx: PassContext, made: dict[str, Node], readers: dict[str, list[Node]], matmul: Node
) -> Chain | None:
    """The chain after ``matmul``, where every link reads the one before alone."""
    cast = only_reader(graph, readers, matmul.outputs[0])
    if cast is None or cast.op_type != "Cast" or cast.domain or cast.attrs.get("to") != FLOAT:
        return None
    mul = only_reader(graph, readers, cast.outputs[0])
    if mul is None or mul.op_type != "Mul" or mul.domain or len(mul.inputs) != 2:
        return None
    scales = made.get(mul.inputs[1] if mul.inputs[0] == cast.outputs[0] else mul.inputs[0])
    if scales is None or scales.op_type != "Mul" or scales.domain or len(scales.inputs) != 2:
        return None
    reader = only_reader(graph, readers, mul.outputs[0])
    bias = reader if reader is not None and _bias(graph, ctx, reader, mul.outputs[0]) else None
    return Chain(matmul, cast, mul, scales, bias)


def _bias(graph: Graph, ctx: PassContext, add: Node, name: str) -> str | None:
    """The constant float32 vector ``add`` adds to ``name``, if it is one as long as its last axis."""
    if add.op_type != "Add" or add.domain or len(add.inputs) != 2 or add.inputs[0] == add.inputs[1]:
        return None
    other = add.inputs[1] if add.inputs[0] == name else add.inputs[0]
    bias, known = constant(graph, other), ctx.types(graph).get(name)
    if bias is None or bias.ndim != 1 or bias.dtype.name != "float32" or known is None or not known.shape:
        return None
    return other if known.shape[-1] == bias.shape[0] else None


def _scalar(known: TensorType | None) -> bool:
    return known is not None and known.shape is not None and all(dim == 1 for dim in known.shape)


def _fuse(
    graph: Graph, ctx: PassContext, made: dict[str, Node], readers: dict[str, list[Node]], chain: Chain
) -> bool:
    """Put the fused node in the chain's place, if its shapes fit and the provider runs it."""
    types = ctx.types(graph)
    matmul, scales = chain.matmul, chain.scales
    a, b = matmul.inputs[0], matmul.inputs[1]
    a_zero = matmul.inputs[2] if len(matmul.inputs) > 2 else ""
    b_zero = matmul.inputs[3] if len(matmul.inputs) > 3 else ""
    quantizer = made.get(a)
    # the scale of A: the quantizer's where it is an operand of the scales' Mul, else a scalar one
    quantizer_scale = quantizer.outputs[1] if quantizer is not None and len(quantizer.outputs) > 1 else None
    candidates = [index for index in (0, 1) if scales.inputs[index] == quantizer_scale]
    candidates += [index for index in (0, 1) if _scalar(types.get(scales.inputs[index]))]
    if (
        not candidates
        or (a_zero and not _scalar(types.get(a_zero)))
        or only_reader(graph, readers, scales.outputs[0]) is None
    ):
        return False
    a_scale, b_scale = scales.inputs[candidates[0]], scales.inputs[1 - candidates[0]]
    known_a, known_b = types.get(a), types.get(b)
    if (
        known_a is None
        or not known_a.shape
        or known_b is None
        or known_b.shape is None
        or len(known_b.shape) != 2
    ):
        return False
    bias = _bias(graph, ctx, chain.bias, chain.scale.outputs[0]) if chain.bias is not None else None
    last = chain.bias if chain.bias is not None else chain.scale
    originals = [matmul, chain.cast, chain.scale, scales, *([chain.bias] if chain.bias is not None else [])]
    if quantizer is not None and _feeds_only(graph, readers, quantizer, (matmul, scales), (a_scale, a_zero)):
        inputs = [quantizer.inputs[0], b, b_scale, b_zero, bias or ""]
        node = Node("DynamicQuantizeMatMul", _trimmed(inputs), list(last.outputs), {}, matmul.name, MS_DOMAIN)
        if ctx.may_replace(graph, [quantizer, *originals], node):
            _replace(graph, [quantizer, *originals], node)
            return True
    inputs = [a, b, a_scale, b_scale, a_zero, b_zero, bias or ""]
    node = Node("MatMulIntegerToFloat", _trimmed(inputs), list(last.outputs), {}, matmul.name, MS_DOMAIN)
    if not ctx.may_replace(graph, originals, node):
        return False
    _replace(graph, originals, node)
    return True


def _feeds_only(
    graph: Graph,
    readers: dict[str, list[Node]],
    quantizer: Node,
    chain: tuple[Node, Node],
    scale_and_zero: tuple[str, str],
) -> bool:
    """Whether the DynamicQuantizeLinear's outputs are the product's A, its scale and zero point,
    read by the chain's nodes alone (and no graph output)."""
    if quantizer.op_type != "DynamicQuantizeLinear" or quantizer.domain:
        return False
    if tuple(quantizer.outputs[1:]) != scale_and_zero:
        return False
    outputs = output_names(graph)
    return all(
        name not in outputs and all(any(reader is node for node in chain) for reader in readers.get(name, []))
        for name in quantizer.outputs
    )


def _trimmed(inputs: list[str]) -> list[str]:
    """Inputs without the trailing absent ones."""
    while inputs and not inputs[-1]:
        inputs.pop()
    return inputs


def _replace(graph: Graph, originals: list[Node], node: Node) -> None:
    """``node`` in place of the last of ``originals`` (the others removed)."""
    import_domain(graph, MS_DOMAIN)
    graph.nodes[graph.nodes.index(originals[-1])] = node
    for gone in originals[:-1]:
        graph.nodes.remove(gone)
