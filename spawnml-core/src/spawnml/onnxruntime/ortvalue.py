"""``OrtValue``: one value (tensor, sequence or nothing) on the host or on a backend's device.

On the CPU an OrtValue holds the caller's numpy array itself, as onnxruntime does, so
writes to the array are seen by the value and runs read it without a copy. On another
device it holds a :class:`spawnml.Tensor`. DLPack goes both ways without copies where
the devices allow.
"""

from __future__ import annotations

import ctypes
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from .. import dtypes
from ..errors import InvalidArgumentError
from ..tensor import Tensor
from .exceptions import InvalidArgument, error

HOST = "cpu"


def device_backend(device_type: str) -> str:
    """The SpawnML backend of an onnxruntime device type (``"cpu"``, ``"cuda"``, ``"webgpu"``...)."""
    from .providers import backend_of

    name = str(device_type).lower()
    if name in ("cpu", "cuda", "webgpu", "opencl"):
        return name
    # "dml" and the like: the backend their provider maps to.
    providers = {"dml": "DmlExecutionProvider", "gpu": "CUDAExecutionProvider"}
    return backend_of(providers.get(name, name))


def element_dtype(element_type: Any) -> np.dtype:
    """A numpy dtype from a numpy type or an ONNX ``TensorProto`` element-type code."""
    if isinstance(element_type, int | np.integer) and not isinstance(element_type, bool):
        return dtypes.from_onnx(int(element_type))
    return np.dtype(element_type)


