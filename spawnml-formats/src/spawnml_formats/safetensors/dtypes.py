"""SafeTensors element type names and the numpy dtypes (``ml_dtypes`` for ML-only ones) they map to."""

from __future__ import annotations

from functools import cache

import numpy as np
from spawnml import ModelLoadError


@cache
def safetensors_dtypes() -> dict[str, np.dtype]:
    """SafeTensors type names -> dtypes;
    made on first use, since importing ml_dtypes takes most of a second."""
    import ml_dtypes

    return {
        "BOOL": np.dtype(np.bool_),
        "U8": np.dtype("<u1"),
        "I8": np.dtype("<i1"),
        "U16": np.dtype("<u2"),
        "I16": np.dtype("<i2"),
        "U32": np.dtype("<u4"),
        "I32": np.dtype("<i4"),
        "U64": np.dtype("<u8"),
        "I64": np.dtype("<i8"),
        "F16": np.dtype("<f2"),
        "BF16": np.dtype(ml_dtypes.bfloat16),
        "F32": np.dtype("<f4"),
        "F64": np.dtype("<f8"),
        "C64": np.dtype("<c8"),
        "F8_E4M3": np.dtype(ml_dtypes.float8_e4m3fn),
        "F8_E5M2": np.dtype(ml_dtypes.float8_e5m2),
        "F8_E8M0": np.dtype(ml_dtypes.float8_e8m0fnu),
    }


def dtype_of(name: str, where: str) -> np.dtype:
    """The dtype of a SafeTensors type name; packed sub-byte types are refused."""
    try:
        return safetensors_dtypes()[name]
    except KeyError:
        raise ModelLoadError(
            f"{where} has element type {name!r}, which SpawnML does not read from SafeTensors "
            f"(it reads {', '.join(safetensors_dtypes())})"
        ) from None
