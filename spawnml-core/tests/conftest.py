"""Core tests run without any backend or format installed: they register mock plugins."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from spawnml import plugins
from spawnml.backend import Availability, Backend, KernelTable
from spawnml.ops import Attribute, OpSchema, TensorType
from spawnml.ops.shapes import broadcast_inputs, same_as_input

MOCK_DOMAIN = "test.mock"
MOCK_KERNELS = KernelTable()


@MOCK_KERNELS.register("Scale", MOCK_DOMAIN)
def _scale(ctx, x):
    return x * np.asarray(ctx.attrs["factor"], dtype=x.dtype)


@MOCK_KERNELS.register("Plus", MOCK_DOMAIN)
def _plus(ctx, a, b):
    return a + b


@MOCK_KERNELS.register("Fails", MOCK_DOMAIN)
def _fails(ctx, x):
    raise ValueError("deliberate failure")


class MockBackend(Backend):
    """Numpy buffers, three operators of the mock domain."""

    name = "mock"
    kernels = MOCK_KERNELS

    def availability(self) -> Availability:
        return Availability(True)

    def device_name(self) -> str:
        return "mock device"

    def from_numpy(self, array: np.ndarray) -> np.ndarray:
        return np.array(array)

    def to_numpy(self, buffer: Any) -> np.ndarray:
        return np.asarray(buffer)

    def shape_of(self, buffer: Any) -> tuple[int, ...]:
        return buffer.shape

    def dtype_of(self, buffer: Any) -> np.dtype:
        return buffer.dtype


class AbsentBackend(MockBackend):
    name = "absent"

    def availability(self) -> Availability:
        return Availability(False, "no absent device here")


def _scale_shape(ctx) -> list[TensorType]:
    return list(same_as_input(0)(ctx))


SCHEMAS = [
    OpSchema("Scale", MOCK_DOMAIN, 1, attributes=(Attribute("factor", "float", 2.0),), infer=_scale_shape),
    OpSchema("Plus", MOCK_DOMAIN, 1, inputs=(2, 2), infer=broadcast_inputs()),
    OpSchema("Fails", MOCK_DOMAIN, 1),
    OpSchema("Nowhere", MOCK_DOMAIN, 1),
]


class MockPlugin:
    @plugins.hookimpl
    def register_backends(self, register):
        register(MockBackend)
        register(AbsentBackend)

    @plugins.hookimpl
    def register_operators(self, register):
        for schema in SCHEMAS:
            register(schema)


@pytest.fixture
def mock_plugins(monkeypatch) -> Iterator[None]:
    """Only core's built-ins and the mock plugin: no installed entry point loads."""
    monkeypatch.setenv("SPAWNML_PLUGINS", "")
    plugins.reset()
    plugins.get_plugin_manager().register(MockPlugin(), name="mock")
    plugins.refresh()
    yield
    plugins.reset()
