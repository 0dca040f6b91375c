"""Lowering ONNX models to the IR, checked field by field against onnx's own view of the file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
import onnx
import pytest
import spawnml
from onnx import AttributeProto, GraphProto, SparseTensorProto, TensorProto, TypeProto, helper, numpy_helper
from spawnml import ModelLoadError
from spawnml.ir import Graph, Value
from spawnml.plugins import formats
from spawnml_formats.onnx.loader import ONNXLoader
from spawnml_models.assets import asset_file

from tests.model_files import require

OPSETS = [helper.make_opsetid("", 17), helper.make_opsetid("com.example", 1)]


# -- the reference: what onnx itself says about each field ------------------------------------


def _domain(name: str) -> str:
    return "" if name == "ai.onnx" else name


def _dense(sparse: SparseTensorProto) -> np.ndarray:
    values = numpy_helper.to_array(sparse.values)
    indices = numpy_helper.to_array(sparse.indices)
    dense = np.zeros(tuple(sparse.dims), values.dtype)
    if indices.ndim == 2:
        dense[tuple(indices.T)] = values
    else:
        dense.flat[indices] = values
    return dense


def _assert_array(actual: Any, expected: np.ndarray) -> None:
    assert isinstance(actual, np.ndarray)
    assert actual.dtype == expected.dtype
    np.testing.assert_array_equal(actual, expected)


def _assert_type(value: Value, proto: TypeProto) -> None:
    if proto.WhichOneof("value") != "tensor_type":
        assert (value.dtype, value.shape) == (None, None)
        return
    tensor = proto.tensor_type
    expected = helper.tensor_dtype_to_np_dtype(tensor.elem_type) if tensor.elem_type else None
    assert value.dtype == expected
    if not tensor.HasField("shape"):
        assert value.shape is None
        return
    dims = [
        dim.dim_value if dim.HasField("dim_value") else dim.dim_param if dim.HasField("dim_param") else None
        for dim in tensor.shape.dim
    ]
    assert list(value.shape) == dims


def _assert_attribute(actual: Any, expected: Any, opsets: dict[str, int]) -> None:
    if isinstance(expected, list):
        assert isinstance(actual, list)
        assert len(actual) == len(expected)
        for item, reference in zip(actual, expected, strict=True):
            _assert_attribute(item, reference, opsets)
    elif isinstance(expected, TensorProto):
        _assert_array(actual, numpy_helper.to_array(expected))
    elif isinstance(expected, SparseTensorProto):
        _assert_array(actual, _dense(expected))
    elif isinstance(expected, GraphProto):
        assert_lowered(actual, expected, opsets)
    elif isinstance(expected, TypeProto):
        assert actual.name == ""
        _assert_type(actual, expected)
    elif isinstance(expected, bytes):
        try:
            assert actual == expected.decode("utf-8")
        except UnicodeDecodeError:
            assert actual == expected
    else:
        assert type(actual) is type(expected)
        assert actual == expected


def assert_lowered(graph: Graph, proto: GraphProto, opsets: dict[str, int]) -> None:
    """Every node, value, initializer and attribute of ``graph`` matches ``proto``."""
    assert isinstance(graph, Graph)
    assert graph.opset_imports == opsets
    initializers = {t.name: numpy_helper.to_array(t) for t in proto.initializer}
    initializers |= {s.values.name: _dense(s) for s in proto.sparse_initializer}
    assert list(graph.initializers) == list(initializers)
    for name, expected in initializers.items():
        _assert_array(graph.initializers[name], expected)
    for values, infos in [
        (graph.inputs, proto.input),
        (graph.outputs, proto.output),
        (list(graph.value_info.values()), proto.value_info),
    ]:
        assert [value.name for value in values] == [info.name for info in infos]
        for value, info in zip(values, infos, strict=True):
            _assert_type(value, info.type)
    assert len(graph.nodes) == len(proto.node)
    for node, reference in zip(graph.nodes, proto.node, strict=True):
        assert (node.op_type, node.name, node.domain) == (
            reference.op_type,
            reference.name,
            _domain(reference.domain),
        )
        assert (node.inputs, node.outputs) == (list(reference.input), list(reference.output))
        assert list(node.attrs) == [attr.name for attr in reference.attribute]
        for attr in reference.attribute:
            _assert_attribute(node.attrs[attr.name], helper.get_attribute_value(attr), opsets)


def assert_model_lowered(graph: Graph, model: onnx.ModelProto) -> None:
    opsets = {_domain(opset.domain): opset.version for opset in model.opset_import}
    assert_lowered(graph, model.graph, opsets)
    assert graph.name == (model.graph.name or "graph")
    for prop in model.metadata_props:
        assert graph.metadata[prop.key] == prop.value
    if model.producer_name:
        assert graph.metadata["producer_name"] == model.producer_name


# -- a model with every kind of value, attribute and subgraph ---------------------------------


def _sparse(dense: np.ndarray, coordinates: bool) -> SparseTensorProto:
    flat = np.flatnonzero(dense)
    indices = np.stack(np.unravel_index(flat, dense.shape), axis=1) if coordinates else flat
    values = numpy_helper.from_array(dense.reshape(-1)[flat], "sparse_values")
    return helper.make_sparse_tensor(values, numpy_helper.from_array(indices.astype(np.int64)), dense.shape)


def _body(name: str, op: str, inputs: list[str]) -> GraphProto:
    return helper.make_graph(
        [helper.make_node(op, inputs, [f"{name}_out"])],
        name,
        [],
        [helper.make_tensor_value_info(f"{name}_out", TensorProto.FLOAT, ["N", 3])],
    )


def _rich_model() -> onnx.ModelProto:
    tensor_type = helper.make_tensor_type_proto(TensorProto.FLOAT, ["N", None, 4])
    attributes = {
        "f": 1.5,
        "i": -3,
        "s": "héllo",
        "raw": b"\xff\xfe",
        "t": numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(2, 3)),
        "sparse": _sparse(np.array([[0, 2, 0], [5, 0, 0]], np.int32), coordinates=True),
        "g": _body("attr_body", "Neg", ["w"]),
        "tp": tensor_type,
        "floats": [0.25, -1.0],
        "ints": [1, 2, 3],
        "strings": ["a", "bé"],
        "tensors": [
            numpy_helper.from_array(np.array([1, 2], np.int64)),
            numpy_helper.from_array(np.array(7.0, np.float64)),
        ],
        "sparse_tensors": [_sparse(np.array([0, 0, 3.5], np.float32), coordinates=False)],
        "graphs": [_body("first", "Relu", ["xw"]), _body("second", "Abs", ["x"])],
        "tps": [tensor_type, helper.make_sequence_type_proto(tensor_type)],
    }
    nodes = [
        helper.make_node("Add", ["x", "w"], ["xw"], name="add", domain="ai.onnx"),
        helper.make_node(
            "If",
            ["cond"],
            ["branch_out"],
            name="if",
            then_branch=_body("then", "Mul", ["xw", "w"]),
            else_branch=_body("else", "Identity", ["x"]),
        ),
        helper.make_node(
            "Custom", ["xw", ""], ["custom_out"], name="custom", domain="com.example", **attributes
        ),
        helper.make_node("Constant", [], ["c"], value=numpy_helper.from_array(np.float16([1, 2]))),
    ]
    inputs = [
        helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3]),
        helper.make_tensor_value_info("cond", TensorProto.BOOL, []),
        helper.make_tensor_value_info("unknown_dim", TensorProto.INT64, [None, "M", 4]),
        helper.make_tensor_value_info("no_shape", TensorProto.FLOAT, None),
        helper.make_tensor_value_info("no_type", TensorProto.UNDEFINED, None),
        helper.make_tensor_sequence_value_info("seq", TensorProto.FLOAT, None),
        helper.make_value_info("opt", helper.make_optional_type_proto(tensor_type)),
    ]
    initializers = [
        numpy_helper.from_array(np.array([1, 2, 3], np.float32), "w"),
        numpy_helper.from_array(np.array([[1], [-2]], np.int64), "ids"),
        numpy_helper.from_array(np.array([0.5, 1e4], np.float16), "half"),
        numpy_helper.from_array(np.array([1.5, -2], ml_dtypes.bfloat16), "bf16"),
        numpy_helper.from_array(np.array([-8, 7, 0, 3, -1], ml_dtypes.int4), "nibbles"),
        numpy_helper.from_array(np.array(["a", "bé"], object), "names"),
        helper.make_tensor("int32_data", TensorProto.FLOAT16, [2], np.float16([1, 2])),
    ]
    graph = helper.make_graph(
        nodes,
        "rich",
        inputs,
        [
            helper.make_tensor_value_info(name, TensorProto.FLOAT, None)
            for name in ["branch_out", "custom_out", "c"]
        ],
        initializers,
        value_info=[helper.make_tensor_value_info("xw", TensorProto.FLOAT, ["N", 3])],
        sparse_initializer=[_sparse(np.array([[0, 1.5], [0, 0]], np.float32), coordinates=False)],
    )
    model = helper.make_model(graph, opset_imports=OPSETS, producer_name="tests", producer_version="1")
    helper.set_model_props(model, {"author": "spawnml", "licence": "Apache-2.0"})
    return model


def test_lowers_every_field_as_onnx_reads_it(load_onnx) -> None:
    model = _rich_model()
    assert_model_lowered(load_onnx(model), model)


def test_value_types(load_onnx) -> None:
    graph = load_onnx(_rich_model())
    values = {value.name: value for value in graph.inputs}
    assert values["x"] == Value("x", np.dtype(np.float32), ("N", 3))
    assert values["cond"].shape == ()
    assert values["unknown_dim"].shape == (None, "M", 4)
    assert values["no_shape"].shape is None
    assert values["no_type"].dtype is None
    for name in ["seq", "opt"]:
        assert (values[name].dtype, values[name].shape) == (None, None)


def test_attribute_values(load_onnx) -> None:
    node = next(node for node in load_onnx(_rich_model()).nodes if node.op_type == "Custom")
    assert node.attrs["s"] == "héllo"
    assert node.attrs["raw"] == b"\xff\xfe"
    assert node.attrs["strings"] == ["a", "bé"]
    assert isinstance(node.attrs["i"], int)
    assert node.attrs["sparse"].tolist() == [[0, 2, 0], [5, 0, 0]]
    assert node.attrs["tp"] == Value("", np.dtype(np.float32), ("N", None, 4))
    assert [graph.name for graph in node.attrs["graphs"]] == ["first", "second"]


def test_domains_and_constants(load_onnx) -> None:
    graph = load_onnx(_rich_model())
    assert [node.domain for node in graph.nodes] == ["", "", "com.example", ""]
    assert graph.nodes[3].op_type == "Constant"
    assert graph.opset_imports == {"": 17, "com.example": 1}
    assert graph.opset("ai.onnx") == 17


def test_subgraphs_read_outer_scope(load_onnx) -> None:
    graph = load_onnx(_rich_model())
    then_branch = graph.nodes[1].attrs["then_branch"]
    assert then_branch.free_names() == {"xw", "w"}
    assert then_branch.opset_imports == graph.opset_imports
    assert [node.op_type for node in graph.toposort()][:2] == ["Add", "If"]


def test_metadata(load_onnx) -> None:
    metadata = load_onnx(_rich_model()).metadata
    assert metadata["author"] == "spawnml"
    assert metadata["producer_name"] == "tests"
    assert metadata["producer_version"] == "1"
    assert metadata["ir_version"] == str(_rich_model().ir_version)


def test_negative_dim_is_unknown(load_onnx) -> None:
    model = _identity_model()
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_value = -1
    assert load_onnx(model).inputs[0].shape == (None,)


def _identity_model(ir_version: int = 8, input_is_initializer: bool = False) -> onnx.ModelProto:
    graph = helper.make_graph(
        [helper.make_node("Identity", ["w"], ["y"])],
        "g",
        [helper.make_tensor_value_info("w", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
        [numpy_helper.from_array(np.ones(2, np.float32), "w")] if input_is_initializer else [],
    )
    return helper.make_model(graph, ir_version=ir_version, opset_imports=[helper.make_opsetid("", 13)])


def test_initializer_listed_as_input_is_an_overridable_default(load_onnx) -> None:
    graph = load_onnx(_identity_model(ir_version=8, input_is_initializer=True))
    assert [value.name for value in graph.inputs] == ["w"]
    assert list(graph.initializers) == ["w"]


def test_initializer_listed_as_input_before_ir4_is_a_constant(load_onnx) -> None:
    graph = load_onnx(_identity_model(ir_version=3, input_is_initializer=True))
    assert graph.inputs == []
    assert list(graph.initializers) == ["w"]


def test_local_functions_are_inlined(load_onnx) -> None:
    double = helper.make_function(
        "local",
        "Double",
        ["a"],
        ["b"],
        [helper.make_node("Add", ["a", "a"], ["b"])],
        [helper.make_opsetid("", 17)],
    )
    graph = helper.make_graph(
        [helper.make_node("Double", ["x"], ["y"], domain="local")],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
    )
    model = helper.make_model(
        graph,
        functions=[double],
        opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("local", 1)],
    )
    lowered = load_onnx(model)
    assert [(node.domain, node.op_type) for node in lowered.nodes] == [("", "Add")]
    assert lowered.nodes[0].outputs == ["y"]


# -- malformed files ------------------------------------------------------------------------


@pytest.mark.parametrize("data", [b"garbage bytes, not protobuf", b"\xff" * 64, b"\x08\x07"])
def test_garbage_is_refused(load_onnx, data: bytes) -> None:
    with pytest.raises(ModelLoadError, match="not a valid ONNX model"):
        load_onnx(data)


def test_truncated_file_names_the_file(tmp_path: Path, load_onnx) -> None:
    path = tmp_path / "cut.onnx"
    data = _rich_model().SerializeToString()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(ModelLoadError, match=r"cut\.onnx.*not a valid ONNX model"):
        load_onnx(path)


def test_unknown_element_type_is_refused(load_onnx) -> None:
    model = _identity_model()
    model.graph.initializer.append(TensorProto(name="odd", data_type=99, dims=[1], raw_data=b"\0"))
    with pytest.raises(ModelLoadError, match="initializer 'odd' of graph 'g' has element type 99"):
        load_onnx(model)


def test_data_that_does_not_fit_the_shape_is_refused(load_onnx) -> None:
    model = _identity_model()
    model.graph.initializer.append(TensorProto(name="short", data_type=1, dims=[4], raw_data=b"\0" * 8))
    with pytest.raises(ModelLoadError, match="initializer 'short' of graph 'g' holds data that does not fit"):
        load_onnx(model)


def test_sparse_index_outside_the_shape_is_refused(load_onnx) -> None:
    model = _identity_model()
    sparse = helper.make_sparse_tensor(
        numpy_helper.from_array(np.float32([1]), "sp"), numpy_helper.from_array(np.int64([9])), [2, 2]
    )
    model.graph.sparse_initializer.append(sparse)
    with pytest.raises(ModelLoadError, match="index outside"):
        load_onnx(model)


def test_function_attribute_reference_outside_a_function_is_refused(load_onnx) -> None:
    model = _identity_model()
    model.graph.node[0].attribute.append(helper.make_attribute_ref("alpha", AttributeProto.FLOAT))
    with pytest.raises(ModelLoadError, match="refers to function attribute"):
        load_onnx(model)


def test_duplicate_initializer_is_refused(load_onnx) -> None:
    model = _identity_model()
    model.graph.initializer.extend([numpy_helper.from_array(np.ones(2, np.float32), "k")] * 2)
    with pytest.raises(ModelLoadError, match="initializer 'k' of graph 'g' is given twice"):
        load_onnx(model)


# -- end to end through the plugin registry -------------------------------------------------


@pytest.mark.usefixtures("onnx_plugin_only")
def test_registered_through_the_entry_point() -> None:
    assert isinstance(formats()["onnx"], ONNXLoader)


@pytest.mark.usefixtures("onnx_plugin_only")
def test_spawnml_load_from_path_and_bytes(tmp_path: Path) -> None:
    model = _rich_model()
    path = tmp_path / "rich.onnx"
    onnx.save_model(model, path)
    assert_model_lowered(spawnml.load(path), model)
    assert_model_lowered(spawnml.load(path.read_bytes()), model)


@pytest.mark.usefixtures("onnx_plugin_only")
def test_spawnml_load_detects_onnx_without_the_extension(tmp_path: Path) -> None:
    path = tmp_path / "model.bin"
    onnx.save_model(_identity_model(), path)
    assert [node.op_type for node in spawnml.load(path).nodes] == ["Identity"]


# -- a real exported model ------------------------------------------------------------------


@pytest.mark.real_model
@pytest.mark.usefixtures("onnx_plugin_only")
def test_minilm_matches_onnx() -> None:
    path = require(lambda: asset_file("minilm-onnx-int8", "model.onnx"))
    model = onnx.load_model(path, load_external_data=False)
    graph = spawnml.load(path)
    assert_model_lowered(graph, model)
    assert len(graph.toposort()) == len(model.graph.node)