class OrtValue:
    """onnxruntime's ``OrtValue`` over a numpy array, a :class:`spawnml.Tensor`, a list or None."""

    def __init__(self, value: np.ndarray | Tensor | list[Any] | None) -> None:
        self._value = value

    # -- construction, as onnxruntime's static methods -----------------------------------
    @staticmethod
    def ortvalue_from_numpy(
        numpy_obj: Any, device_type: str = "cpu", device_id: int = 0, vendor_id: int = -1
    ) -> OrtValue:
        """A value holding ``numpy_obj`` (itself on the CPU when it is C-contiguous)."""
        array = np.ascontiguousarray(numpy_obj)
        backend = device_backend(device_type)
        return OrtValue(array if backend == HOST else Tensor.from_numpy(array, backend))

    @staticmethod
    def ortvalue_from_numpy_with_onnx_type(data: Any, onnx_element_type: int) -> OrtValue:
        """A host value of ``data`` viewed as the ONNX element type (same item size)."""
        array = np.ascontiguousarray(data)
        dtype = dtypes.from_onnx(int(onnx_element_type))
        if dtype.itemsize != array.dtype.itemsize:
            raise error(
                InvalidArgumentError,
                InvalidArgument,
                f"element type {onnx_element_type} has item size {dtype.itemsize}, "
                f"the array {array.dtype.itemsize}",
            )
        return OrtValue(array.view(dtype))

    @staticmethod
    def ortvalue_from_shape_and_type(
        shape: Sequence[int],
        element_type: Any,
        device_type: str = "cpu",
        device_id: int = 0,
        vendor_id: int = -1,
    ) -> OrtValue:
        """An uninitialised value of ``shape`` and ``element_type`` (numpy type or ONNX code)."""
        array = np.empty(tuple(int(d) for d in shape), element_dtype(element_type))
        backend = device_backend(device_type)
        return OrtValue(array if backend == HOST else Tensor.from_numpy(array, backend))

    @staticmethod
    def from_dlpack(data: Any, is_bool_tensor: bool = False) -> OrtValue:
        """A value sharing a DLPack tensor's memory: an object with ``__dlpack__`` (host arrays,
        OrtValues, SpawnML's device tensors) or a capsule such as ``__dlpack__()`` returns, which
        is taken as host memory (a capsule does not say its device to Python)."""
        if not hasattr(data, "__dlpack__"):
            data = _HostCapsule(data)
        device = getattr(data, "__dlpack_device__", lambda: (1, 0))()
        if device[0] == 1:  # kDLCPU
            array = np.from_dlpack(data)
            return OrtValue(array.astype(np.bool_) if is_bool_tensor and array.dtype != np.bool_ else array)
        backend = {2: "cuda", 4: "opencl"}.get(device[0])
        if backend is None:
            raise error(
                InvalidArgumentError,
                InvalidArgument,
                f"DLPack device type {device[0]} has no SpawnML backend",
            )
        return OrtValue(Tensor.from_dlpack(data, backend))

    # -- what it holds ----------------------------------------------------------------------------
    def numpy(self) -> Any:
        """The data on the host: the array itself for a host tensor, a list for a sequence."""
        value = self._value
        if isinstance(value, Tensor):
            return value.numpy()
        if isinstance(value, list):
            return [item.numpy() if isinstance(item, Tensor) else item for item in value]
        return value

    def shape(self) -> list[int]:
        return list(self._tensor_like().shape)

    def element_type(self) -> int:
        """The ONNX element-type code, as onnxruntime's ``element_type`` gives it."""
        return dtypes.to_onnx(self._tensor_like().dtype)

    def data_type(self) -> str:
        """onnxruntime's type string, e.g. ``tensor(float)`` or ``seq(tensor(int64))``."""
        value = self._value
        if isinstance(value, list):
            inner = dtypes.type_string(value[0].dtype) if value else "tensor(float)"
            return f"seq({inner})"
        return dtypes.type_string(self._tensor_like().dtype)

    def device_name(self) -> str:
        value = self._value
        return value.device if isinstance(value, Tensor) else HOST

    def has_value(self) -> bool:
        return self._value is not None

    def is_tensor(self) -> bool:
        return isinstance(self._value, np.ndarray | Tensor)

    def is_tensor_sequence(self) -> bool:
        return isinstance(self._value, list)

    def is_sparse_tensor(self) -> bool:
        return False

    def tensor_size_in_bytes(self) -> int:
        tensor = self._tensor_like()
        return math.prod(tensor.shape) * tensor.dtype.itemsize

    def data_ptr(self) -> int:
        """Address of the host data; device buffers have none SpawnML can give."""
        value = self._value
        if isinstance(value, np.ndarray):
            return int(value.ctypes.data)
        raise error(InvalidArgumentError, InvalidArgument, "data_ptr() is available for host values only")

    def update_inplace(self, np_arr: Any) -> None:
        """Copy ``np_arr`` into this value's storage (same shape and element type)."""
        source = np.asarray(np_arr)
        value = self._value
        if isinstance(value, np.ndarray):
            if source.shape != value.shape or source.dtype != value.dtype:
                raise error(
                    InvalidArgumentError,
                    InvalidArgument,
                    f"update_inplace: expected {value.dtype}{list(value.shape)}, "
                    f"got {source.dtype}{list(source.shape)}",
                )
            np.copyto(value, source)
        elif isinstance(value, Tensor):
            self._value = Tensor.from_numpy(source.astype(value.dtype, copy=False), value.device)
        else:
            raise error(InvalidArgumentError, InvalidArgument, "update_inplace needs a tensor value")

    def as_sparse_tensor(self) -> Any:
        from .exceptions import NotImplemented as OrtNotImplemented
        from .exceptions import UnsupportedFeatureError

        raise error(UnsupportedFeatureError, OrtNotImplemented, "SpawnML has no sparse tensors")

    # -- DLPack and SpawnML ----------------------------------------------------------------------
    def __dlpack__(self, **kwargs: Any) -> Any:
        value = self._value
        if isinstance(value, np.ndarray):
            return value.__dlpack__(**kwargs)
        if isinstance(value, Tensor):
            return value.__dlpack__(**kwargs)
        raise error(InvalidArgumentError, InvalidArgument, "only tensor values cross DLPack")

    def __dlpack_device__(self) -> tuple[int, int]:
        value = self._value
        if isinstance(value, Tensor):
            return value.__dlpack_device__()
        return (1, 0)

    def to_dlpack(self) -> Any:
        return self.__dlpack__()

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        """numpy's view of a host tensor: the array itself where no conversion is asked."""
        array = np.asarray(self.numpy())
        if dtype is not None and np.dtype(dtype) != array.dtype:
            return array.astype(dtype)
        return array.copy() if copy else array

    @property
    def _ortvalue(self) -> OrtValue:
        """onnxruntime's native value inside its Python one: this object here."""
        return self

    @property
    def value(self) -> np.ndarray | Tensor | list[Any] | None:
        """What SpawnML feeds for this value: the host array, the device tensor, the list or None."""
        return self._value

    def _get_c_value(self) -> OrtValue:
        """onnxruntime's accessor of the native value, which is this object here."""
        return self

    def _tensor_like(self) -> np.ndarray | Tensor:
        value = self._value
        if not isinstance(value, np.ndarray | Tensor):
            raise error(InvalidArgumentError, InvalidArgument, "this OrtValue is not a tensor")
        return value

    def __repr__(self) -> str:
        if self.is_tensor():
            return f"OrtValue({self.data_type()}, shape={self.shape()}, device={self.device_name()!r})"
        return f"OrtValue({self._value!r})"


def ort_value(output: Tensor | list[Tensor] | None) -> OrtValue:
    """An output as an OrtValue: host tensors as numpy arrays (no copy), device ones as tensors."""
    if output is None:
        return OrtValue(None)
    if isinstance(output, list):
        return OrtValue([item.numpy() if item.device == "cpu" else item for item in output])
    return OrtValue(output.numpy() if output.device == "cpu" else output)


class _HostCapsule:
    """A bare DLPack capsule, given the protocol's methods so numpy can take it (as host memory)."""

    def __init__(self, capsule: Any) -> None:
        self._capsule = capsule

    def __dlpack__(self, **kwargs: Any) -> Any:
        return self._capsule

    def __dlpack_device__(self) -> tuple[int, int]:
        return (1, 0)


def host_view(buffer_ptr: int, element_type: Any, shape: Sequence[int]) -> np.ndarray:
    """A numpy array over host memory at ``buffer_ptr`` (what onnxruntime's raw binding takes)."""
    dtype = element_dtype(element_type)
    count = math.prod(int(d) for d in shape)
    raw = (ctypes.c_char * (count * dtype.itemsize)).from_address(int(buffer_ptr))
    return np.frombuffer(memoryview(raw).cast("B"), dtype=dtype, count=count).reshape(
        tuple(int(d) for d in shape)
    )
