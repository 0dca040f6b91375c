"""Casts to the 8- and 4-bit floats and the 4- and 2-bit integers by ONNX's rules, in numpy.

ml_dtypes holds the results, but its own conversions are not used to round or wrap: their answers
for values out of range have changed between its versions. The float formats are those of
:data:`spawnml.kernel.library.narrow.FORMATS`, which the GPU kernels round by, so every backend
follows the same rules:

- floats round to nearest, ties to even (the Cast tables' "RNE"); values whose rounding passes the
  largest finite value ("[x] > FLT_MAX") and the infinities become the largest with their sign when
  saturating, else infinity (E5M2) or NaN; -0 stays -0 except in the ``fnuz`` formats, which have no
  -0; float4e2m1 has neither infinity nor NaN and always saturates, NaN giving 6 (its cast table);
- the 4- and 2-bit integers keep the low bits, two's complement, of integers and of floats
  "rounding to the nearest-integer (with ties to even) nearest-even integer and truncating" (the
  int4 and int2 type documents); the specification leaves NaN and the infinities undefined
  ("fixed point: undefined if OOR"): they give 0, as on the GPU.
"""

from __future__ import annotations

import numpy as np
from spawnml.dtypes import NARROW_INTEGER_NAMES, iinfo
from spawnml.kernel.library.narrow import FORMATS

#: The 4- and 2-bit integer types.
NARROW_INTEGERS = NARROW_INTEGER_NAMES
#: The 8- and 4-bit float types Cast rounds to (all but float8e8m0).
NARROW_FLOATS = frozenset(FORMATS)


def _is_float(dtype: np.dtype) -> bool:
    """Whether ``dtype``'s values convert to float64 exactly (strings are parsed as numbers)."""
    return dtype.kind in "fO" or dtype.name in FORMATS or dtype.name == "bfloat16"


def to_narrow_float(x: np.ndarray, target: np.dtype, saturate: bool) -> np.ndarray:
    """``x`` rounded to the 8- or 4-bit float ``target``, past its range as ``saturate`` says."""
    fmt = FORMATS[np.dtype(target).name]
    with np.errstate(all="ignore"):  # signalling NaNs, and infinities divided
        value = x.astype(np.float64)  # exact for every source float; integers past 2**53 overflow anyway
        size = np.abs(value)
        # The binade's spacing: the smallest normal one's for the subnormals and zero.
        exponent = np.maximum(np.frexp(size)[1] - 1, fmt.min_exponent)
        spacing = np.ldexp(1.0, exponent - fmt.mantissa)
        magnitude = np.rint(size / spacing) * spacing  # numpy's rint: ties to even; exact steps
        overflow = fmt.overflow_value(saturate)
        out = np.where(magnitude > fmt.largest, overflow, magnitude)  # the infinities too
        out = np.copysign(out, value)
    if not fmt.signed_zero:
        out[out == 0] = 0.0
    nan = np.isnan(value)
    if fmt.nan is not None:
        out[nan] = fmt.nan
    elif fmt.signed_zero:
        out[nan] = np.copysign(np.nan, value[nan])  # -NaN stays -NaN (the tables' "-NaN")
    else:
        out[nan] = np.nan  # one NaN in the fnuz formats
    return out.astype(target)


def to_narrow_integer(x: np.ndarray, target: np.dtype) -> np.ndarray:
    """``x``'s low bits as the 4- or 2-bit integer ``target``, floats rounded half to even first."""
    info = iinfo(target)
    count = 2**info.bits
    if not _is_float(x.dtype):
        # Integers and bool: the low bits of two's complement, which int64 (wrapping uint64) keeps.
        low = x.astype(np.int64) & (count - 1)
    else:
        # rint is exact and fmod-based mod is exact, so any finite float keeps its true low bits.
        with np.errstate(invalid="ignore"):
            value = x.astype(np.float64)
            finite = np.isfinite(value)
            low = np.where(finite, np.mod(np.rint(value), count), 0).astype(np.int64)
    if info.min < 0:
        low = np.where(low >= count // 2, low - count, low)
    return low.astype(target)


def to_narrow(x: np.ndarray, target: np.dtype, saturate: bool) -> np.ndarray | None:
    """``x`` cast to ``target`` when it is an 8- or 4-bit float or a 4- or 2-bit integer, else None."""
    target = np.dtype(target)
    if target.name in NARROW_FLOATS:
        return to_narrow_float(x, target, saturate)
    if target.name in NARROW_INTEGERS:
        return to_narrow_integer(x, target)
    return None
