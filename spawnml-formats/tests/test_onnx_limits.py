"""Untrusted ONNX files are bounded by spawnml.Limits, before anything large is allocated."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import GraphProto, TensorProto, helper, numpy_helper
from onnx.external_data_helper import set_external_data
from spawnml import Limits, ModelLimitError


def _graph(nodes=None, initializers=(), rank: int = 1, name: str = "g") -> GraphProto:
    return helper.make_graph(
        nodes or [helper.make_node("Identity", ["x"], ["y"])],
        name,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2] * rank)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2] * rank)],
        list(initializers),
    )


def _model(graph: GraphProto | None = None) -> onnx.ModelProto:
    return helper.make_model(graph or _graph(), opset_imports=[helper.make_opsetid("", 17)])


def _absurd(name: str, dims: list[int]) -> TensorProto:
    """A tensor claiming ``dims`` with no data at all."""
    return TensorProto(name=name, data_type=TensorProto.FLOAT, dims=dims)


def _refused(load_onnx, model, what: str, **limits: int) -> ModelLimitError:
    with pytest.raises(ModelLimitError) as caught:
        load_onnx(model, Limits(**limits))
    assert caught.value.what == what
    return caught.value


def test_file_size_is_checked_before_parsing(load_onnx) -> None:
    data = b"\x08\x07" + b"\xff" * 200  # would not even parse
    _refused(load_onnx, data, "file size", max_file_bytes=100)


def test_node_count(load_onnx) -> None:
    nodes = [helper.make_node("Identity", ["x"], ["t"]), helper.make_node("Identity", ["t"], ["y"])]
    _refused(load_onnx, _model(_graph(nodes)), "node count", max_nodes=1)


def test_node_count_includes_subgraphs(load_onnx) -> None:
    branch = _graph([helper.make_node("Identity", ["x"], ["y"])], name="branch")
    node = helper.make_node("If", ["x"], ["y"], then_branch=branch, else_branch=branch)
    _refused(load_onnx, _model(_graph([node])), "node count", max_nodes=2)


def test_rank_of_a_value(load_onnx) -> None:
    _refused(load_onnx, _model(_graph(rank=3)), "rank", max_rank=2)


def test_rank_of_an_initializer(load_onnx) -> None:
    weights = numpy_helper.from_array(np.zeros((1, 1, 1), np.float32), "w")
    _refused(load_onnx, _model(_graph(initializers=[weights])), "rank", max_rank=2)


def test_absurd_dims_are_refused_with_default_limits(load_onnx) -> None:
    error = _refused(
        load_onnx, _model(_graph(initializers=[_absurd("w", [1 << 20, 1 << 20])])), "tensor elements"
    )
    assert "initializer 'w'" in str(error)


def test_negative_dims_are_refused(load_onnx) -> None:
    _refused(load_onnx, _model(_graph(initializers=[_absurd("w", [4, -1])])), "negative dimension")


def test_absurd_attribute_tensor_is_refused(load_onnx) -> None:
    node = helper.make_node("Constant", [], ["y"], value=_absurd("v", [1 << 40]))
    _refused(load_onnx, _model(_graph([node])), "tensor elements")


def test_absurd_sparse_tensor_is_refused(load_onnx) -> None:
    sparse = helper.make_sparse_tensor(
        numpy_helper.from_array(np.float32([1]), "sp"),
        numpy_helper.from_array(np.int64([0])),
        [1 << 30, 1 << 30],
    )
    node = helper.make_node("Constant", [], ["y"], sparse_value=sparse)
    _refused(load_onnx, _model(_graph([node])), "tensor elements")


def test_absurd_external_tensor_is_refused_before_reading(tmp_path: Path, load_onnx) -> None:
    tensor = numpy_helper.from_array(np.zeros(4, np.float32), "w")
    set_external_data(tensor, "w.bin")
    tensor.ClearField("raw_data")
    tensor.data_location = TensorProto.EXTERNAL
    del tensor.dims[:]
    tensor.dims.extend([1 << 40])
    (tmp_path / "w.bin").write_bytes(bytes(16))
    onnx.save_model(_model(_graph(initializers=[tensor])), tmp_path / "m.onnx")
    _refused(load_onnx, tmp_path / "m.onnx", "tensor elements")


def test_total_elements(load_onnx) -> None:
    weights = [numpy_helper.from_array(np.zeros(6, np.float32), name) for name in "ab"]
    _refused(load_onnx, _model(_graph(initializers=weights)), "total elements", max_total_elements=10)


def _with_attribute(**attrs) -> onnx.ModelProto:
    return _model(_graph([helper.make_node("Custom", ["x"], ["y"], domain="x", **attrs)]))


@pytest.mark.parametrize(
    "model",
    [
        _with_attribute(s="longer than four"),
        _with_attribute(strings=["ok", "longer than four"]),
        _model(_graph(initializers=[numpy_helper.from_array(np.array(["ok", "too long"], object), "s")])),
        helper.make_model(_graph(), producer_name="a long producer"),
    ],
    ids=["attribute", "attribute list", "string tensor", "metadata"],
)
def test_string_length(load_onnx, model: onnx.ModelProto) -> None:
    _refused(load_onnx, model, "string length", max_string_length=4)


def test_subgraph_depth(load_onnx) -> None:
    inner = _graph(name="inner")
    middle = _graph([helper.make_node("If", ["x"], ["y"], then_branch=inner, else_branch=inner)], name="mid")
    outer = _graph([helper.make_node("If", ["x"], ["y"], then_branch=middle, else_branch=middle)])
    assert load_onnx(_model(outer), Limits(max_subgraph_depth=2)).nodes[0].op_type == "If"
    _refused(load_onnx, _model(outer), "subgraph depth", max_subgraph_depth=1)
