"""Casts to the 8- and 4-bit floats and the 4- and 2-bit integers on the device: rounded or wrapped
by the kernels of :mod:`spawnml.kernel.library.narrow`, the results held as float32 and int32."""

from __future__ import annotations

import ml_dtypes
import numpy as np

from ..backend import KernelContext
from ..errors import InvalidArgumentError
from ..kernel.ir import f32, i32
from ..kernel.library.narrow import FORMATS, round_to_float, wrap_to_int
from .array import NARROW_FLOATS, NARROW_INTEGERS, DeviceArray


def narrowed(ctx: KernelContext, x: DeviceArray, target: np.dtype, saturate: bool) -> DeviceArray:
    """``x`` (held as float32 or int32) as ``target``: rounded to nearest even for a float, values
    past its largest saturating to it when ``saturate``; wrapped for an integer."""
    if x.elem not in (f32, i32):
        raise InvalidArgumentError(f"narrowing takes tensors held as float32 or int32, not {x.dtype}")
    target = np.dtype(target)
    out = ctx.backend.empty(x.shape, target)
    if target in NARROW_FLOATS:
        fmt = FORMATS[target.name]
        kernel = round_to_float(fmt, x.elem)
        ctx.backend.launch_flat(kernel, [x, out], out.size, overflow=fmt.overflow_value(saturate))
    elif target in NARROW_INTEGERS:
        info = ml_dtypes.iinfo(target)
        kernel = wrap_to_int(info.bits, info.min < 0, x.elem)
        ctx.backend.launch_flat(kernel, [x, out], out.size)
    else:
        raise InvalidArgumentError(f"{target} is not one of the 8- and 4-bit floats or 4- and 2-bit integers")
    return out
