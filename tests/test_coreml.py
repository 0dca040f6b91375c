"""The Core ML loader on models coremltools converts from torch modules, against torch's outputs.

Each module is traced and converted twice, to a neural network (``.mlmodel``) and to an ML
program (``.mlpackage``, float32 compute precision); SpawnML runs both on the CPU backend and
must match the torch module on the same seeded input within ``rtol=1e-5, atol=1e-6``: float32
throughout, summation orders differing between torch and numpy over up to 32 terms (the largest
error measured is 4.8e-7, on outputs up to 2.9).
The same files check detection, ``spawnml info`` / ``convert`` and the loader's refusals.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import logging
import shutil
import warnings
from dataclasses import dataclass
from pathlib import Path

import coremltools as ct
import numpy as np
import onnxruntime
import pytest
import spawnml
import torch
from coremltools.models.neural_network.quantization_utils import quantize_weights
from spawnml import Limits, ModelLimitError, ModelLoadError, UnsafeExternalDataError, UnsupportedOperatorError
from spawnml.cli import main
from spawnml.formats import ModelSource, detect
from spawnml.plugins import formats
from spawnml_formats.coreml.protos import proto

RTOL, ATOL = 1e-5, 1e-6
TARGETS = ("neuralnetwork", "mlprogram")


class MLP(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.hidden, self.out = torch.nn.Linear(10, 32), torch.nn.Linear(32, 4)

    def forward(self, x):
        return torch.sigmoid(self.out(torch.relu(self.hidden(x))))


class CNN(torch.nn.Module):
    """conv -> batchnorm -> relu -> max pool -> batchnorm -> avg pool -> flatten -> linear."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn, self.pooled_bn = torch.nn.BatchNorm2d(8), torch.nn.BatchNorm2d(8)
        self.fc = torch.nn.Linear(8 * 2 * 2, 5)

    def forward(self, x):
        x = torch.nn.functional.max_pool2d(torch.relu(self.bn(self.conv(x))), 2)
        x = torch.nn.functional.avg_pool2d(self.pooled_bn(x), 2)
        return self.fc(torch.flatten(x, 1))


class Attention(torch.nn.Module):
    """layernorm -> single-head attention (matmul, softmax) -> residual -> gelu feed-forward."""

    def __init__(self) -> None:
        super().__init__()
        self.norm = torch.nn.LayerNorm(16)
        self.q, self.k, self.v = (torch.nn.Linear(16, 16) for _ in range(3))
        self.ff = torch.nn.Linear(16, 16)

    def forward(self, x):
        h = self.norm(x)
        weights = torch.softmax(self.q(h) @ self.k(h).transpose(1, 2) / 4, dim=-1)
        x = x + weights @ self.v(h)
        return x + torch.nn.functional.gelu(self.ff(x))


class Zoo(torch.nn.Module):
    """Grouped and transposed convolution, padded average pooling, concat, reductions, slices, activations."""

    def __init__(self) -> None:
        super().__init__()
        self.depthwise = torch.nn.Conv2d(4, 4, 3, stride=2, padding=1, groups=4)
        self.pointwise = torch.nn.Conv2d(4, 6, 1)
        self.up = torch.nn.ConvTranspose2d(6, 2, 2, stride=2)

    def forward(self, x):
        a = torch.nn.functional.leaky_relu(self.depthwise(x), 0.1)
        b = torch.nn.functional.elu(self.pointwise(a))
        c = torch.nn.functional.avg_pool2d(b, 3, stride=1, padding=1, count_include_pad=False)
        d = torch.cat([c, torch.tanh(b)], dim=1)
        e = torch.nn.functional.silu(d) * torch.sigmoid(d.mean(dim=(2, 3), keepdim=True))
        g = e.permute(0, 2, 3, 1).reshape(1, 25, 12)
        h = torch.sqrt(torch.abs(g) + 1) - torch.exp(-g.clamp(-3, 3)) / 2
        peaks = torch.nn.functional.relu6(h.squeeze(0) * 4).unsqueeze(0).max(dim=-1)[0]
        return peaks + self.up(b).flatten(1)[:, :25]


