"""The ``example`` backend: a pretend device whose memory only its own kernels read.

Its buffers wrap host arrays in :class:`ExampleBuffer`, so a value that crossed from
another backend without a planned transfer would fail loudly. It runs Swish natively
and two standard operators, Add and Mul; everything else is left to later providers.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib.resources import files
from typing import Any

import numpy as np
from spawnml.backend import Availability, Backend, KernelContext, KernelTable

from .ops import DOMAIN, swish

KERNELS = KernelTable()


@dataclass(frozen=True)
class ExampleBuffer:
    """A tensor in the example device's memory."""

    array: np.ndarray


@KERNELS.register("Swish", DOMAIN)
def swish_kernel(ctx: KernelContext, x: ExampleBuffer) -> ExampleBuffer:
    return ExampleBuffer(swish(x.array, ctx.attrs["beta"]))


@KERNELS.register("Add", since=7)
def add_kernel(ctx: KernelContext, a: ExampleBuffer, b: ExampleBuffer) -> ExampleBuffer:
    return ExampleBuffer(np.asarray(a.array + b.array))


@KERNELS.register("Mul", since=7)
def mul_kernel(ctx: KernelContext, a: ExampleBuffer, b: ExampleBuffer) -> ExampleBuffer:
    return ExampleBuffer(np.asarray(a.array * b.array))


class ExampleBackend(Backend):
    """Always available; copies arrays in and out of :class:`ExampleBuffer`."""

    name = "example"
    kernels = KERNELS
    #: Its conformance lane: only the cases made of its own operators (see the file).
    expected_failures = files(__package__) / "expected_failures.toml"

    def availability(self) -> Availability:
        return Availability(True)

    def device_name(self) -> str:
        return "example device (host memory)"

    def from_numpy(self, array: np.ndarray) -> ExampleBuffer:
        return ExampleBuffer(np.array(array))

    def to_numpy(self, buffer: Any) -> np.ndarray:
        return np.array(buffer.array)

    def shape_of(self, buffer: Any) -> tuple[int, ...]:
        return buffer.array.shape

    def dtype_of(self, buffer: Any) -> np.dtype:
        return buffer.array.dtype
