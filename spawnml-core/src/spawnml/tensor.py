"""The tensor protocol: one tensor type for every device, exchanged through DLPack.

Sequences and optionals, the other kinds of ONNX value, live on a backend as a
:class:`TensorSequence` of its buffers and as the buffer itself or :data:`EMPTY_OPTIONAL`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

import numpy as np

from . import dtypes
from .backend import Backend
from .errors import BackendUnavailableError


@dataclass(frozen=True)
class TensorSequence:
    """An ONNX sequence on one backend: its tensors' buffers in order, and their element type."""

    items: tuple[Any, ...]
    dtype: np.dtype | None  # None only where nothing declares it and there are no items

    def __len__(self) -> int:
        return len(self.items)


class EmptyOptional:
    """The value of an optional that holds nothing; an optional that holds a value is that value."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "EMPTY_OPTIONAL"


#: The one empty optional, returned to callers as ``None`` (as onnxruntime does).
EMPTY_OPTIONAL: Final = EmptyOptional()


class Tensor:
    """A tensor living on a backend's device. Data moves to the host only on request."""

    __slots__ = ("_backend", "_buffer")

    def __init__(self, buffer: Any, backend: Backend) -> None:
        self._buffer = buffer
        self._backend = backend

    @classmethod
    def from_numpy(cls, array: Any, device: str = "cpu") -> Tensor:
        """Copy a host array (anything ``numpy.asarray`` takes) onto ``device``."""
        backend = _backend(device)
        return cls(backend.from_numpy(np.asarray(array)), backend)

    @classmethod
    def from_dlpack(cls, obj: Any, device: str = "cpu") -> Tensor:
        """Take a DLPack-capable array (numpy, torch, cupy, ...) without a copy where possible."""
        backend = _backend(device)
        return cls(backend.from_dlpack(obj), backend)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self._backend.shape_of(self._buffer))

    @property
    def dtype(self) -> np.dtype:
        return self._backend.dtype_of(self._buffer)

    @property
    def device(self) -> str:
        return self._backend.name

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def buffer(self) -> Any:
        """The backend's own buffer object."""
        return self._buffer

    @property
    def backend(self) -> Backend:
        return self._backend

    def numpy(self) -> np.ndarray:
        """Read the data back to the host as a numpy array."""
        return self._backend.to_numpy(self._buffer)

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        array = self.numpy()
        return array if dtype is None else array.astype(dtype, copy=False)

    def __dlpack__(self, *args: Any, **kwargs: Any) -> Any:
        return self._backend.dlpack_source(self._buffer).__dlpack__(*args, **kwargs)

    def __dlpack_device__(self) -> tuple[int, int]:
        return self._backend.dlpack_source(self._buffer).__dlpack_device__()

    def __repr__(self) -> str:
        return f"Tensor(shape={self.shape}, dtype={dtypes.name(self.dtype)}, device={self.device!r})"


def _backend(device: str) -> Backend:
    from .plugins import backends

    installed = backends()
    if device not in installed:
        raise BackendUnavailableError(
            f"device {device!r} is not an installed backend (installed: {sorted(installed) or 'none'})"
        )
    return installed[device]
