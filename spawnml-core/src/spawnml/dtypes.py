"""Element types: numpy dtypes (with ``ml_dtypes`` for the ML-only ones) and their ONNX codes.

SpawnML describes every element type as a ``numpy.dtype``; strings use the object dtype.
The ONNX ``TensorProto.DataType`` codes are listed here because they are the common
currency of model files, not only of ONNX.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

from .errors import InvalidArgumentError

STRING = np.dtype(object)

# ONNX TensorProto.DataType code -> (type name as ONNX Runtime prints it, dtype)
_BY_CODE: dict[int, tuple[str, np.dtype]] = {
    1: ("float", np.dtype(np.float32)),
    2: ("uint8", np.dtype(np.uint8)),
    3: ("int8", np.dtype(np.int8)),
    4: ("uint16", np.dtype(np.uint16)),
    5: ("int16", np.dtype(np.int16)),
    6: ("int32", np.dtype(np.int32)),
    7: ("int64", np.dtype(np.int64)),
    8: ("string", STRING),
    9: ("bool", np.dtype(np.bool_)),
    10: ("float16", np.dtype(np.float16)),
    11: ("double", np.dtype(np.float64)),
    12: ("uint32", np.dtype(np.uint32)),
    13: ("uint64", np.dtype(np.uint64)),
    14: ("complex64", np.dtype(np.complex64)),
    15: ("complex128", np.dtype(np.complex128)),
}
_CODE_BY_DTYPE = {dtype: code for code, (_, dtype) in _BY_CODE.items()}
#: ml_dtypes' types (codes 16 and up) join the tables when first asked for: importing
#: ml_dtypes costs more than the rest of ``import spawnml`` (0.6 s of CPU for version 0.7).
_NARROW_LOADED = False


def _load_narrow() -> None:
    global _NARROW_LOADED
    if _NARROW_LOADED:
        return
    import ml_dtypes

    narrow = {
        16: ("bfloat16", np.dtype(ml_dtypes.bfloat16)),
        17: ("float8e4m3fn", np.dtype(ml_dtypes.float8_e4m3fn)),
        18: ("float8e4m3fnuz", np.dtype(ml_dtypes.float8_e4m3fnuz)),
        19: ("float8e5m2", np.dtype(ml_dtypes.float8_e5m2)),
        20: ("float8e5m2fnuz", np.dtype(ml_dtypes.float8_e5m2fnuz)),
        21: ("uint4", np.dtype(ml_dtypes.uint4)),
        22: ("int4", np.dtype(ml_dtypes.int4)),
        23: ("float4e2m1", np.dtype(ml_dtypes.float4_e2m1fn)),
        24: ("float8e8m0", np.dtype(ml_dtypes.float8_e8m0fnu)),
        25: ("uint2", np.dtype(ml_dtypes.uint2)),
        26: ("int2", np.dtype(ml_dtypes.int2)),
    }
    _BY_CODE.update(narrow)
    _CODE_BY_DTYPE.update({dtype: code for code, (_, dtype) in narrow.items()})
    _NARROW_LOADED = True


def _code(dtype: np.dtype) -> int | None:
    # A dtype of ml_dtypes' can only exist once ml_dtypes is imported; others never need it.
    if dtype not in _CODE_BY_DTYPE and "ml_dtypes" in sys.modules:
        _load_narrow()
    return _CODE_BY_DTYPE.get(dtype)


#: Names numpy gives ml_dtypes' 4- and 2-bit integers, and its 8- and 4-bit floats. Kernels test a
#: dtype by name against these: an array of one can only exist once ml_dtypes is imported, and
#: naming them here keeps every module that only checks types from importing it.
NARROW_INTEGER_NAMES = frozenset({"int4", "uint4", "int2", "uint2"})
NARROW_FLOAT_NAMES = frozenset(
    {"float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz", "float4_e2m1fn", "float8_e8m0fnu"}
)
#: The 16-bit floats kernels compute in float32.
HALF_FLOAT_NAMES = frozenset({"float16", "bfloat16"})
_NUMPY_FLOATS = frozenset({"float16", "float32", "float64", "longdouble"})


def iinfo(dtype: np.dtype) -> Any:
    """The range of an integer type: numpy's, or ml_dtypes' for its 4- and 2-bit integers."""
    dtype = np.dtype(dtype)
    if dtype.name not in NARROW_INTEGER_NAMES:
        return np.iinfo(dtype)
    import ml_dtypes  # loaded already: an array of its types exists

    return ml_dtypes.iinfo(dtype)


def finfo(dtype: np.dtype) -> Any:
    """The range of a float type: numpy's, or ml_dtypes' for bfloat16 and its narrow floats."""
    dtype = np.dtype(dtype)
    if dtype.name in _NUMPY_FLOATS:
        return np.finfo(dtype)
    import ml_dtypes  # loaded already: an array of its types exists

    return ml_dtypes.finfo(dtype)


def from_onnx(code: int) -> np.dtype:
    """The dtype of an ONNX ``TensorProto.DataType`` code."""
    if code >= 16:
        _load_narrow()
    try:
        return _BY_CODE[code][1]
    except KeyError:
        raise InvalidArgumentError(f"unknown ONNX element type code {code}") from None


def to_onnx(dtype: np.dtype) -> int:
    """The ONNX ``TensorProto.DataType`` code of a dtype."""
    code = _code(np.dtype(dtype))
    if code is None:
        raise InvalidArgumentError(f"dtype {dtype} has no ONNX element type")
    return code


def name(dtype: np.dtype | None) -> str:
    """Short element-type name, e.g. ``float`` or ``int64``; ``unknown`` for None."""
    if dtype is None:
        return "unknown"
    code = _code(np.dtype(dtype))
    return _BY_CODE[code][0] if code is not None else str(dtype)


def type_string(dtype: np.dtype | None) -> str:
    """ONNX Runtime's type string for a tensor of this dtype, e.g. ``tensor(float)``."""
    return f"tensor({name(dtype)})"


# torch's names for element types (``spawnml.float32``, ``spawnml.int64``, ...).
float16 = np.dtype(np.float16)
float32 = np.dtype(np.float32)
float64 = np.dtype(np.float64)
int8 = np.dtype(np.int8)
int16 = np.dtype(np.int16)
int32 = np.dtype(np.int32)
int64 = np.dtype(np.int64)
uint8 = np.dtype(np.uint8)
bool = np.dtype(np.bool_)


def __getattr__(attribute: str) -> Any:
    """``bfloat16``, made when first used so that importing this module leaves ml_dtypes alone."""
    if attribute == "bfloat16":
        return from_onnx(16)
    raise AttributeError(f"module {__name__!r} has no attribute {attribute!r}")
