"""A session imports only what it uses: backends registered as :class:`LazyBackend` are imported
when first asked for, models and commands are collected when first asked for, and an ONNX file of
standard types is read without onnx's package (which imports ml_dtypes, most of a second).

The session's results are compared with onnxruntime's.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from spawnml import PluginError, plugins

#: What a CPU session on a float32 ONNX model must not import.
UNUSED = ("ml_dtypes", "onnx", "spawnml.gpu", "spawnml_webgpu.backend", "spawnml_models.whisper")

SESSION = """
import sys
import numpy as np
import spawnml
session = spawnml.InferenceSession({path!r}, providers=["cpu"])
(got,) = session.run(None, {{"x": np.linspace(-2, 2, 12, dtype=np.float32).reshape(3, 4)}})
np.save({out!r}, got)
print([name for name in {unused!r} if name in sys.modules])
"""


def _model(path: Path) -> None:
    """Tanh(x * w + b), its initializers as raw data."""
    w = numpy_helper.from_array(np.full((1, 4), 0.5, np.float32), "w")
    b = numpy_helper.from_array(np.arange(4, dtype=np.float32), "b")
    graph = helper.make_graph(
        [
            helper.make_node("Mul", ["x", "w"], ["m"]),
            helper.make_node("Add", ["m", "b"], ["a"]),
            helper.make_node("Tanh", ["a"], ["y"]),
        ],
        "lazy",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 4])],
        [w, b],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)


def test_a_cpu_session_on_a_float_model_imports_neither_gpu_backends_nor_onnx_nor_pipelines(tmp_path):
    import onnxruntime

    path, out = tmp_path / "lazy.onnx", tmp_path / "got.npy"
    _model(path)
    code = SESSION.format(path=str(path), out=str(out), unused=UNUSED)
    done = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    assert done.stdout.strip() == "[]"
    x = np.linspace(-2, 2, 12, dtype=np.float32).reshape(3, 4)
    (expected,) = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(
        None, {"x": x}
    )
    np.testing.assert_allclose(np.load(out), expected, rtol=1e-6, atol=1e-6)  # float32 tanh, two libms


class LazyPlugin:
    """Registers one lazy backend."""

    def __init__(self, entry: plugins.LazyBackend) -> None:
        self.entry = entry

    @plugins.hookimpl
    def register_backends(self, register: Callable[..., None]) -> None:
        register(self.entry)


@pytest.fixture
def registered():
    """Registers a plugin on a fresh manager; the registry it makes."""
    plugins.reset()

    def register(plugin: object) -> plugins.Registry:
        plugins.get_plugin_manager().register(plugin, name="lazy")
        return plugins.refresh()

    yield register
    plugins.reset()


def test_a_lazy_backend_is_listed_without_import_and_made_once_when_asked_for(registered):
    loaded = registered(LazyPlugin(plugins.LazyBackend("example2", "spawnml_example.backend:ExampleBackend")))
    assert "example2" in loaded.backends
    with pytest.raises(PluginError, match=r"registered backend 'example2' as .*whose name is 'example'"):
        loaded.backends["example2"]


@pytest.mark.parametrize(
    ("path", "message"),
    [
        (
            "spawnml_no_such_module:Backend",
            r"backend 'ghost' \(spawnml_no_such_module:Backend\) failed to import",
        ),
        (
            "spawnml_example.backend:ExampleBuffer",
            r"registered <class .*ExampleBuffer'>, not a Backend subclass",
        ),
    ],
)
def test_a_lazy_backend_that_cannot_be_made_is_refused_naming_the_plugin(registered, path, message):
    loaded = registered(LazyPlugin(plugins.LazyBackend("ghost", path)))
    with pytest.raises(PluginError, match=rf"plugin 'lazy'.*{message}"):
        loaded.backends["ghost"]


def test_a_lazy_backend_needs_a_name_and_a_class_path(registered):
    with pytest.raises(PluginError, match=r"a lazy backend needs a name and a path 'package\.module:Class'"):
        registered(LazyPlugin(plugins.LazyBackend("ghost", "spawnml_example.backend")))
