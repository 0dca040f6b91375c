"""Kernels a plugin registers on backends it does not own (the ``register_kernels`` hook).

The plugins here are objects registered on the plugin manager next to the installed CPU
backend and example plugin (tests/plugins/spawnml-example-plugin): a kernel reaches the
backend's instance by its name, never its class's table, and every mistake fails loading
with the plugin named.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import spawnml
from spawnml import PluginError, UnsupportedOperatorError, plugins
from spawnml.backend import KernelTable
from spawnml.ir import Graph, Node, Value
from spawnml.ops import OpSchema
from spawnml.ops.shapes import same_as_input
from spawnml_example.backend import ExampleBuffer

RNG = np.random.default_rng(32)
X = RNG.standard_normal((3, 5)).astype(np.float32)


@pytest.fixture(autouse=True)
def cpu_and_example(monkeypatch):
    """The CPU backend and the example plugin, and the plugins each test registers."""
    monkeypatch.setenv("SPAWNML_PLUGINS", "cpu,example")
    plugins.reset()
    yield
    plugins.reset()


class KernelPlugin:
    """Registers ``kernels`` (keyword arguments of one ``register`` call each), and ``schemas``."""

    def __init__(self, *kernels: dict[str, Any], schemas: tuple[OpSchema, ...] = ()) -> None:
        self.kernels, self.schemas = kernels, schemas

    @plugins.hookimpl
    def register_operators(self, register: Callable[..., None]) -> None:
        for schema in self.schemas:
            register(schema)

    @plugins.hookimpl
    def register_kernels(self, register: plugins.RegisterKernel) -> None:
        for kernel in self.kernels:
            register(**kernel)


def load(plugin: object, name: str = "trial") -> plugins.Registry:
    plugins.get_plugin_manager().register(plugin, name=name)
    return plugins.refresh()


def relu_graph(opset: int = 14) -> Graph:
    return Graph(
        [Node("Relu", ["x"], ["y"], name="relu")],
        [Value("x", np.dtype(np.float32), (3, 5))],
        [Value("y")],
        opset_imports={"": opset},
    )


def example_relu(ctx: Any, x: ExampleBuffer) -> ExampleBuffer:
    return ExampleBuffer(np.maximum(x.array, np.float32(0)))


RELU_ON_EXAMPLE = {"backend": "example", "op_type": "Relu", "kernel": example_relu, "since": 14}


def test_a_standard_operator_runs_on_a_backend_the_plugin_does_not_own():
    with pytest.raises(UnsupportedOperatorError, match="example: no example kernel"):
        spawnml.InferenceSession(relu_graph(), providers=["example"])
    loaded = load(KernelPlugin(RELU_ON_EXAMPLE))
    assert loaded.plugins["trial"].provides == {"kernels": ["ai.onnx::Relu-14 on example"]}
    session = spawnml.InferenceSession(relu_graph(), providers=["example"])
    assert session.placement() == [("relu", "Relu", "example")]
    (got,) = session.run(None, {"x": X})
    np.testing.assert_array_equal(got, np.maximum(X, 0))  # exact: a comparison with zero
    # The kernel covers opsets 14 and later only: Relu-6 stays refused.
    with pytest.raises(UnsupportedOperatorError, match="example: no example kernel"):
        spawnml.InferenceSession(relu_graph(opset=13), providers=["example"])


def test_the_kernels_go_with_the_plugin_across_refreshes():
    manager = plugins.get_plugin_manager()
    own = type(plugins.backends()["example"]).kernels
    plugin = KernelPlugin(RELU_ON_EXAMPLE)
    load(plugin)
    for _ in range(2):  # the registry's backends are made anew: the kernel is added once to each
        assert plugins.refresh().plugins["trial"].provides == {"kernels": ["ai.onnx::Relu-14 on example"]}
        assert plugins.backends()["example"].kernels.find("", "Relu", 14).fn is example_relu
    assert own.find("", "Relu", 14) is None and plugins.backends()["example"].kernels.base is own
    manager.unregister(plugin)
    plugins.refresh()
    assert plugins.backends()["example"].kernels.find("", "Relu", 14) is None


def test_a_backend_that_is_not_loaded_is_refused_naming_its_providers(monkeypatch):
    cuda = {**RELU_ON_EXAMPLE, "backend": "gpu9"}
    with pytest.raises(PluginError) as raised:
        load(KernelPlugin(cuda))
    assert str(raised.value) == (
        "plugin 'trial' registers kernel ai.onnx::Relu-14 on gpu9, but backend 'gpu9' is not installed: "
        "no installed distribution provides backend 'gpu9'; register kernels only for the names in the "
        "hook's `backends` argument (loaded: ['cpu', 'example'])"
    )
    monkeypatch.setenv("SPAWNML_PLUGINS", "cpu")
    plugins.reset()
    with pytest.raises(
        PluginError, match=r"backend 'example' is not loaded: spawnml-example-plugin \(plugin"
    ):
        load(KernelPlugin(RELU_ON_EXAMPLE))


def test_the_hook_hears_which_backends_are_loaded():
    heard: list[frozenset[str]] = []

    class Listens:
        @plugins.hookimpl
        def register_kernels(self, register: plugins.RegisterKernel, backends: frozenset[str]) -> None:
            heard.append(backends)

    load(Listens())
    assert heard == [frozenset({"cpu", "example"})]


def test_an_operator_without_a_schema_is_refused():
    with pytest.raises(PluginError, match=r"but no plugin registers operator org\.trial::Mihs$"):
        load(KernelPlugin({**RELU_ON_EXAMPLE, "op_type": "Mihs", "domain": "org.trial"}))


@pytest.mark.parametrize(
    ("args", "kwargs", "mistake"),
    [
        (("example",), {"op_type": "Relu", "kernel": example_relu}, "too many positional arguments"),
        (
            (),
            {"backend": "example", "op": "Relu", "kernel": example_relu},
            "missing a required argument: 'op_type'",
        ),
        ((), {**RELU_ON_EXAMPLE, "opset": 14}, "got an unexpected keyword argument 'opset'"),
    ],
)
def test_registers_arguments_are_checked_by_name(args, kwargs, mistake):
    class Misnamed:
        @plugins.hookimpl
        def register_kernels(self, register: Callable[..., None]) -> None:
            register(*args, **kwargs)

    with pytest.raises(PluginError) as raised:
        load(Misnamed())
    assert str(raised.value) == (
        f"plugin 'trial': register_kernels' register(...): {mistake}; it takes keyword arguments: "
        "backend, op_type, kernel, and optionally domain, since, until, dtypes, check"
    )


def test_a_kernel_that_is_not_a_function_is_refused():
    with pytest.raises(PluginError, match=r"registers kernel ai.onnx::Relu-14 on example as 'relu', not a"):
        load(KernelPlugin({**RELU_ON_EXAMPLE, "kernel": "relu"}))


def test_a_kernel_covering_the_backends_own_is_refused_naming_both():
    with pytest.raises(PluginError) as raised:
        load(KernelPlugin({**RELU_ON_EXAMPLE, "backend": "cpu"}))
    message = str(raised.value)
    assert message.startswith("cpu: two kernels for ai.onnx::Relu cover the same opsets: spawnml_cpu.")
    assert message.endswith(f" and {__name__}.example_relu from plugin 'trial'")


def test_two_plugins_registering_one_kernel_are_named_both():
    load(KernelPlugin(RELU_ON_EXAMPLE), name="first")
    with pytest.raises(PluginError) as raised:
        load(KernelPlugin(RELU_ON_EXAMPLE), name="second")
    assert str(raised.value) == (
        "example: two kernels for ai.onnx::Relu cover the same opsets: "
        f"{__name__}.example_relu from plugin 'first' and {__name__}.example_relu from plugin 'second'"
    )


def test_a_kernel_over_a_lazily_loaded_table_is_checked_on_the_first_lookup():
    own = KernelTable(modules=("json",))  # loads (imports json) on its first lookup
    own.register("Relu", since=6)(lambda ctx, x: x)
    extended = own.extended()
    extended.register("Relu", since=14, origin="plugin 'late'")(example_relu)  # not checked yet
    assert own.modules == ("json",)
    for _ in range(2):  # refused at every lookup, never half accepted
        with pytest.raises(PluginError, match=r"example_relu from plugin 'late'$"):
            extended.find("", "Relu", 14)
    fine = KernelTable(modules=("json",)).extended()
    fine.register("Relu", since=14)(example_relu)
    assert fine.find("ai.onnx", "Relu", 15).fn is example_relu and fine.find("", "Relu", 13) is None


def test_a_custom_operators_kernel_on_the_cpu_gives_numpys_result():
    schema = OpSchema("Cube", "org.trial", 1, infer=same_as_input(0))
    cube = {"backend": "cpu", "op_type": "Cube", "domain": "org.trial", "kernel": lambda ctx, x: x * x * x}
    load(KernelPlugin(cube, schemas=(schema,)))
    graph = Graph(
        [Node("Cube", ["x"], ["y"], name="cube", domain="org.trial")],
        [Value("x", np.dtype(np.float32), (3, 5))],
        [Value("y")],
        opset_imports={"": 18, "org.trial": 1},
    )
    (got,) = spawnml.InferenceSession(graph, providers=["cpu"]).run(None, {"x": X})
    # float32 products against float64: two roundings
    np.testing.assert_allclose(got, X.astype(np.float64) ** 3, rtol=3e-7, atol=0)
