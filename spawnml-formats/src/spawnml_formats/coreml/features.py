"""A model description's inputs and outputs as IR values (multi-array features only)."""

from __future__ import annotations

from typing import Any

import numpy as np
from spawnml import Limits, ModelLoadError
from spawnml.ir import Dim, Value

#: ``ArrayFeatureType.ArrayDataType`` -> dtype.
ARRAY_DTYPES: dict[int, np.dtype[Any]] = {
    65568: np.dtype(np.float32),
    65600: np.dtype(np.float64),
    131104: np.dtype(np.int32),
    131080: np.dtype(np.int8),
    65552: np.dtype(np.float16),
}


def feature_value(feature: Any, limits: Limits, described: str) -> Value:
    """The IR value of a ``FeatureDescription``; anything but a multi-array is refused."""
    where = f"feature {feature.name!r} of {described}"
    limits.check("string length", len(feature.name), limits.max_string_length, where)
    kind = feature.type.WhichOneof("Type")
    if kind != "multiArrayType":
        raise ModelLoadError(f"{where} is of type {kind}; SpawnML reads multi-array features only")
    array = feature.type.multiArrayType
    if array.dataType not in ARRAY_DTYPES:
        raise ModelLoadError(f"{where} has array data type {array.dataType}, which SpawnML does not read")
    return Value(feature.name, ARRAY_DTYPES[array.dataType], _shape(array, limits, where))


def _shape(array: Any, limits: Limits, where: str) -> tuple[Dim, ...] | None:
    """The declared shape, with flexible dimensions (ranges, enumerated shapes) unknown."""
    shape: list[int | None] = list(array.shape)
    flexibility = array.WhichOneof("ShapeFlexibility")
    if flexibility == "shapeRange":
        ranges = array.shapeRange.sizeRanges
        shape = [r.lowerBound if r.lowerBound == r.upperBound else None for r in ranges]
    elif flexibility == "enumeratedShapes":
        shapes = [tuple(s.shape) for s in array.enumeratedShapes.shapes]
        if len({len(s) for s in shapes}) != 1:
            return None
        shape = [dims[0] if len(set(dims)) == 1 else None for dims in zip(*shapes, strict=True)]
    if not shape:
        return None
    limits.check_shape(tuple(0 if dim is None else dim for dim in shape), where)
    return tuple(shape)