class Zoo2(torch.nn.Module):
    """Instance norm, reflection padding, nearest upsampling, where, tile, argmax."""

    def __init__(self) -> None:
        super().__init__()
        self.norm = torch.nn.InstanceNorm2d(3, affine=True)
        self.conv = torch.nn.Conv2d(3, 4, 3)

    def forward(self, x):
        padded = torch.nn.functional.pad(self.norm(x), (1, 1, 1, 1), mode="reflect")
        up = torch.nn.functional.interpolate(self.conv(padded), scale_factor=2, mode="nearest")
        tiled = torch.where(up > 0, up, up * 0.5).repeat(1, 2, 1, 1)
        pooled = torch.nn.functional.max_pool2d(tiled, 2)
        peaks = torch.softmax(pooled.flatten(2), dim=-1).argmax(dim=-1).float()
        return torch.cat([pooled.flatten(1), peaks], dim=1)


MODULES = {
    "mlp": (MLP, (2, 10)),
    "cnn": (CNN, (2, 3, 8, 8)),
    "attention": (Attention, (2, 5, 16)),
    "zoo": (Zoo, (1, 4, 9, 9)),
    "zoo2": (Zoo2, (1, 3, 6, 6)),
}


@dataclass(frozen=True)
class Converted:
    """A module, its converted files, its input and torch's output on it."""

    module: torch.nn.Module
    files: dict[str, Path]
    feed: np.ndarray
    expected: np.ndarray


def _randomise_batchnorms(module: torch.nn.Module, rng: np.random.Generator) -> None:
    for layer in module.modules():
        if isinstance(layer, torch.nn.BatchNorm2d):
            channels = layer.num_features
            layer.running_mean.copy_(torch.from_numpy(rng.standard_normal(channels).astype(np.float32)))
            layer.running_var.copy_(torch.from_numpy(rng.uniform(0.5, 2, channels).astype(np.float32)))
            layer.weight.data.copy_(torch.from_numpy(rng.uniform(0.5, 1.5, channels).astype(np.float32)))


def convert(module: torch.nn.Module, shape: tuple[int, ...], folder: Path, name: str) -> dict[str, Path]:
    """``module`` traced and converted to a neural network and to an ML program, saved under ``folder``."""
    traced = torch.jit.trace(module, torch.zeros(shape))
    files = {}
    for target in TARGETS:
        options = {"compute_precision": ct.precision.FLOAT32} if target == "mlprogram" else {}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = ct.convert(
                traced,
                inputs=[ct.TensorType(name="x", shape=shape)],
                convert_to=target,
                minimum_deployment_target=ct.target.iOS15 if target == "mlprogram" else None,
                **options,
            )
        files[target] = folder / f"{name}.{'mlpackage' if target == 'mlprogram' else 'mlmodel'}"
        model.save(str(files[target]))
    return files


@pytest.fixture(scope="module")
def converted(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Converted]:
    logging.getLogger("coremltools").setLevel(logging.ERROR)
    folder = tmp_path_factory.mktemp("coreml")
    models = {}
    for index, (name, (cls, shape)) in enumerate(MODULES.items()):
        torch.manual_seed(index)
        rng = np.random.default_rng(index)
        module = cls().eval()
        _randomise_batchnorms(module, rng)
        feed = rng.standard_normal(shape).astype(np.float32)
        with torch.no_grad():
            expected = module(torch.from_numpy(feed)).numpy()
        models[name] = Converted(module, convert(module, shape, folder, name), feed, expected)
    return models


def run(path: Path | bytes, feed: np.ndarray) -> np.ndarray:
    session = spawnml.InferenceSession(path, providers=["cpu"])
    (source,) = session.get_inputs()
    (output,) = session.run(None, {source.name: feed})
    return output


