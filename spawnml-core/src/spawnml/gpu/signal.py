"""Signal operators on the GPU. DFT is the transform by its definition, one thread per output
value (see :mod:`spawnml.kernel.library.dft`), and STFT that transform of gathered, windowed
frames; the Hann, Hamming and Blackman windows are one
generated chain over the point indices. Axes, lengths and sizes, shape-like inputs, are read on
the host."""

from __future__ import annotations

import math

import numpy as np

from ..dtypes import from_onnx
from ..errors import InvalidArgumentError
from ..ir import Node
from ..kernel.library.chain import step
from ..kernel.library.dft import dft as dft_kernel
from ..ops.defs.signal import dft_axis, dft_sizes, stft_frames
from .array import PHYSICAL, DeviceArray
from .fused import run_chain
from .host import host_int
from .table import FLOATS, GPU_KERNELS, GPUContext, take


def _flags(node: Node, opset: int) -> str | None:
    bad = [name for name in ("inverse", "onesided") if node.attrs.get(name, 0) not in (0, 1)]
    return f"{', '.join(bad)} must be 0 or 1" if bad else None


@GPU_KERNELS.register("DFT", since=17, check=_flags, dtypes=FLOATS)
def dft(
    ctx: GPUContext, x: DeviceArray, dft_length: DeviceArray | None = None, axis: DeviceArray | None = None
) -> DeviceArray:
    """``(..., 1 or 2)`` real or complex input; complex output, or real from a one-sided inverse."""
    chosen = dft_axis(int(ctx.attrs.get("axis", -2)) if axis is None else host_int(ctx, axis), len(x.shape))
    requested = None if dft_length is None else host_int(ctx, dft_length)
    return transform(
        ctx, x, chosen, requested, bool(ctx.attrs.get("inverse", 0)), bool(ctx.attrs.get("onesided", 0))
    )


def transform(
    ctx: GPUContext, x: DeviceArray, axis: int, length: int | None, inverse: bool, onesided: bool
) -> DeviceArray:
    """The DFT of ``x`` along ``axis`` (in range, not the last), of ``length`` (else the axis')."""
    parts = x.shape[-1]
    if parts not in (1, 2) or (onesided and not inverse and parts == 2):
        raise InvalidArgumentError(
            f"DFT of an input of shape {list(x.shape)}: the last axis holds 1 (real) or 2 (complex) parts, "
            "and a one-sided forward transform takes a real input"
        )
    size, count = dft_sizes(x.shape[axis], length, inverse, onesided)
    real = inverse and onesided
    out = ctx.backend.empty((*x.shape[:axis], count, *x.shape[axis + 1 : -1], 1 if real else 2), x.dtype)
    if out.size:
        inner = math.prod(x.shape[axis + 1 : -1])
        k = dft_kernel.specialize(T=x.elem, INVERSE=inverse, HALF=onesided)
        scalars = {"L": x.shape[axis], "N": size, "M": count, "inner": inner, "C": parts}
        ctx.backend.launch_flat(k, [x, out], out.size // (1 if real else 2), **scalars)
    return out


@GPU_KERNELS.register("STFT", since=17, check=_flags, dtypes=FLOATS)
def stft(
    ctx: GPUContext,
    signal: DeviceArray,
    frame_step: DeviceArray,
    window: DeviceArray | None = None,
    frame_length: DeviceArray | None = None,
) -> DeviceArray:
    """The frames of ``signal`` (batch, length, 1 or 2), gathered, windowed and transformed."""
    if len(signal.shape) != 3:
        raise InvalidArgumentError(
            f"STFT takes a signal of shape (batch, length, 1 or 2), not {list(signal.shape)}"
        )
    if frame_length is not None:
        size = host_int(ctx, frame_length)
    else:
        size = signal.shape[1] if window is None else window.shape[0]
    if window is not None and window.shape != (size,):
        raise InvalidArgumentError(f"an STFT window of shape {list(window.shape)} for frames of {size}")
    hop = host_int(ctx, frame_step)
    starts = np.arange(stft_frames(signal.shape[1], size, hop)) * hop
    positions = (starts[:, None] + np.arange(size)).astype(np.int32)
    frames = take(ctx, signal, ctx.backend.from_numpy(positions), 1)
    if window is not None:
        steps = (step("Mul", [0, 1], signal.dtype.name),)
        frames = run_chain(ctx, steps, [frames, window.view((size, 1))], "stft_window")
    return transform(ctx, frames, 2, None, False, bool(ctx.attrs.get("onesided", 1)))


#: Cosine-sum coefficients ``a_k`` of each window: ``w[n] = sum_k (-1)^k a_k cos(2 pi k n / N)``.
WINDOW_COEFFICIENTS: dict[str, tuple[float, ...]] = {
    "HannWindow": (0.5, 0.5),
    "HammingWindow": (25 / 46, 21 / 46),
    "BlackmanWindow": (0.42, 0.5, 0.08),
}
#: The chains over ``[n, 2 pi / N, a_0, a_1, (a_2, 2)]``: ``a_0 - a_1 cos(phase)``, and for three
#: terms ``(a_2 cos(2 phase) - a_1 cos(phase)) + a_0``, smallest terms first as the reference adds.
_COSINE_SUMS = {
    2: (("Mul", [0, 1]), ("Cos", [4]), ("Mul", [5, 3]), ("Sub", [2, 6])),
    3: (
        ("Mul", [0, 1]),  # 6: the phase
        ("Mul", [6, 5]),
        ("Cos", [7]),
        ("Mul", [8, 4]),
        ("Cos", [6]),
        ("Mul", [10, 3]),
        ("Sub", [9, 11]),
        ("Add", [12, 2]),
    ),
}


def check_numeric_output(node: Node, opset: int) -> str | None:
    dtype = from_onnx(int(node.attrs.get("output_datatype", 1)))
    return (
        None if dtype in PHYSICAL and dtype != np.bool_ else f"output_datatype {dtype} is not held on the GPU"
    )


def _window(ctx: GPUContext, size: DeviceArray, coefficients: tuple[float, ...]) -> DeviceArray:
    """The window of ``size`` points over a period of ``size`` (``periodic``) or ``size - 1``."""
    count = host_int(ctx, size)
    if count < 1:
        raise InvalidArgumentError(f"a window size must be positive, got {count}")
    period = count if ctx.attrs.get("periodic", 1) else count - 1
    values = (2 * math.pi / period if period else math.nan, *coefficients, *(2.0,) * (len(coefficients) > 2))
    inputs = [ctx.backend.from_numpy(np.arange(count, dtype=np.float32))]
    inputs += [ctx.backend.from_numpy(np.array(v, np.float32)) for v in values]
    steps = [step(op, refs, "float32") for op, refs in _COSINE_SUMS[len(coefficients)]]
    target = from_onnx(int(ctx.attrs.get("output_datatype", 1)))
    steps.append(step("Cast", [len(inputs) + len(steps) - 1], target.name))
    return run_chain(ctx, tuple(steps), inputs, "cosine_window")


def _register_windows() -> None:
    for name, coefficients in WINDOW_COEFFICIENTS.items():
        GPU_KERNELS.register(name, since=17, check=check_numeric_output)(
            lambda ctx, size, _c=coefficients: _window(ctx, size, _c)
        )


_register_windows()
