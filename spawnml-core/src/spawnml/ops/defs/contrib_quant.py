"""onnxruntime's quantized contrib operators (com.microsoft), the ones its quantization tool
writes: the QOperator forms of elementwise operators, pools, Concat, Softmax and Gemm that
``quantize_static`` emits, what ``quantize_dynamic`` makes of LSTM, Attention and
EmbedLayerNormalization (DynamicQuantizeLSTM, QAttention, QEmbedLayerNormalization), and the
fused dynamic products onnxruntime's graph optimizer saves (DynamicQuantizeMatMul,
MatMulIntegerToFloat), and GatherBlockQuantized, the embedding tables of its weight-only
quantizer.

Input layouts follow onnxruntime's ContribOperators.md: each quantized tensor is followed by its
scale and (optional) zero point, and the output's scale and zero point come last.
"""

from __future__ import annotations

import numpy as np

from ...ir import Dim
from ..schema import REQUIRED, Attribute, InferenceContext, InferFn, OpSchema, TensorType
from ..shapes import broadcast, normalize_axis, same_as_input, sliding_windows
from .contrib import MS
from .nn import matmul_shape
from .recurrent import directions

FLOAT32 = np.dtype(np.float32)


def _input(ctx: InferenceContext, index: int) -> TensorType:
    return ctx.input(index) or TensorType(None, None)


def _infer_quantize(ctx: InferenceContext) -> list[TensorType]:
    """``x``'s shape in the zero point's type (uint8 without one)."""
    zero_point = ctx.input(2)
    return [TensorType(np.dtype(np.uint8) if zero_point is None else zero_point.dtype, _input(ctx, 0).shape)]


def _infer_dequantize(ctx: InferenceContext) -> list[TensorType]:
    """``x``'s shape in the scale's type."""
    return [TensorType(_input(ctx, 1).dtype, _input(ctx, 0).shape)]


def _infer_binary(ctx: InferenceContext) -> list[TensorType]:
    """``A`` (input 0) and ``B`` (input 3) broadcast, in ``A``'s type."""
    a, b = _input(ctx, 0), _input(ctx, 3)
    return [TensorType(a.dtype, broadcast(a.shape, b.shape))]


def _infer_where(ctx: InferenceContext) -> list[TensorType]:
    """The condition, ``X`` (input 1) and ``Y`` (input 4) broadcast, in ``X``'s type."""
    condition, x, y = _input(ctx, 0), _input(ctx, 1), _input(ctx, 4)
    return [TensorType(x.dtype, broadcast(condition.shape, x.shape, y.shape))]


def _infer_concat(ctx: InferenceContext) -> list[TensorType]:
    """The (tensor, scale, zero point) triples after ``Y_scale, Y_zero_point`` joined on ``axis``."""
    parts = [_input(ctx, index) for index in range(2, len(ctx.inputs), 3)]
    first = parts[0] if parts else TensorType(None, None)
    if any(part.shape is None for part in parts) or first.shape is None:
        return [TensorType(first.dtype, None)]
    axis = normalize_axis(ctx.attrs["axis"], len(first.shape))
    sizes = [part.shape[axis] for part in parts if part.shape is not None]
    joined: Dim = (
        sum(s for s in sizes if isinstance(s, int)) if all(isinstance(s, int) for s in sizes) else None
    )
    return [TensorType(first.dtype, (*first.shape[:axis], joined, *first.shape[axis + 1 :]))]


def _infer_average_pool(ctx: InferenceContext) -> list[TensorType]:
    x = _input(ctx, 0)
    if x.shape is None or any(not isinstance(d, int) for d in x.shape[2:]):
        return [
            TensorType(x.dtype, None if x.shape is None else (*x.shape[:2], *(None,) * (len(x.shape) - 2)))
        ]
    spatial = sliding_windows(x.shape[2:], ctx.attrs, ctx.attrs["kernel_shape"])
    return [TensorType(x.dtype, (*x.shape[:2], *(size for size, _, _ in spatial)))]


def _infer_global_pool(ctx: InferenceContext) -> list[TensorType]:
    x = _input(ctx, 0)
    return [TensorType(x.dtype, None if x.shape is None else (*x.shape[:2], *(1,) * (len(x.shape) - 2)))]


def _infer_qgemm(ctx: InferenceContext) -> list[TensorType]:
    """Quantized into ``y_zero_point``'s type where it is given, else float32."""
    a, b = _input(ctx, 0).shape, _input(ctx, 3).shape
    rows = a[1 if ctx.attrs["transA"] else 0] if a is not None and len(a) == 2 else None
    cols = b[0 if ctx.attrs["transB"] else 1] if b is not None and len(b) == 2 else None
    zero_point = ctx.input(8)
    return [TensorType(FLOAT32 if zero_point is None else zero_point.dtype, (rows, cols))]


def _infer_quantized_lstm(ctx: InferenceContext) -> list[TensorType]:
    """LSTM's ``Y [T, D, B, H]``, ``Y_h`` and ``Y_c [D, B, H]``; W here is ``[D, I, 4H]``."""
    x = _input(ctx, 0)
    hidden: Dim = ctx.attrs.get("hidden_size")
    if x.shape is None or len(x.shape) != 3:
        return [TensorType(x.dtype, None)] * 3
    count = directions(ctx.attrs)
    steps, batch = x.shape[:2]
    final = TensorType(x.dtype, (count, batch, hidden))
    return [TensorType(x.dtype, (steps, count, batch, hidden)), final, final]


def _infer_float_matmul(ctx: InferenceContext) -> list[TensorType]:
    """float32 ``A @ B`` of inputs 0 and 1."""
    return [TensorType(FLOAT32, matmul_shape(_input(ctx, 0).shape, _input(ctx, 1).shape))]


