"""The second example plugin, tests/plugins/spawnml-mish-plugin, found through its entry point.

It registers ``org.trial::Mish`` and kernels for it on backends it does not own: a numpy
kernel on ``cpu`` and a kernel-language kernel on every loaded GPU backend, through the
``register_kernels`` hook. Results are compared with Mish in float64 numpy on each backend
that has a device here.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
import spawnml
from spawnml import UnsupportedOperatorError, plugins
from spawnml.cli import main
from spawnml.errors import ShapeInferenceError
from spawnml.ir import Graph, Node, Value

from tests.backends import GPU_BACKENDS, backend_or_skip
from tests.plugins.entry_points import metadata_folder

PACKAGE = Path(__file__).resolve().parent / "plugins/spawnml-mish-plugin"
KERNELS = [f"org.trial::Mish-1 on {name}" for name in ("cpu", "cuda", "opencl", "webgpu")]
#: Spans softplus's small tail, the middle, and past 20, where Mish is x.
X = np.concatenate([np.linspace(-30, 30, 601), [0.0, -1e-3, 1e-3, 20.5, -88.0]]).astype(np.float32)


#: The plugin and the backends it gives kernels to: other installed plugins stay out.
SELECTED = ",".join(["mish", "cpu", *GPU_BACKENDS])


@pytest.fixture(autouse=True)
def installed(monkeypatch, tmp_path):
    """The plugin on ``sys.path`` with its entry point, the plugin manager fresh around the test."""
    monkeypatch.setenv("SPAWNML_PLUGINS", SELECTED)
    monkeypatch.syspath_prepend(str(PACKAGE / "src"))
    monkeypatch.syspath_prepend(str(metadata_folder(PACKAGE, tmp_path / "site")))
    plugins.reset()
    yield
    plugins.reset()
    for name in [module for module in sys.modules if module.startswith("spawnml_mish")]:
        del sys.modules[name]  # another test may add another copy of the package to sys.path


def mish_graph(dtype: type = np.float32) -> Graph:
    return Graph(
        [Node("Mish", ["x"], ["y"], name="act", domain="org.trial")],
        [Value("x", np.dtype(dtype), ("n",))],
        [Value("y")],
        opset_imports={"": 18, "org.trial": 1},
    )


def reference(x: np.ndarray) -> np.ndarray:
    """Mish in float64: ``x * tanh(softplus(x))``."""
    x = x.astype(np.float64)
    return x * np.tanh(np.logaddexp(0, x))


def test_the_entry_point_registers_the_operator_and_kernels_attributed_to_it():
    info = plugins.registry().plugins["mish"]
    assert (info.distribution, info.version) == ("spawnml-mish-plugin", "0.1.0")
    loaded = [kernel for kernel in KERNELS if kernel.rsplit(" ", 1)[1] in plugins.backends()]
    assert info.provides == {"operators": ["org.trial::Mish-1"], "kernels": loaded}


def test_kernels_are_added_to_the_backend_instances_not_to_the_classes():
    cpu = plugins.backends()["cpu"]
    assert cpu.kernels.find("org.trial", "Mish", 1).origin == "spawnml-mish-plugin 0.1.0 (plugin 'mish')"
    assert type(cpu).kernels.find("org.trial", "Mish", 1) is None
    assert ("org.trial", "Mish") in cpu.kernels.ops() and ("", "Relu") in cpu.kernels.ops()
    # ONNX's own Mish (ai.onnx, from opset 18) keeps the CPU backend's kernel
    assert cpu.kernels.find("ai.onnx", "Mish", 18) is type(cpu).kernels.find("", "Mish", 18) is not None


def test_refreshing_registers_the_kernels_again_without_a_duplicate():
    first = plugins.registry().plugins["mish"].provides
    for _ in range(2):
        plugins.refresh()
    assert plugins.registry().plugins["mish"].provides == first
    (got,) = spawnml.InferenceSession(mish_graph(), providers=["cpu"]).run(None, {"x": X})
    np.testing.assert_allclose(got, reference(X), rtol=1e-6, atol=1e-30)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_the_cpu_kernel_matches_float64_numpy(dtype):
    session = spawnml.InferenceSession(mish_graph(dtype), providers=["cpu"])
    assert session.placement() == [("act", "Mish", "cpu")]
    x = X.astype(dtype)
    (got,) = session.run(None, {"x": x})
    assert got.dtype == dtype
    # numpy's tanh and logaddexp in the input's precision: a few of its units in the last place,
    # absolutely below its smallest normal number, where it has no relative precision left
    finfo = np.finfo(dtype)
    np.testing.assert_allclose(got, reference(x), rtol=4 * float(finfo.eps), atol=float(finfo.tiny))


@pytest.mark.parametrize("name", GPU_BACKENDS)
def test_the_kernel_language_kernel_matches_float64_numpy_on_each_gpu(name):
    backend_or_skip(name)
    session = spawnml.InferenceSession(mish_graph(), providers=[name])
    assert session.placement() == [("act", "Mish", name)]
    (got,) = session.run(None, {"x": X})
    # float32 exp, products and a quotient on the device; device exp is within a few ulp
    np.testing.assert_allclose(got, reference(X), rtol=1e-5, atol=1e-30)


@pytest.mark.parametrize("name", GPU_BACKENDS)
def test_float64_goes_to_the_next_provider_by_the_gpu_kernels_dtype_guard(name):
    backend_or_skip(name)
    session = spawnml.InferenceSession(mish_graph(np.float64), providers=[name, "cpu"])
    assert session.placement() == [("act", "Mish", "cpu")]
    # refused by the kernel's guard, or before it where the device has no double precision
    refusal = f"{name}: (the {name} kernel takes float, not double|{name} holds no double tensors)"
    with pytest.raises(UnsupportedOperatorError, match=refusal):
        spawnml.InferenceSession(mish_graph(np.float64), providers=[name])


def test_integer_inputs_are_refused_at_load_by_the_schema():
    with pytest.raises(ShapeInferenceError, match=r"node 'act' \(org.trial::Mish\): Mish takes a floating"):
        spawnml.InferenceSession(mish_graph(np.int32), providers=["cpu"])


def test_spawnml_plugins_lists_the_kernels(capsys):
    assert main(["plugins", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    listed = next(p for p in report["plugins"] if p["name"] == "mish")
    assert listed["distribution"] == "spawnml-mish-plugin"
    assert "org.trial::Mish-1 on cpu" in listed["provides"]["kernels"]
    assert main(["operators", "--json"]) == 0
    rows = {(row["domain"], row["op_type"]): row for row in json.loads(capsys.readouterr().out)}
    assert rows[("org.trial", "Mish")]["backends"] == sorted(
        name for name in plugins.backends() if name == "cpu" or name in GPU_BACKENDS
    )
