"""CPU kernels of the signal-processing operators: DFT, STFT, windows and MelWeightMatrix.

Transforms run in numpy's pocketfft, in double precision for double inputs and in single
precision otherwise, as onnxruntime and ONNX's reference do.
"""

from __future__ import annotations

import math

import numpy as np
from spawnml.backend import CheckFn, KernelContext
from spawnml.dtypes import from_onnx
from spawnml.errors import SpawnMLError
from spawnml.ir import Node
from spawnml.ops.defs.signal import WINDOWS, dft_axis, dft_sizes, stft_frames

from .checks import scalar
from .table import KERNELS

#: Cosine-sum coefficients ``a_k`` of each window: ``w[n] = sum_k (-1)^k a_k cos(2 pi k n / N)``.
WINDOW_COEFFICIENTS: dict[str, tuple[float, ...]] = {
    "HannWindow": (0.5, 0.5),
    "HammingWindow": (25 / 46, 21 / 46),
    "BlackmanWindow": (0.42, 0.5, 0.08),
}
#: Element types the generators may produce.
_NUMERIC = frozenset(
    {"uint8", "uint16", "uint32", "uint64", "int8", "int16", "int32", "int64"}
    | {"float16", "float32", "float64", "bfloat16"}
)
#: The complex transforms by ``(inverse, onesided)``; the one-sided inverse is real.
_TRANSFORMS = {(False, False): np.fft.fft, (True, False): np.fft.ifft, (False, True): np.fft.rfft}


def _complex(x: np.ndarray) -> np.ndarray:
    """A ``(..., 1)`` real or ``(..., 2)`` interleaved complex array as ``(...)`` values."""
    work: type[np.floating] = np.float64 if x.dtype == np.float64 else np.float32
    if x.shape[-1] == 1:
        return x[..., 0].astype(work)
    if x.shape[-1] == 2:
        return x[..., 0].astype(work) + 1j * x[..., 1].astype(work)
    raise ValueError(f"the last axis holds real and imaginary parts and must be 1 or 2, got {x.shape[-1]}")


def _interleaved(z: np.ndarray, dtype: np.dtype) -> np.ndarray:
    return np.stack([z.real, z.imag], axis=-1).astype(dtype)


def _flag_check(*attrs: str) -> CheckFn:
    """Refuses nodes whose boolean attributes ``attrs`` are not 0 or 1."""

    def check(node: Node, opset: int) -> str | None:
        bad = [name for name in attrs if node.attrs.get(name, 0) not in (0, 1)]
        return f"{', '.join(bad)} must be 0 or 1" if bad else None

    return check


def _numeric_output(node: Node, opset: int) -> str | None:
    """Refuses generators asked for a non-numeric ``output_datatype``."""
    code = node.attrs.get("output_datatype", 1)
    try:
        dtype = from_onnx(code)
    except SpawnMLError as error:
        return str(error)
    return None if dtype.name in _NUMERIC else f"output_datatype {dtype} is not a numeric type"


# ---------------------------------------------------------------------------- transforms


@KERNELS.register("DFT", since=17, check=_flag_check("inverse", "onesided"))
def dft(
    ctx: KernelContext, x: np.ndarray, dft_length: np.ndarray | None = None, axis: np.ndarray | None = None
) -> np.ndarray:
    chosen = dft_axis(ctx.attrs.get("axis", -2) if axis is None else scalar(axis), x.ndim)
    inverse, onesided = bool(ctx.attrs["inverse"]), bool(ctx.attrs["onesided"])
    requested = None if dft_length is None else scalar(dft_length)
    length, _ = dft_sizes(x.shape[chosen], requested, inverse, onesided)
    signal = _complex(x)
    if inverse and onesided:
        return np.fft.irfft(signal, length, axis=chosen)[..., None].astype(x.dtype)
    if onesided and np.iscomplexobj(signal):
        raise ValueError("a one-sided forward DFT needs a real input (last axis of 1)")
    return _interleaved(_TRANSFORMS[inverse, onesided](signal, length, axis=chosen), x.dtype)


