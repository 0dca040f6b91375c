"""A node its schema refuses is refused at load, with the node, operator, domain and reason."""

import json
from typing import Any

import numpy as np
import pytest
import spawnml
from spawnml import plugins
from spawnml.backend import Availability, Backend, KernelTable
from spawnml.cli import main
from spawnml.errors import InvalidGraphError, ShapeInferenceError
from spawnml.ir import Graph, Node, Value
from spawnml.ops import OpSchema, TensorType

STRICT = "test.strict"


def _float_only(ctx) -> list[TensorType]:
    x = ctx.input(0)
    if x is not None and x.dtype is not None and x.dtype.kind != "f":
        raise InvalidGraphError(f"FloatOnly takes a floating-point tensor, not {x.dtype}")
    return [x or TensorType(None, None)]


KERNELS = KernelTable()
KERNELS.register("FloatOnly", STRICT)(lambda ctx, x: x + 1)  # no dtypes= guard: the schema is the guard


class StrictBackend(Backend):
    """Numpy buffers and one kernel, which would add 1 to any dtype it were given."""

    name = "strict"
    kernels = KERNELS

    def availability(self) -> Availability:
        return Availability(True)

    def device_name(self) -> str:
        return "strict device"

    def from_numpy(self, array: np.ndarray) -> np.ndarray:
        return np.array(array)

    def to_numpy(self, buffer: Any) -> np.ndarray:
        return np.asarray(buffer)

    def shape_of(self, buffer: Any) -> tuple[int, ...]:
        return buffer.shape

    def dtype_of(self, buffer: Any) -> np.dtype:
        return buffer.dtype


class StrictPlugin:
    """An operator whose schema accepts only floats, and a backend that runs it."""

    @plugins.hookimpl
    def register_operators(self, register):
        register(OpSchema("FloatOnly", STRICT, 1, infer=_float_only))

    @plugins.hookimpl
    def register_backends(self, register):
        register(StrictBackend)


@pytest.fixture
def strict(mock_plugins):
    plugins.get_plugin_manager().register(StrictPlugin(), name="strict")
    plugins.refresh()


def graph(dtype) -> Graph:
    return Graph(
        [Node("FloatOnly", ["x"], ["y"], name="strict_node", domain=STRICT)],
        [Value("x", np.dtype(dtype), (2,))],
        [Value("y", None, None)],
        opset_imports={"": 17, STRICT: 1},
        name="strict",
    )


def test_an_int32_model_is_refused_at_load(strict):
    with pytest.raises(ShapeInferenceError) as raised:
        spawnml.InferenceSession(graph(np.int32), providers=["strict"])
    error = raised.value
    assert (error.node, error.op_type, error.domain) == ("strict_node", "FloatOnly", STRICT)
    assert str(error) == (
        "shape inference failed at node 'strict_node' (test.strict::FloatOnly): "
        "FloatOnly takes a floating-point tensor, not int32"
    )


def test_a_float_model_runs(strict):
    (y,) = spawnml.InferenceSession(graph(np.float32), providers=["strict"]).run(
        None, {"x": np.zeros(2, np.float32)}
    )
    np.testing.assert_array_equal(y, [1, 1])


def test_info_exits_1_on_a_shape_inference_error(strict, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr("spawnml.cli_model.model_report", lambda path: _report(path))
    assert main(["info", "model", "--json"]) == 1
    captured = capsys.readouterr()
    assert json.loads(captured.out)["shape_inference_error"].startswith("shape inference failed at node")
    assert "spawnml: error: shape inference failed at node 'strict_node'" in captured.err


def _report(path: str) -> dict:
    from spawnml.cli_model import graph_report

    return {"model": path, "format": "test", "graph": "strict", "weights_only": False} | graph_report(
        graph(np.int32)
    )


def test_prelu_before_opset_7_has_a_slope_per_channel(mock_plugins):
    from spawnml.passes import infer_shapes

    prelu = Graph(
        [Node("PRelu", ["x", "slope"], ["y"], name="prelu")],
        [Value("x", np.dtype(np.float32), (2, 3, 4))],
        [Value("y", None, None)],
        initializers={"slope": np.ones(3, np.float32)},
        opset_imports={"": 6},
        name="prelu",
    )
    assert infer_shapes(prelu)["y"] == TensorType(np.dtype(np.float32), (2, 3, 4))
    prelu.opset_imports[""] = 7  # from 7 the slope broadcasts from the right: 3 against 4
    with pytest.raises(ShapeInferenceError, match=r"node 'prelu' \(ai\.onnx::PRelu\)"):
        infer_shapes(prelu)
