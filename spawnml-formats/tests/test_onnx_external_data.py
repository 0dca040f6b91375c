"""External tensor data: read from inside the model's folder, refused anywhere else."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.external_data_helper import convert_model_to_external_data, set_external_data
from spawnml import ModelLoadError, UnsafeExternalDataError

WEIGHTS = {
    "w": np.arange(12, dtype=np.float32).reshape(3, 4),
    "b": np.linspace(-1, 1, 4).astype(np.float16),
    "ids": np.array([[5, -7]], np.int64),
}


def _model(constant: np.ndarray | None = None) -> onnx.ModelProto:
    nodes = [helper.make_node("MatMul", ["x", "w"], ["y"])]
    if constant is not None:
        nodes.append(
            helper.make_node("Constant", [], ["c"], value=numpy_helper.from_array(constant, "c_value"))
        )
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])],
        [numpy_helper.from_array(array, name) for name, array in WEIGHTS.items()],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _save_external(model: onnx.ModelProto, path: Path, location: str) -> None:
    """Save with every tensor, attribute tensors included, in the file ``location``."""
    convert_model_to_external_data(model, location=location, size_threshold=0, convert_attribute=True)
    onnx.save_model(model, path)


def _reference(path: Path) -> dict[str, np.ndarray]:
    """What onnx reads for each initializer of the saved model."""
    model = onnx.load_model(path, load_external_data=False)
    return {t.name: numpy_helper.to_array(t, base_dir=str(path.parent)) for t in model.graph.initializer}


@pytest.mark.parametrize("location", ["weights.bin", "data/weights.bin"])
def test_external_data_inside_the_folder(tmp_path: Path, load_onnx, location: str) -> None:
    (tmp_path / "data").mkdir()
    path = tmp_path / "model.onnx"
    _save_external(_model(), path, location)
    assert onnx.load_model(path, load_external_data=False).graph.initializer[0].data_location == 1
    graph = load_onnx(path)
    for name, expected in _reference(path).items():
        assert graph.initializers[name].dtype == expected.dtype
        np.testing.assert_array_equal(graph.initializers[name], expected)
        np.testing.assert_array_equal(graph.initializers[name], WEIGHTS[name])


def test_external_data_of_an_attribute_tensor(tmp_path: Path, load_onnx) -> None:
    path = tmp_path / "model.onnx"
    constant = np.array([[1.5, -2.5, 3.0]], np.float64)
    _save_external(_model(constant), path, "weights.bin")
    node = onnx.load_model(path, load_external_data=False).graph.node[1]
    assert node.attribute[0].t.data_location == TensorProto.EXTERNAL
    lowered = load_onnx(path).nodes[1].attrs["value"]
    np.testing.assert_array_equal(lowered, numpy_helper.to_array(node.attribute[0].t, str(tmp_path)))


def _point_at(folder: Path, location: str, **range_: int) -> Path:
    """A model in ``folder`` whose initializer ``w`` reads its data from ``location``."""
    model = _model()
    tensor = model.graph.initializer[0]
    set_external_data(tensor, location, **range_)
    tensor.ClearField("raw_data")
    tensor.data_location = TensorProto.EXTERNAL
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "model.onnx"
    onnx.save_model(model, path)
    return path


def test_parent_escape_is_refused(tmp_path: Path, load_onnx) -> None:
    (tmp_path / "x.bin").write_bytes(WEIGHTS["w"].tobytes())
    with pytest.raises(UnsafeExternalDataError, match="outside the model's folder"):
        load_onnx(_point_at(tmp_path / "model", "../x.bin"))


def test_absolute_path_is_refused(tmp_path: Path, load_onnx) -> None:
    target = tmp_path / "model" / "x.bin"
    target.parent.mkdir()
    target.write_bytes(WEIGHTS["w"].tobytes())
    with pytest.raises(UnsafeExternalDataError, match="absolute path"):
        load_onnx(_point_at(tmp_path / "model", str(target)))


def test_symlink_out_of_the_folder_is_refused(tmp_path: Path, load_onnx) -> None:
    (tmp_path / "secret.bin").write_bytes(WEIGHTS["w"].tobytes())
    (tmp_path / "model").mkdir()
    os.symlink(tmp_path / "secret.bin", tmp_path / "model" / "x.bin")
    with pytest.raises(UnsafeExternalDataError, match="outside the model's folder"):
        load_onnx(_point_at(tmp_path / "model", "x.bin"))


def test_symlink_within_the_folder_is_allowed(tmp_path: Path, load_onnx) -> None:
    (tmp_path / "real.bin").write_bytes(WEIGHTS["w"].tobytes())
    os.symlink(tmp_path / "real.bin", tmp_path / "x.bin")
    graph = load_onnx(_point_at(tmp_path, "x.bin"))
    np.testing.assert_array_equal(graph.initializers["w"], WEIGHTS["w"])


def test_model_in_memory_with_external_data_is_refused(tmp_path: Path, load_onnx) -> None:
    path = tmp_path / "model.onnx"
    _save_external(_model(), path, "weights.bin")
    with pytest.raises(UnsafeExternalDataError, match="given as bytes"):
        load_onnx(path.read_bytes())


def test_offset_and_length(tmp_path: Path, load_onnx) -> None:
    data = WEIGHTS["w"].tobytes()
    (tmp_path / "x.bin").write_bytes(b"\xaa" * 16 + data + b"\xbb" * 8)
    graph = load_onnx(_point_at(tmp_path, "x.bin", offset=16, length=len(data)))
    np.testing.assert_array_equal(graph.initializers["w"], WEIGHTS["w"])


@pytest.mark.parametrize(
    ("range_", "message"),
    [
        ({"offset": 8}, "which has only"),
        ({"length": 40}, "declares 40 bytes"),
        ({"offset": 0, "length": 1 << 40}, "declares"),
    ],
)
def test_byte_range_must_fit(tmp_path: Path, load_onnx, range_: dict[str, int], message: str) -> None:
    (tmp_path / "x.bin").write_bytes(WEIGHTS["w"].tobytes())
    with pytest.raises(ModelLoadError, match=message):
        load_onnx(_point_at(tmp_path, "x.bin", **range_))


@pytest.mark.parametrize(
    ("location", "message"), [("missing.bin", "cannot be read"), ("sub", "regular file")]
)
def test_location_must_be_a_file(tmp_path: Path, load_onnx, location: str, message: str) -> None:
    (tmp_path / "sub").mkdir()
    with pytest.raises(ModelLoadError, match=message):
        load_onnx(_point_at(tmp_path, location))