@KERNELS.register("STFT", since=17, check=_flag_check("onesided"))
def stft(
    ctx: KernelContext,
    signal: np.ndarray,
    frame_step: np.ndarray,
    window: np.ndarray | None = None,
    frame_length: np.ndarray | None = None,
) -> np.ndarray:
    if signal.ndim != 3:
        raise ValueError(f"STFT expects a signal of shape (batch, length, 1 or 2), got {signal.shape}")
    if frame_length is not None:
        size = scalar(frame_length)
    else:
        size = signal.shape[1] if window is None else window.shape[0]
    if window is not None and window.shape != (size,):
        raise ValueError(f"STFT window of shape {window.shape} does not match frame length {size}")
    step = scalar(frame_step)
    starts = np.arange(stft_frames(signal.shape[1], size, step)) * step
    frames = _complex(signal)[:, starts[:, None] + np.arange(size)]
    if window is not None:
        frames = frames * window.astype(frames.real.dtype)
    if ctx.attrs["onesided"]:
        if np.iscomplexobj(frames):
            raise ValueError("a one-sided STFT needs a real signal (last axis of 1)")
        return _interleaved(np.fft.rfft(frames, axis=-1), signal.dtype)
    return _interleaved(np.fft.fft(frames, axis=-1), signal.dtype)


# ---------------------------------------------------------------------------- generators


def _window_kernel(name: str):
    coefficients = WINDOW_COEFFICIENTS[name]

    def window(ctx: KernelContext, size: np.ndarray) -> np.ndarray:
        count = scalar(size)
        if count < 1:
            raise ValueError(f"{name} size must be positive, got {count}")
        period = count if ctx.attrs["periodic"] else count - 1
        with np.errstate(divide="ignore", invalid="ignore"):
            phase = 2 * np.pi * np.arange(count) / period
        terms = [(-1) ** k * a * np.cos(k * phase) for k, a in enumerate(coefficients)]
        values = sum(reversed(terms))  # smallest terms first: exact zeros and ones stay exact
        return values.astype(from_onnx(ctx.attrs["output_datatype"]))

    window.__name__ = window.__qualname__ = name
    return window


for _name in WINDOWS:
    KERNELS.register(_name, since=17, check=_numeric_output)(_window_kernel(_name))


def _hertz_to_mel(hertz: float) -> float:
    return 2595 * math.log10(1 + hertz / 700)


def _mel_to_hertz(mel: np.ndarray) -> np.ndarray:
    return 700 * (10 ** (mel / 2595) - 1)


@KERNELS.register("MelWeightMatrix", since=17, check=_numeric_output)
def mel_weight_matrix(
    ctx: KernelContext,
    num_mel_bins: np.ndarray,
    dft_length: np.ndarray,
    sample_rate: np.ndarray,
    lower_edge_hertz: np.ndarray,
    upper_edge_hertz: np.ndarray,
) -> np.ndarray:
    """Triangular filters between ``num_mel_bins + 2`` edges spaced evenly on the mel scale.

    As in ONNX's definition, the mel range is divided into ``num_mel_bins + 2`` steps and
    each edge is floored to the spectrogram bin ``(dft_length + 1) * hertz // sample_rate``.
    """
    bins, length, rate = scalar(num_mel_bins), scalar(dft_length), scalar(sample_rate)
    low, high = (_hertz_to_mel(float(edge.reshape(-1)[0])) for edge in (lower_edge_hertz, upper_edge_hertz))
    mels = low + np.arange(bins + 2) * ((high - low) / (bins + 2))
    edges = np.floor((length + 1) * _mel_to_hertz(mels) / rate).astype(np.int64)
    left, center, right = edges[:-2], edges[1:-1], edges[2:]
    row = np.arange(length // 2 + 1)[:, None]
    rising = (row - left) / np.maximum(center - left, 1)
    falling = (right - row) / np.maximum(right - center, 1)
    weights = np.where((left <= row) & (row <= center), rising, 0.0)
    weights = np.where((center < row) & (row < right), falling, weights)
    weights = np.where(row == center, 1.0, weights)
    return weights.astype(from_onnx(ctx.attrs["output_datatype"]))
