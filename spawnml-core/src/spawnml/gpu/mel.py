"""MelWeightMatrix on the GPU. Its five inputs are scalars that fix the output's shape, read on the
host (free for initializers); the ``num_mel_bins + 2`` filter corners are computed there as ONNX
defines them, in float64, and the weights on the device
(:mod:`spawnml.kernel.library.mel`)."""

from __future__ import annotations

import math

import numpy as np

from ..dtypes import from_onnx
from ..errors import InvalidArgumentError
from ..kernel.ir import f32, f64
from ..kernel.library.mel import mel_weights
from .array import DeviceArray
from .host import host_int, to_host
from .signal import check_numeric_output
from .table import GPU_KERNELS, GPUContext


def _hertz_to_mel(hertz: float) -> float:
    return 2595 * math.log10(1 + hertz / 700)


def mel_edges(bins: int, length: int, rate: int, low_hertz: float, high_hertz: float) -> np.ndarray:
    """The spectrogram bins, ``floor((length + 1) * hertz / rate)``, of ``bins + 2`` edges spaced
    evenly on the mel scale from ``low_hertz`` to ``high_hertz`` (the range in ``bins + 2`` steps)."""
    low, high = _hertz_to_mel(low_hertz), _hertz_to_mel(high_hertz)
    mels = low + np.arange(bins + 2) * ((high - low) / (bins + 2))
    hertz = 700 * (10 ** (mels / 2595) - 1)
    return np.floor((length + 1) * hertz / rate).astype(np.int64)


@GPU_KERNELS.register("MelWeightMatrix", since=17, check=check_numeric_output)
def mel_weight_matrix(
    ctx: GPUContext,
    num_mel_bins: DeviceArray,
    dft_length: DeviceArray,
    sample_rate: DeviceArray,
    lower_edge_hertz: DeviceArray,
    upper_edge_hertz: DeviceArray,
) -> DeviceArray:
    """``(dft_length // 2 + 1, num_mel_bins)`` triangular filter weights."""
    bins, length, rate = (host_int(ctx, x) for x in (num_mel_bins, dft_length, sample_rate))
    if bins < 1 or length < 1 or rate < 1:
        raise InvalidArgumentError(
            "MelWeightMatrix needs positive num_mel_bins, dft_length and sample_rate, "
            f"got {bins}, {length} and {rate}"
        )
    low, high = (float(to_host(ctx, x).reshape(-1)[0]) for x in (lower_edge_hertz, upper_edge_hertz))
    edges = mel_edges(bins, length, rate, low, high)
    if np.abs(edges).max() > np.iinfo(np.int32).max:
        raise InvalidArgumentError(f"MelWeightMatrix edges up to {high} Hz overflow int32 bins")
    out = ctx.backend.empty((length // 2 + 1, bins), from_onnx(int(ctx.attrs.get("output_datatype", 1))))
    k = mel_weights.specialize(T=out.elem, W=f64 if out.elem == f64 else f32)
    ctx.backend.launch_flat(k, [ctx.backend.from_numpy(edges.astype(np.int32)), out], out.size, bins=bins)
    return out
