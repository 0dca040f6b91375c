"""onnxruntime's exception classes and the translation of SpawnML's errors into them.

onnxruntime raises one class per status code (``InvalidArgument``, ``NoSuchFile``, ...), all
deriving from ``Exception``. Code written for it catches those, so every SpawnML error that
leaves this package is given a class deriving from both its SpawnML class and the class
onnxruntime would raise for the same fault: ``except InvalidArgument`` and
``except spawnml.InvalidFeedError`` both catch a bad feed.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from ..errors import (
    BackendUnavailableError,
    DeviceError,
    ExecutionError,
    InvalidArgumentError,
    InvalidFeedError,
    InvalidGraphError,
    ModelLimitError,
    ModelLoadError,
    SpawnMLError,
    UnsupportedOperatorError,
)


class Fail(Exception):
    """onnxruntime's FAIL status."""


class InvalidArgument(Exception):
    """onnxruntime's INVALID_ARGUMENT status."""


class NoSuchFile(Exception):
    """onnxruntime's NO_SUCHFILE status."""


class NoModel(Exception):
    """onnxruntime's NO_MODEL status."""


class EngineError(Exception):
    """onnxruntime's ENGINE_ERROR status."""


class RuntimeException(Exception):
    """onnxruntime's RUNTIME_EXCEPTION status."""


class InvalidProtobuf(Exception):
    """onnxruntime's INVALID_PROTOBUF status."""


class ModelLoaded(Exception):
    """onnxruntime's MODEL_LOADED status."""


class NotImplemented(Exception):
    """onnxruntime's NOT_IMPLEMENTED status."""


class InvalidGraph(Exception):
    """onnxruntime's INVALID_GRAPH status."""


class EPFail(Exception):
    """onnxruntime's EP_FAIL status."""


class NotFound(Exception):
    """onnxruntime's NOT_FOUND status."""


class ModelLoadCanceled(Exception):
    """onnxruntime's MODEL_LOAD_CANCELED status."""


class ModelRequiresCompilation(Exception):
    """onnxruntime's MODEL_REQUIRES_COMPILATION status."""


class DeviceReset(Exception):
    """onnxruntime's device-reset status."""


class RunTerminatedError(SpawnMLError):
    """A run was refused because its ``RunOptions.terminate`` flag was set."""


class UnsupportedFeatureError(SpawnMLError):
    """An onnxruntime feature that SpawnML cannot provide (custom operator libraries, ...)."""


#: SpawnML's error classes, most specific first, and the onnxruntime class each becomes.
_ORT_CLASS: tuple[tuple[type[SpawnMLError], type[Exception]], ...] = (
    (RunTerminatedError, Fail),
    (UnsupportedFeatureError, NotImplemented),
    (UnsupportedOperatorError, NotImplemented),
    (ModelLimitError, Fail),
    (InvalidGraphError, InvalidGraph),
    (ModelLoadError, InvalidProtobuf),
    (InvalidFeedError, InvalidArgument),
    (InvalidArgumentError, InvalidArgument),
    (BackendUnavailableError, EPFail),
    (ExecutionError, RuntimeException),
    (DeviceError, RuntimeException),
    (SpawnMLError, Fail),
)


_ORT_OR_BUILTIN = (
    Fail,
    InvalidArgument,
    NoSuchFile,
    NoModel,
    EngineError,
    RuntimeException,
    InvalidProtobuf,
    ModelLoaded,
    NotImplemented,
    InvalidGraph,
    EPFail,
    ValueError,
    RuntimeError,
)


_BOTH: dict[tuple[type[SpawnMLError], type[Exception]], type[SpawnMLError]] = {}


def both(spawnml_class: type[SpawnMLError], ort_class: type[Exception]) -> type[SpawnMLError]:
    """A class that is both a SpawnML error and an onnxruntime (or builtin) exception (one per pair)."""
    key = (spawnml_class, ort_class)
    if key not in _BOTH:
        _BOTH[key] = type(spawnml_class.__name__, (spawnml_class, ort_class), {"__module__": __name__})
    return _BOTH[key]


def ort_class_of(error: SpawnMLError) -> type[Exception]:
    """The onnxruntime class raised for the fault ``error`` describes."""
    return next(ort for spawn, ort in _ORT_CLASS if isinstance(error, spawn))


def as_ort(error: SpawnMLError, ort_class: type[Exception] | None = None) -> SpawnMLError:
    """``error`` itself, its class changed in place so it is also onnxruntime's class.

    The instance is kept (not copied) so its attributes and traceback survive.
    """
    if ort_class is None and isinstance(error, _ORT_OR_BUILTIN):
        return error  # raised here already as the class onnxruntime uses
    target = ort_class or ort_class_of(error)
    if not isinstance(error, target):
        error.__class__ = both(type(error), target)
    return error


def error(spawnml_class: type[SpawnMLError], ort_class: type[Exception], message: str) -> SpawnMLError:
    """A new SpawnML error that is also ``ort_class``."""
    return both(spawnml_class, ort_class)(message)


@contextmanager
def translated() -> Iterator[None]:
    """Re-raise SpawnML's errors from the block as onnxruntime's classes too."""
    try:
        yield
    except SpawnMLError as raised:
        as_ort(raised)
        raise
