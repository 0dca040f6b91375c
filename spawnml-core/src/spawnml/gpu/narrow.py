"""Casts to the types a GPU holds in a wider one, other than the 16-bit floats: rounded to the 8- and
4-bit floats, wrapped into the 2- to 16-bit integers on the device by the kernels of
:mod:`spawnml.kernel.library.narrow`, by ONNX's rules, the results held as float32 and int32."""

from __future__ import annotations

from typing import TYPE_CHECKING

import ml_dtypes
import numpy as np

from ..errors import InvalidArgumentError
from ..kernel.ir import f32, i32
from ..kernel.library.narrow import FORMATS, round_to_float, wrap_to_int
from .array import NARROW_FLOATS, NARROW_INTEGERS, DeviceArray

if TYPE_CHECKING:
    from .table import GPUContext  # the table imports this module

#: The integers held as int32 whose casts wrap into their range on the device.
WRAPPED = (*(np.dtype(t) for t in (np.int8, np.uint8, np.int16, np.uint16)), *NARROW_INTEGERS)
#: The types :func:`narrowed` casts to.
NARROWED = (*NARROW_FLOATS, *WRAPPED)


def narrowed(ctx: GPUContext, x: DeviceArray, target: np.dtype, saturate: bool) -> DeviceArray:
    """``x`` (held as float32 or int32) as ``target``: rounded to nearest even for a float, values
    past its largest saturating to it when ``saturate`` (always for float4); wrapped for an integer,
    floats first rounded to nearest even for the 4- and 2-bit ones, truncated for the others."""
    if x.elem not in (f32, i32):
        raise InvalidArgumentError(f"narrowing takes tensors held as float32 or int32, not {x.dtype}")
    target = np.dtype(target)
    out = ctx.backend.empty(x.shape, target)
    if target in NARROW_FLOATS:
        fmt = FORMATS[target.name]
        kernel = round_to_float(fmt, x.elem)
        ctx.backend.launch_flat(kernel, [x, out], out.size, overflow=fmt.overflow_value(saturate))
    elif target in WRAPPED:
        info = ml_dtypes.iinfo(target)
        kernel = wrap_to_int(info.bits, info.min < 0, x.elem, round_even=target in NARROW_INTEGERS)
        ctx.backend.launch_flat(kernel, [x, out], out.size)
    else:
        raise InvalidArgumentError(f"{target} is not one of {', '.join(map(str, NARROWED))}")
    return out