# -- against torch -----------------------------------------------------------------------------


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("name", MODULES)
def test_cpu_matches_torch(converted: dict[str, Converted], name: str, target: str) -> None:
    model = converted[name]
    np.testing.assert_allclose(run(model.files[target], model.feed), model.expected, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("name", MODULES)
def test_float16_program_matches_torch_within_half_precision(converted, tmp_path: Path, name: str) -> None:
    """coremltools' default ML program computes in float16 (casts at the edges, float16 weights).

    Unit roundoff 4.9e-4 over sums of up to 32 terms: within ``atol=rtol=1e-2`` of float32 torch
    (the largest error measured is 5.0e-3, on outputs up to 2.9).
    """
    model = converted[name]
    traced = torch.jit.trace(model.module, torch.from_numpy(model.feed))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program = ct.convert(
            traced, inputs=[ct.TensorType(name="x", shape=model.feed.shape)], convert_to="mlprogram"
        )
    path = tmp_path / f"{name}16.mlpackage"
    program.save(str(path))
    assert "Cast" in {node.op_type for node in spawnml.load(path).nodes}
    np.testing.assert_allclose(run(path, model.feed), model.expected, rtol=1e-2, atol=1e-2)


def test_lowered_operators(converted: dict[str, Converted]) -> None:
    """Batchnorm, layer norm, attention and pooling stay themselves, so the models test them."""
    ops = {
        (name, target): {node.op_type for node in spawnml.load(path).nodes}
        for name, model in converted.items()
        for target, path in model.files.items()
    }
    assert {"Conv", "MaxPool", "AveragePool", "BatchNormalization"} <= ops["cnn", "mlprogram"]
    assert {"Conv", "MaxPool", "AveragePool", "Mul", "Add"} <= ops["cnn", "neuralnetwork"]
    assert {"LayerNormalization", "MatMul", "Softmax", "Gelu"} <= ops["attention", "mlprogram"]
    assert {"ReduceMean", "MatMul", "Softmax", "Gelu"} <= ops["attention", "neuralnetwork"]
    for target in TARGETS:
        assert {"ConvTranspose", "AveragePool", "Concat", "ReduceMax", "Slice", "Clip"} <= ops["zoo", target]
        assert {"InstanceNormalization", "Pad", "Resize", "Where", "Tile", "ArgMax"} <= ops["zoo2", target]


@pytest.mark.parametrize("target", TARGETS)
def test_flexible_batch_runs_every_size(converted: dict[str, Converted], tmp_path: Path, target: str) -> None:
    """An input converted with a ``RangeDim`` batch is unknown-sized in the IR and runs any size in it."""
    module = converted["mlp"].module
    traced = torch.jit.trace(module, torch.zeros(2, 10))
    options = {"compute_precision": ct.precision.FLOAT32} if target == "mlprogram" else {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = ct.convert(
            traced,
            inputs=[ct.TensorType(name="x", shape=(ct.RangeDim(1, 16), 10))],
            convert_to=target,
            **options,
        )
    path = tmp_path / ("flexible.mlpackage" if target == "mlprogram" else "flexible.mlmodel")
    model.save(str(path))
    session = spawnml.InferenceSession(path, providers=["cpu"])
    assert session.get_inputs()[0].shape == [None, 10]
    for batch in (1, 5, 16):
        feed = np.random.default_rng(batch).standard_normal((batch, 10)).astype(np.float32)
        with torch.no_grad():
            expected = module(torch.from_numpy(feed)).numpy()
        np.testing.assert_allclose(session.run(None, {"x": feed})[0], expected, rtol=RTOL, atol=ATOL)


def test_model_file_inside_package_reads_its_weights(converted: dict[str, Converted]) -> None:
    model = converted["cnn"]
    inner = model.files["mlprogram"] / "Data" / "com.apple.CoreML" / "model.mlmodel"
    np.testing.assert_allclose(run(inner, model.feed), model.expected, rtol=RTOL, atol=ATOL)


# -- quantized weights ----------------------------------------------------------------------------


def test_half_precision_weights_match_torch_with_rounded_weights(converted: dict[str, Converted]) -> None:
    model = converted["mlp"]
    with contextlib.redirect_stdout(io.StringIO()):
        half = quantize_weights(ct.models.MLModel(str(model.files["neuralnetwork"])), 16).get_spec()
    assert half.neuralNetwork.layers[0].innerProduct.weights.float16Value
    rounded = copy.deepcopy(model.module)
    with torch.no_grad():
        for parameter in rounded.parameters():
            parameter.copy_(parameter.half().float())
        expected = rounded(torch.from_numpy(model.feed)).numpy()
    np.testing.assert_allclose(run(half.SerializeToString(), model.feed), expected, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize(
    ("bits", "mode"),
    [
        (8, "linear"),
        (8, "linear_symmetric"),
        (8, "linear_lut"),
        (4, "linear"),
        (3, "linear_lut"),
        (1, "linear"),
    ],
)
def test_quantized_weights_match_coremltools_dequantization(converted, bits: int, mode: str) -> None:
    """Weights quantized by coremltools, run as SpawnML reads them and as coremltools dequantizes them."""
    model = converted["cnn"]
    with contextlib.redirect_stdout(io.StringIO()):
        quantized = quantize_weights(ct.models.MLModel(str(model.files["neuralnetwork"])), bits, mode)
        dequantized = quantize_weights(quantized, bits, "dequantization")
    conv = quantized.get_spec().neuralNetwork.layers[0].convolution.weights
    assert conv.rawValue and conv.quantization.numberOfBits == bits
    reference = run(dequantized.get_spec().SerializeToString(), model.feed)
    np.testing.assert_allclose(
        run(quantized.get_spec().SerializeToString(), model.feed), reference, rtol=RTOL, atol=ATOL
    )


# -- detection ---------------------------------------------------------------------------------


def test_detected_by_content_not_name(converted: dict[str, Converted], tmp_path: Path) -> None:
    model = converted["mlp"]
    data = model.files["neuralnetwork"].read_bytes()
    np.testing.assert_allclose(run(data, model.feed), model.expected, rtol=RTOL, atol=ATOL)
    renamed = tmp_path / "weights.bin"
    renamed.write_bytes(data)
    assert detect(ModelSource.of(renamed), list(formats().values())).name == "coreml"
    package = tmp_path / "renamed"
    shutil.copytree(model.files["mlprogram"], package)
    assert detect(ModelSource.of(package), list(formats().values())).name == "coreml"


def test_onnx_and_coreml_do_not_claim_each_other(converted: dict[str, Converted]) -> None:
    from onnx import TensorProto, helper
    from spawnml_formats.coreml.sniff import looks_like_coreml
    from spawnml_formats.onnx.sniff import looks_like_onnx

    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])],
    )
    onnx_head = helper.make_model(graph, producer_name="backend-test").SerializeToString()[:64]
    assert looks_like_onnx(onnx_head) and not looks_like_coreml(onnx_head)
    coreml_head = converted["attention"].files["neuralnetwork"].read_bytes()[:64]
    assert looks_like_coreml(coreml_head) and not looks_like_onnx(coreml_head)


