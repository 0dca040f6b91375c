"""Casts to the narrow types as ONNX's specification states them, written from its text alone.

Expected answers for the narrow-cast tests come from here, not from ml_dtypes' or onnx's
conversions, whose answers for values out of range have changed between versions. Each format is
built from its bit layout and every result is found by searching its table of values, so this
shares no code with the kernels it checks. Results are float64 (floats) and int64 (integers).

The rules, each quoting the text it follows:

- Cast's float 8 tables: 0 -> 0; -0 -> -0 (0 in the fnuz formats); NaN -> NaN (-NaN -> -NaN
  where the format has a sign for NaN); with ``saturate``, "Inf | FLT_MAX", "[x] > FLT_MAX |
  FLT_MAX" (and the negatives); without it, infinities and "[x] > FLT_MAX" give Inf in E5M2 and
  NaN otherwise; "else | RNE" (round to nearest, ties to even).
- The float4 type's cast table (onnx's docs/docsgen/source/technical/float4.md): "Round to
  nearest even" within [-6, 6], "x=+/-0 | +/-0", "x>6 | 6", "x<-6 | -6", "+Inf | 6",
  "-Inf | -6", "NaN | 6"; its ``saturate`` "has no effect for float4e2m1" (QuantizeLinear).
- The int4 and int2 type documents (technical/int4.md, int2.md): "Cast to a 4 bit type is done
  by rounding to the nearest-integer (with ties to even) nearest-even integer and truncating"
  (and alike for 2 bits), truncating as Cast says of fixed point: "discard higher bits and
  reinterpret (with respect to two's complement representation for signed types)". Cast leaves
  floats out of range undefined ("fixed point: undefined if OOR"); in SpawnML NaN and the
  infinities give 0 on every backend.
- The 8- and 16-bit integers (held wider on GPUs): integers wrap as above; the specification
  states no rounding for floats, which SpawnML truncates toward zero as C and numpy convert, and
  wraps inside int32; NaN, the infinities and floats outside int32 give 0 (x86's conversion).
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np


@dataclass(frozen=True)
class Format:
    """A narrow float format by its bit layout: ``exponent`` and ``mantissa`` bits, ``bias``;
    ``ieee``: the top exponent holds the infinities and NaN (E5M2); ``fn``: only the all-ones code
    is NaN, no infinities (E4M3FN); ``fnuz``: the code of -0 is the one NaN, no infinities; none of
    these: every code is finite (E2M1)."""

    exponent: int
    mantissa: int
    bias: int
    kind: str  # "ieee", "fn", "fnuz" or "finite"

    def decode(self, code: int) -> float:
        """The value of a non-negative code (NaN or infinity where the format says so)."""
        e, m = code >> self.mantissa, code & ((1 << self.mantissa) - 1)
        top = (1 << self.exponent) - 1
        if self.kind == "ieee" and e == top:
            return math.inf if m == 0 else math.nan
        if self.kind == "fn" and e == top and m == (1 << self.mantissa) - 1:
            return math.nan
        if e == 0:  # subnormals
            return m * 2.0 ** (1 - self.bias - self.mantissa)
        return (1 + m * 2.0**-self.mantissa) * 2.0 ** (e - self.bias)

    @cached_property
    def values(self) -> list[float]:
        """The finite non-negative values in code order, then the value one step past the largest,
        which rounding to the format's precision alone (``[x]``) could reach."""
        codes = range(1 << (self.exponent + self.mantissa))
        finite = [v for v in map(self.decode, codes) if math.isfinite(v)]
        step = finite[-1] - finite[-2]  # the largest's binade's spacing
        return [*finite, finite[-1] + step]

    @property
    def largest(self) -> float:
        return self.values[-2]


FORMATS = {
    "float8_e4m3fn": Format(4, 3, 7, "fn"),
    "float8_e4m3fnuz": Format(4, 3, 8, "fnuz"),
    "float8_e5m2": Format(5, 2, 15, "ieee"),
    "float8_e5m2fnuz": Format(5, 2, 16, "fnuz"),
    "float4_e2m1fn": Format(2, 1, 1, "finite"),
}


def rne(size: float, fmt: Format) -> float:
    """``size`` (finite, not negative) rounded to nearest among ``fmt.values``, ties to the even
    code (codes count up from 0 in ``values``' order, so an even index is an even code)."""
    values = fmt.values
    if size >= values[-1]:
        return values[-1]
    i = bisect.bisect_left(values, size)  # values[i - 1] < size <= values[i]
    if values[i] == size or i == 0:
        return values[i]
    below, above = values[i - 1], values[i]
    if size - below != above - size:
        return below if size - below < above - size else above
    return below if (i - 1) % 2 == 0 else above


def cast_float(x: float, name: str, saturate: bool = True) -> float:
    """``x`` cast to the float format ``name`` (an ml_dtypes type name) by the tables above."""
    fmt = FORMATS[name]
    negative = math.copysign(1.0, x) < 0
    if math.isnan(x):
        if fmt.kind == "finite":
            return 6.0  # "NaN | 6"
        return math.copysign(math.nan, -1.0 if negative and fmt.kind != "fnuz" else 1.0)
    rounded = math.inf if math.isinf(x) else rne(abs(x), fmt)
    if rounded > fmt.largest:  # "Inf" and "[x] > FLT_MAX"
        if saturate or fmt.kind == "finite":
            rounded = fmt.largest
        else:
            rounded = math.inf if fmt.kind == "ieee" else math.nan
        if math.isnan(rounded) and fmt.kind == "fnuz":
            return math.nan  # the fnuz formats' one NaN has no sign
    if rounded == 0 and fmt.kind == "fnuz":
        return 0.0  # "-0 | 0"
    return -rounded if negative else rounded


def cast_integer(x: float | int, bits: int, signed: bool) -> int:
    """``x`` (a float, int or bool) cast to a ``bits``-bit integer by the rules above."""
    if isinstance(x, float):
        if not math.isfinite(x):
            return 0
        if bits <= 4:
            x = round(x)  # Python's round: to nearest, ties to even
        elif abs(x) >= 2.0**31:
            return 0
        else:
            x = math.trunc(x)
    low = int(x) % 2**bits  # the low bits of two's complement
    return low - 2**bits if signed and low >= 2 ** (bits - 1) else low


def cast(x: np.ndarray, target: np.dtype, saturate: bool = True) -> np.ndarray:
    """Every element of ``x`` cast to the narrow ``target`` (float64 or int64 results)."""
    target = np.dtype(target)
    with np.errstate(invalid="ignore"):  # signalling NaNs
        items = x.astype(np.float64) if x.dtype.kind not in "biu" else x
    if target.name in FORMATS:
        out = [cast_float(float(v), target.name, saturate) for v in items.reshape(-1).tolist()]
        return np.array(out, np.float64).reshape(x.shape)
    bits = int(target.name.removeprefix("u").removeprefix("int"))
    signed = not target.name.startswith("u")
    out = [cast_integer(v, bits, signed) for v in items.reshape(-1).tolist()]
    return np.array(out, np.int64).reshape(x.shape)
