"""Operators of the ai.onnx.ml domain on the GPU: Binarizer (one generated comparison) and
ArrayFeatureExtractor (a gather along the last axis).

ArrayFeatureExtractor's indices are read on the host to be checked (free for an initializer,
as they are in exported pipelines): an index out of range is an error, not a read past the row.
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import InvalidArgumentError
from ..kernel.library.chain import step
from ..ops.defs.ml import ML
from .array import DeviceArray
from .fused import run_chain
from .host import to_host
from .table import GPU_KERNELS, GPUContext, take

_I32 = np.iinfo(np.int32)


@GPU_KERNELS.register("Binarizer", domain=ML, dtypes=(np.float32, np.float64, np.int32, np.int64))
def binarizer(ctx: GPUContext, x: DeviceArray) -> DeviceArray:
    """1 where ``x > threshold``, else 0, in ``x``'s type. Floats compare with the threshold in
    their own type; integers with its floor, which decides ``x > threshold`` for them exactly."""
    threshold = float(ctx.attrs.get("threshold", 0.0))
    if x.dtype.kind == "f":
        bound = np.array(threshold, x.elem.numpy)
    else:
        floor = math.floor(threshold) if math.isfinite(threshold) else _I32.min if threshold < 0 else _I32.max
        bound = np.array(min(max(floor, _I32.min), _I32.max), np.int32)
    steps = (step("Greater", [0, 1], "bool"), step("Cast", [2], x.dtype.name))
    return run_chain(ctx, steps, [x, ctx.backend.from_numpy(bound)], "binarizer")


@GPU_KERNELS.register("ArrayFeatureExtractor", domain=ML, dtypes=(np.float32, np.float64, np.int32, np.int64))
def array_feature_extractor(ctx: GPUContext, x: DeviceArray, indices: DeviceArray) -> DeviceArray:
    """The entries of ``x``'s last axis at ``indices`` (flattened); a vector gives one row."""
    chosen = to_host(ctx, indices).reshape(-1)
    width = x.shape[-1] if x.shape else 0
    if not chosen.size or chosen.min() < 0 or chosen.max() >= width:
        raise InvalidArgumentError(
            f"ArrayFeatureExtractor indices {chosen.tolist()[:16]} must be non-empty and in [0, {width})"
        )
    out = take(ctx, x, ctx.backend.from_numpy(chosen.astype(np.int32)), len(x.shape) - 1)
    return out.view((1, chosen.size)) if len(x.shape) == 1 else out
