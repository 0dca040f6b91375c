"""The CPU backend: buffers are numpy arrays, kernels are numpy functions."""

from __future__ import annotations

import platform
from importlib.resources import files
from typing import Any

import numpy as np
from spawnml.backend import Availability, Backend
from spawnml.errors import InvalidArgumentError

from .kernels import KERNELS


class CPUBackend(Backend):
    """Runs on the host CPU; always available."""

    name = "cpu"
    kernels = KERNELS
    expected_failures = files(__package__) / "expected_failures.toml"

    def availability(self) -> Availability:
        return Availability(True)

    def device_name(self) -> str:
        return platform.processor() or platform.machine() or "cpu"

    def from_numpy(self, array: np.ndarray) -> np.ndarray:
        return array

    def to_numpy(self, buffer: Any) -> np.ndarray:
        return np.asarray(buffer)

    def shape_of(self, buffer: Any) -> tuple[int, ...]:
        return np.shape(buffer)

    def dtype_of(self, buffer: Any) -> np.dtype:
        return np.asarray(buffer).dtype

    def assign(self, target: Any, source: Any) -> None:
        if not target.flags.writeable:
            raise InvalidArgumentError(
                "this tensor's memory is read-only (a broadcast view or a model constant); clone() it first"
            )
        np.copyto(target, source)

    def from_dlpack(self, obj: Any) -> np.ndarray:
        return np.from_dlpack(obj)

    def dlpack_source(self, buffer: Any) -> np.ndarray:
        return np.asarray(buffer)
