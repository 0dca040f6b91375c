"""ONNX tensors to numpy arrays, bounded by :class:`spawnml.Limits` before anything is allocated."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from spawnml import Limits, ModelLoadError

from .external_data import read_external_data
from .proto import SparseTensorProto, TensorProto
from .values import element_type

_NIBBLE_TYPES = {TensorProto.INT4, TensorProto.UINT4, TensorProto.FLOAT4E2M1}
#: numpy's own element types, whose ``raw_data`` (little-endian, one element after another) numpy
#: reads as it is: the same array as ``numpy_helper.to_array``'s, without its general dispatch.
_NUMPY_TYPES = frozenset(
    {
        TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.FLOAT16, TensorProto.BOOL,
        TensorProto.INT8, TensorProto.INT16, TensorProto.INT32, TensorProto.INT64,
        TensorProto.UINT8, TensorProto.UINT16, TensorProto.UINT32, TensorProto.UINT64,
        TensorProto.COMPLEX64, TensorProto.COMPLEX128,
    }
) if sys.byteorder == "little" else frozenset()  # fmt: skip
_CRUMB_TYPES = {TensorProto.INT2, TensorProto.UINT2}


class TensorReader:
    """Converts the tensors of one model, keeping count of the elements read so far."""

    def __init__(self, limits: Limits, folder: Path | None) -> None:
        self.limits = limits
        self.folder = folder
        self.total_elements = 0

    def dense(self, proto: TensorProto, where: str) -> np.ndarray:
        """A ``TensorProto`` (inline or external data) as an array of its own shape."""
        self._reserve(tuple(proto.dims), where)
        return self._array(proto, where)

    def sparse(self, proto: SparseTensorProto, where: str) -> np.ndarray:
        """A ``SparseTensorProto`` as a dense array, zero (or ``""``) where no value is given."""
        shape = tuple(proto.dims)
        elements = self._reserve(shape, where)
        values = self._array(proto.values, f"values of {where}")
        indices = self._array(proto.indices, f"indices of {where}")
        count = values.shape[0] if values.ndim == 1 else -1
        if count < 0 or indices.dtype != np.int64 or indices.shape not in ((count,), (count, len(shape))):
            raise ModelLoadError(
                f"{where} has {values.shape} values and {indices.shape} {indices.dtype} indices, "
                f"which do not describe a sparse tensor of shape {shape}"
            )
        if indices.ndim == 2:
            try:
                indices = np.ravel_multi_index(tuple(indices.T), shape)
            except ValueError as error:
                raise ModelLoadError(f"{where} has an index outside its shape {shape}: {error}") from error
        elif np.any(indices < 0) or np.any(indices >= elements):
            raise ModelLoadError(f"{where} has an index outside its {elements:,} elements")
        dense = np.full(elements, "" if values.dtype == object else 0, dtype=values.dtype)
        dense[indices] = values
        return dense.reshape(shape)

    def _reserve(self, shape: tuple[int, ...], where: str) -> int:
        """Check a shape and count its elements towards the model's total."""
        elements = self.limits.check_shape(shape, where)
        self.total_elements += elements
        self.limits.check("total elements", self.total_elements, self.limits.max_total_elements, where)
        return elements

    def _array(self, proto: TensorProto, where: str) -> np.ndarray:
        elements = self.limits.check_shape(tuple(proto.dims), where)
        dtype = element_type(proto.data_type, where)
        if dtype is None:
            raise ModelLoadError(f"{where} has no element type")
        if proto.HasField("segment"):
            raise ModelLoadError(f"{where} is a segment of a tensor, which ONNX files no longer use")
        if proto.data_type == TensorProto.STRING:
            longest = max((len(item) for item in proto.string_data), default=0)
            self.limits.check("string length", longest, self.limits.max_string_length, where)
        if proto.data_location == TensorProto.EXTERNAL:
            proto = self._inlined(proto, dtype, elements, where)
        try:
            if proto.data_type in _NUMPY_TYPES and proto.HasField("raw_data"):
                return np.frombuffer(proto.raw_data, dtype).reshape(tuple(proto.dims))
            from onnx import numpy_helper  # imports ml_dtypes: only for what numpy cannot read as it is

            return numpy_helper.to_array(proto)
        except (ValueError, TypeError, UnicodeDecodeError) as error:
            raise ModelLoadError(
                f"{where} holds data that does not fit its shape or type: {error}"
            ) from error

    def _inlined(self, proto: TensorProto, dtype: np.dtype, elements: int, where: str) -> TensorProto:
        """A copy of an external tensor with its bytes read into ``raw_data``."""
        if proto.data_type == TensorProto.STRING:
            raise ModelLoadError(f"{where} is a string tensor with external data, which ONNX does not allow")
        if proto.data_type in _NIBBLE_TYPES:
            nbytes = (elements + 1) // 2
        elif proto.data_type in _CRUMB_TYPES:
            nbytes = (elements + 3) // 4
        else:
            nbytes = elements * dtype.itemsize
        data = read_external_data(proto, self.folder, nbytes, where)
        local = TensorProto()
        local.CopyFrom(proto)
        del local.external_data[:]
        local.data_location = TensorProto.DEFAULT
        local.raw_data = data
        return local