# -- refusals ----------------------------------------------------------------------------------


def _copy_package(converted: dict[str, Converted], folder: Path, name: str = "mlp") -> Path:
    package = folder / "copy.mlpackage"
    shutil.copytree(converted[name].files["mlprogram"], package)
    return package


def test_program_bytes_without_their_package_are_refused(converted: dict[str, Converted]) -> None:
    inner = converted["mlp"].files["mlprogram"] / "Data" / "com.apple.CoreML" / "model.mlmodel"
    with pytest.raises(ModelLoadError, match=r"keeps weights in '@model_path/weights/weight.bin'"):
        spawnml.load(inner.read_bytes())


def test_manifest_pointing_outside_the_package_is_refused(converted, tmp_path: Path) -> None:
    package = _copy_package(converted, tmp_path)
    manifest = json.loads((package / "Manifest.json").read_text())
    root = manifest["rootModelIdentifier"]
    manifest["itemInfoEntries"][root]["path"] = "../../outside.mlmodel"
    (package / "Manifest.json").write_text(json.dumps(manifest))
    (tmp_path / "outside.mlmodel").write_bytes(converted["mlp"].files["neuralnetwork"].read_bytes())
    with pytest.raises(UnsafeExternalDataError, match="outside its folder"):
        spawnml.load(package)


@pytest.mark.parametrize(
    ("manifest", "message"),
    [
        ("{", "is not valid JSON"),
        ("[" * 100_000, "is not valid JSON"),
        ('{"rootModelIdentifier": "a", "itemInfoEntries": {}}', "names no root model"),
        ('{"rootModelIdentifier": "a", "itemInfoEntries": {"a": {"path": 3}}}', "root model's path as 3"),
        (
            '{"rootModelIdentifier": "a", "itemInfoEntries": {"a": {"path": "a\\u0000b"}}}',
            "cannot be resolved",
        ),
    ],
)
def test_broken_manifest_is_refused(converted, tmp_path: Path, manifest: str, message: str) -> None:
    package = _copy_package(converted, tmp_path)
    (package / "Manifest.json").write_text(manifest)
    with pytest.raises(ModelLoadError, match=message):
        spawnml.load(package)


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda data: data[:200], "past the file|outside the"),
        (lambda data: data[:64] + b"\0" * (len(data) - 64), "no blob record there"),
        (lambda data: data[:4] + b"\1\0\0\0" + data[8:], "blob storage version 1"),
    ],
)
def test_damaged_weight_file_is_refused(converted, tmp_path: Path, damage, message: str) -> None:
    package = _copy_package(converted, tmp_path)
    weights = package / "Data" / "com.apple.CoreML" / "weights" / "weight.bin"
    weights.write_bytes(damage(weights.read_bytes()))
    with pytest.raises(ModelLoadError, match=message):
        spawnml.load(package)


def test_limits_bound_layers_and_operations(converted: dict[str, Converted]) -> None:
    for path in converted["cnn"].files.values():
        with pytest.raises(ModelLimitError, match="node count"):
            spawnml.load(path, Limits(max_nodes=3))


