"""Signal-processing ai.onnx operators: DFT, STFT, the window functions and MelWeightMatrix.

Complex values travel as a last axis of two (real, imaginary); a real signal may carry a
last axis of one instead.
"""

from __future__ import annotations

from ...dtypes import from_onnx
from ...errors import InvalidGraphError
from ...ir import Dim
from ..schema import Attribute, InferenceContext, OpSchema, TensorType
from ..shapes import constant_ints

WINDOWS = ("HannWindow", "HammingWindow", "BlackmanWindow")
#: ONNX's default ``output_datatype`` of the generators: float.
FLOAT_CODE = 1


def _given(ctx: InferenceContext, index: int) -> bool:
    return index < len(ctx.node.inputs) and bool(ctx.node.inputs[index])


def _scalar(ctx: InferenceContext, index: int) -> int | None:
    """The value of a constant scalar integer input, else None."""
    values = constant_ints(ctx, index)
    return values[0] if values else None


def dft_axis(axis: int, rank: int) -> int:
    """DFT's signal axis in ``[0, rank - 2]``; the last axis holds the complex parts."""
    if not -rank <= axis <= rank - 2 or axis == -1:
        raise InvalidGraphError(f"DFT axis {axis} is out of range for an input of rank {rank}")
    return axis % rank


def dft_sizes(length: int, dft_length: int | None, inverse: bool, onesided: bool) -> tuple[int, int]:
    """The transform length of DFT on an axis of ``length``, and that axis's output length."""
    if dft_length is None:
        dft_length = 2 * (length - 1) if inverse and onesided else length
    if dft_length < 1:
        raise InvalidGraphError(f"DFT length must be positive, got {dft_length}")
    return dft_length, dft_length // 2 + 1 if onesided and not inverse else dft_length


def _infer_dft(ctx: InferenceContext) -> list[TensorType]:
    source = ctx.input(0) or TensorType(None, None)
    inverse, onesided = bool(ctx.attrs["inverse"]), bool(ctx.attrs["onesided"])
    if source.shape is None:
        return [TensorType(source.dtype, None)]
    dims: list[Dim] = [*source.shape[:-1], 1 if inverse and onesided else 2]
    axis = ctx.attrs.get("axis", -2)  # an attribute before opset 20, an input since
    if _given(ctx, 2):
        axis = _scalar(ctx, 2)
    if axis is None:
        return [TensorType(source.dtype, (None,) * (len(dims) - 1) + (dims[-1],))]
    axis = dft_axis(axis, len(dims))
    length, requested = dims[axis], _scalar(ctx, 1)
    known = requested is not None or not _given(ctx, 1)
    dims[axis] = (
        dft_sizes(length, requested, inverse, onesided)[1] if isinstance(length, int) and known else None
    )
    return [TensorType(source.dtype, tuple(dims))]


def stft_frames(length: int, frame_length: int, step: int) -> int:
    """How many frames STFT takes from a signal of ``length``."""
    if step < 1 or frame_length < 1 or frame_length > length:
        raise InvalidGraphError(
            f"STFT frames of length {frame_length} and step {step} do not fit a signal of length {length}"
        )
    return (length - frame_length) // step + 1


def _infer_stft(ctx: InferenceContext) -> list[TensorType]:
    signal = ctx.input(0) or TensorType(None, None)
    batch, length = (None, None) if signal.shape is None else signal.shape[:2]
    frame_length: Dim
    if _given(ctx, 3):
        frame_length = _scalar(ctx, 3)
    elif _given(ctx, 2):
        window = ctx.input(2)
        frame_length = window.shape[0] if window is not None and window.shape else None
    else:
        frame_length = length
    step = _scalar(ctx, 1)
    frames = bins = None
    if isinstance(frame_length, int):
        bins = frame_length // 2 + 1 if ctx.attrs["onesided"] else frame_length
        if isinstance(length, int) and step is not None:
            frames = stft_frames(length, frame_length, step)
    return [TensorType(signal.dtype, (batch, frames, bins, 2))]


def _infer_window(ctx: InferenceContext) -> list[TensorType]:
    size = _scalar(ctx, 0)
    if size is not None and size < 1:
        raise InvalidGraphError(f"{ctx.node.op_type} size must be positive, got {size}")
    return [TensorType(from_onnx(ctx.attrs["output_datatype"]), (size,))]


def _infer_mel_weight_matrix(ctx: InferenceContext) -> list[TensorType]:
    bins, dft_length = _scalar(ctx, 0), _scalar(ctx, 1)
    rows = None if dft_length is None else dft_length // 2 + 1
    return [TensorType(from_onnx(ctx.attrs["output_datatype"]), (rows, bins))]


_INVERSE = Attribute("inverse", "int", 0)
_ONESIDED = Attribute("onesided", "int", 0)
_OUTPUT_DATATYPE = Attribute("output_datatype", "int", FLOAT_CODE)

SCHEMAS: list[OpSchema] = [
    OpSchema(
        "DFT",
        since_version=17,
        inputs=(1, 2),
        attributes=(Attribute("axis", "int", 1), _INVERSE, _ONESIDED),
        infer=_infer_dft,
    ),
    OpSchema("DFT", since_version=20, inputs=(1, 3), attributes=(_INVERSE, _ONESIDED), infer=_infer_dft),
    OpSchema(
        "STFT",
        since_version=17,
        inputs=(2, 4),
        attributes=(Attribute("onesided", "int", 1),),
        infer=_infer_stft,
    ),
    *(
        OpSchema(
            name,
            since_version=17,
            attributes=(_OUTPUT_DATATYPE, Attribute("periodic", "int", 1)),
            infer=_infer_window,
        )
        for name in WINDOWS
    ),
    OpSchema(
        "MelWeightMatrix",
        since_version=17,
        inputs=(5, 5),
        attributes=(_OUTPUT_DATATYPE,),
        infer=_infer_mel_weight_matrix,
    ),
]