def _infer_gather_block_quantized(ctx: InferenceContext) -> list[TensorType]:
    """Gather's shape (the last axis of uint8 data unpacked ``8 / bits`` values a byte), in the
    scales' type."""
    data, indices = _input(ctx, 0).shape, _input(ctx, 1).shape
    scales = _input(ctx, 2).dtype
    if data is None or indices is None:
        return [TensorType(scales, None)]
    bits, packed = ctx.attrs["bits"], _input(ctx, 0).dtype == np.dtype(np.uint8)
    last = data[-1]
    if packed and bits < 8:
        last = last * (8 // bits) if isinstance(last, int) else None
    full = (*data[:-1], last)
    axis = normalize_axis(ctx.attrs["gather_axis"], len(full))
    return [TensorType(scales, (*full[:axis], *indices, *full[axis + 1 :]))]


def _infer_qattention(ctx: InferenceContext) -> list[TensorType]:
    """float32 ``[B, S, V]`` with ``V`` a third of the packed weights' width; the present."""
    x, weights = _input(ctx, 0).shape, _input(ctx, 1).shape
    width = weights[1] // 3 if weights is not None and isinstance(weights[1], int) else None
    return [TensorType(FLOAT32, None if x is None else (*x[:2], width)), TensorType(FLOAT32, None)]


def _infer_qembed_normalization(ctx: InferenceContext) -> list[TensorType]:
    """float32 ``[B, S, H]`` normalized embeddings and the ``[B]`` int32 mask index."""
    ids, words = _input(ctx, 0).shape, _input(ctx, 2).shape
    width = words[1] if words is not None and len(words) == 2 else None
    tokens = (*ids, width) if ids is not None and len(ids) == 2 else None
    return [TensorType(FLOAT32, tokens), TensorType(np.dtype(np.int32), None if ids is None else ids[:1])]


def _ms(
    name: str,
    infer: InferFn,
    inputs: tuple[int, int],
    *attributes: Attribute,
    outputs: tuple[int, int] = (1, 1),
) -> OpSchema:
    return OpSchema(name, domain=MS, inputs=inputs, outputs=outputs, attributes=attributes, infer=infer)


_CHANNELS_LAST = Attribute("channels_last", "int", 0)
_AXIS = Attribute("axis", "int", 1)

SCHEMAS: list[OpSchema] = [
    # the QDQ format's pairs in onnxruntime's domain (quantize_static's UseQDQContribOps), which
    # take 16-bit and 4-bit integers before ai.onnx did
    _ms("QuantizeLinear", _infer_quantize, (2, 3), _AXIS),
    _ms("DequantizeLinear", _infer_dequantize, (2, 3), _AXIS),
    _ms("QLinearAdd", _infer_binary, (7, 8)),
    _ms("QLinearMul", _infer_binary, (7, 8)),
    _ms("QLinearWhere", _infer_where, (9, 9)),
    _ms("QLinearSigmoid", same_as_input(), (4, 5)),
    _ms("QLinearLeakyRelu", same_as_input(), (4, 5), Attribute("alpha", "float", float(np.float32(0.01)))),
    _ms("QLinearConcat", _infer_concat, (5, -1), Attribute("axis", "int", REQUIRED)),
    _ms(
        "QLinearAveragePool",
        _infer_average_pool,
        (4, 5),
        Attribute("auto_pad", "string", "NOTSET"),
        Attribute("ceil_mode", "int", 0),
        _CHANNELS_LAST,
        Attribute("count_include_pad", "int", 0),
        Attribute("kernel_shape", "ints", REQUIRED),
        Attribute("pads", "ints"),
        Attribute("strides", "ints"),
    ),
    _ms("QLinearGlobalAveragePool", _infer_global_pool, (5, 5), _CHANNELS_LAST),
    _ms(
        "QLinearSoftmax",
        same_as_input(),
        (4, 5),
        Attribute("axis", "int", -1),
        Attribute("opset", "int", REQUIRED),
    ),
    _ms(
        "QGemm",
        _infer_qgemm,
        (6, 9),
        Attribute("alpha", "float", 1.0),
        Attribute("transA", "int", 0),
        Attribute("transB", "int", 0),
    ),
    _ms("DynamicQuantizeMatMul", _infer_float_matmul, (3, 5)),
    _ms("MatMulIntegerToFloat", _infer_float_matmul, (4, 7)),
    _ms(
        "GatherBlockQuantized",
        _infer_gather_block_quantized,
        (3, 4),
        Attribute("bits", "int", 4),
        Attribute("block_size", "int", 128),
        Attribute("gather_axis", "int", 0),
        Attribute("quantize_axis", "int", 1),
    ),
    _ms(
        "QAttention",
        _infer_qattention,
        (5, 9),
        Attribute("do_rotary", "int", 0),
        Attribute("mask_filter_value", "float", -10000.0),
        Attribute("num_heads", "int", REQUIRED),
        Attribute("past_present_share_buffer", "int", 0),
        Attribute("scale", "float"),
        Attribute("unidirectional", "int", 0),
        outputs=(1, 2),
    ),
    _ms(
        "QEmbedLayerNormalization",
        _infer_qembed_normalization,
        (18, 18),
        Attribute("epsilon", "float", float(np.float32(1e-12))),
        outputs=(2, 2),
    ),
    _ms(
        "DynamicQuantizeLSTM",
        _infer_quantized_lstm,
        (12, 12),
        Attribute("activation_alpha", "floats"),
        Attribute("activation_beta", "floats"),
        Attribute("activations", "strings"),
        Attribute("clip", "float"),
        Attribute("direction", "string", "forward"),
        Attribute("hidden_size", "int", REQUIRED),
        Attribute("input_forget", "int", 0),
        outputs=(0, 3),
    ),
]