@pytest.mark.parametrize(("operation", "unmapped"), [("relu", "topk"), ("max_pool", "l2_pool")])
def test_unmapped_operation_is_refused_by_name(
    converted, tmp_path: Path, operation: str, unmapped: str
) -> None:
    """An operation with no lowering here (its constant arguments strings or not) loads as a
    coreml.mil node, which sessions refuse by name."""
    package = _copy_package(converted, tmp_path, "cnn")
    path = package / "Data" / "com.apple.CoreML" / "model.mlmodel"
    model = proto("Model_pb2").Model()
    model.ParseFromString(path.read_bytes())
    block = model.mlProgram.functions["main"].block_specializations["CoreML5"]
    next(op for op in block.operations if op.type == operation).type = unmapped
    path.write_bytes(model.SerializeToString())
    graph = spawnml.load(package)
    assert ("coreml.mil", unmapped) in graph.op_counts()
    with pytest.raises(UnsupportedOperatorError, match=rf"coreml.mil::{unmapped} \(opset 1, 1 node\)"):
        spawnml.InferenceSession(package, providers=["cpu"])


def _damaged(build, damage) -> bytes:
    model = proto("Model_pb2").Model()
    model.ParseFromString(build())
    damage(model)
    return model.SerializeToString()


def _program_block(model):
    return model.mlProgram.functions["main"].block_specializations["CoreML5"]


def _operation(model, output: str):
    return next(op for op in _program_block(model).operations if op.outputs[0].name == output)


def _string_typed_bias(model) -> None:
    _operation(model, "b").outputs[0].type.tensorType.dataType = 2
    _operation(model, "b").attributes["val"].type.tensorType.dataType = 2


def _bias_from_string(model) -> None:
    linear = _operation(model, "l")
    linear.inputs["bias"].arguments[0].name = "pad_type"


def _zero_stride(model) -> None:
    _operation(model, "strides").attributes["val"].immediateValue.tensor.ints.values[0] = 0


def _negative_variance(model) -> None:
    model.neuralNetwork.layers[3].batchnorm.variance.floatValue[0] = -5.0


@pytest.mark.parametrize(
    ("kind", "damage", "message"),
    [
        (
            "network",
            lambda model: model.neuralNetwork.layers[1].ClearField("activation"),
            "has no layer type",
        ),
        ("network", lambda model: model.neuralNetwork.layers[1].ClearField("input"), "has no input"),
        ("network", _negative_variance, "variances plus epsilon that are not all positive"),
        ("program", _zero_stride, "strides .* must be positive"),
        ("program", _string_typed_bias, "is declared object but holds floats"),
        ("program", _bias_from_string, "reads the string constant 'pad_type' as a tensor"),
    ],
)
def test_malformed_models_are_refused(kind: str, damage, message: str) -> None:
    """Inputs the fuzzer found crashing the loader, rebuilt from its seeds: each is now a ModelLoadError."""
    from tests.fuzz.coreml_files import ml_program_model, neural_network_model

    data = _damaged(neural_network_model if kind == "network" else ml_program_model, damage)
    with pytest.raises(ModelLoadError, match=message):
        spawnml.InferenceSession(data, providers=["cpu"])


def test_models_without_a_graph_are_refused_by_kind() -> None:
    spec = proto("Model_pb2")
    model = spec.Model(specificationVersion=4)
    feature = model.description.input.add(name="x")
    feature.type.multiArrayType.shape.append(3)
    feature.type.multiArrayType.dataType = 65568
    model.glmRegressor.offset.append(1.0)
    with pytest.raises(ModelLoadError, match="is a Core ML glmRegressor; SpawnML reads neural networks"):
        spawnml.load(model.SerializeToString())


# -- command line ------------------------------------------------------------------------------


def test_info_describes_package(converted, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["info", str(converted["attention"].files["mlprogram"]), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["format"] == "coreml"
    assert report["metadata"]["coreml_model_type"] == "mlProgram"
    assert report["inputs"] == [{"name": "x", "type": "tensor(float)", "shape": [2, 5, 16]}]
    assert all(op["backends"]["cpu"] for op in report["operators"])


@pytest.mark.parametrize("target", TARGETS)
def test_convert_to_onnx_matches_torch_on_onnxruntime(converted, tmp_path: Path, target: str) -> None:
    model = converted["cnn"]
    out = tmp_path / "cnn.onnx"
    assert main(["convert", str(model.files[target]), str(out)]) == 0
    session = onnxruntime.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    (result,) = session.run(None, {session.get_inputs()[0].name: model.feed})
    np.testing.assert_allclose(result, model.expected, rtol=RTOL, atol=ATOL)
