"""The wasi-nn preview-1 ABI (``wasi_ephemeral_nn``), as Wasmtime's witx defines and lowers it.

Enumerations carry the witx's order as their values. Records cross the boundary in the guest's
linear memory, little-endian, with the C layout wiggle gives them: a ``list`` is a pointer and a
length (two ``u32``), so a ``tensor`` record is ``dimensions`` (8 bytes), ``type`` (one byte,
padded to 4) and ``data`` (8 bytes), 20 bytes in all.
"""

from __future__ import annotations

from enum import IntEnum

import numpy as np

#: The import module every wasi-nn call comes from.
MODULE = "wasi_ephemeral_nn"
#: Bytes of one ``list`` (pointer, length) inside a record or an array of lists.
LIST_BYTES = 8
#: Bytes of a ``tensor`` record, and the offsets of its fields.
TENSOR_BYTES = 20
TENSOR_DIMENSIONS_OFFSET = 0
TENSOR_TYPE_OFFSET = 8
TENSOR_DATA_OFFSET = 12


class Errno(IntEnum):
    """``nn_errno``: what every call returns (0 on success)."""

    SUCCESS = 0
    INVALID_ARGUMENT = 1
    INVALID_ENCODING = 2
    MISSING_MEMORY = 3
    BUSY = 4
    RUNTIME_ERROR = 5
    UNSUPPORTED_OPERATION = 6
    TOO_LARGE = 7
    NOT_FOUND = 8


class TensorType(IntEnum):
    """``tensor_type``: the element type of a tensor the guest passes or reads."""

    F16 = 0
    F32 = 1
    F64 = 2
    U8 = 3
    I32 = 4
    I64 = 5

    @property
    def dtype(self) -> np.dtype:
        """The (little-endian) numpy element type."""
        return np.dtype(_DTYPES[self]).newbyteorder("<")


_DTYPES = {
    TensorType.F16: np.float16,
    TensorType.F32: np.float32,
    TensorType.F64: np.float64,
    TensorType.U8: np.uint8,
    TensorType.I32: np.int32,
    TensorType.I64: np.int64,
}


class GraphEncoding(IntEnum):
    """``graph_encoding``: how the bytes handed to ``load`` encode the model."""

    OPENVINO = 0
    ONNX = 1
    TENSORFLOW = 2
    PYTORCH = 3
    TENSORFLOWLITE = 4
    AUTODETECT = 5


class ExecutionTarget(IntEnum):
    """``execution_target``: where the guest asks the graph to run."""

    CPU = 0
    GPU = 1
    TPU = 2


class NnError(Exception):
    """A call's failure: the ``nn_errno`` the guest gets, and why (for the host's log)."""

    def __init__(self, errno: Errno, reason: str) -> None:
        super().__init__(f"{errno.name.lower()}: {reason}")
        self.errno = errno
        self.reason = reason
