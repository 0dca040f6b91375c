"""Fine-tuning an imported ONNX model: spawnml.nn.from_onnx against PyTorch and onnxruntime.

Two small models are written with onnx.helper (an MLP of Gemm nodes, a CNN of Conv, MaxPool,
Flatten and Gemm). Their forward pass is checked against onnxruntime on the file, three SGD
steps against torch modules holding the same weights, and the exported file against the
trained module in onnxruntime. float32 throughout: 1e-5 absolute on activations and weights.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnxruntime
import pytest
import spawnml
import spawnml.nn as nn
import spawnml.optim as optim
from onnx import TensorProto, helper, numpy_helper

from .torch_parity import torch

ATOL = 1e-5
rng = np.random.default_rng(3)


def _save(nodes, inputs, outputs, weights, path: Path, opset: int = 17) -> Path:
    graph = helper.make_graph(
        nodes, "model", inputs, outputs, [numpy_helper.from_array(v, k) for k, v in weights.items()]
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    path.write_bytes(model.SerializeToString())
    return path


def _f32(*shape: int) -> np.ndarray:
    return (rng.standard_normal(shape) * 0.3).astype(np.float32)


@pytest.fixture(scope="module")
def mlp(tmp_path_factory) -> tuple[Path, dict[str, np.ndarray]]:
    weights = {
        "fc1.weight": _f32(16, 8),
        "fc1.bias": _f32(16),
        "fc2.weight": _f32(4, 16),
        "fc2.bias": _f32(4),
    }
    nodes = [
        helper.make_node("Gemm", ["x", "fc1.weight", "fc1.bias"], ["h"], transB=1),
        helper.make_node("Relu", ["h"], ["r"]),
        helper.make_node("Gemm", ["r", "fc2.weight", "fc2.bias"], ["logits"], transB=1),
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 8])
    y = helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["n", 4])
    return _save(nodes, [x], [y], weights, tmp_path_factory.mktemp("mlp") / "mlp.onnx"), weights


@pytest.fixture(scope="module")
def cnn(tmp_path_factory) -> tuple[Path, dict[str, np.ndarray]]:
    weights = {
        "conv.weight": _f32(4, 1, 3, 3),
        "conv.bias": _f32(4),
        "fc.weight": _f32(3, 4 * 4 * 4),
        "fc.bias": _f32(3),
    }
    nodes = [
        helper.make_node("Conv", ["x", "conv.weight", "conv.bias"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Flatten", ["p"], ["f"], axis=1),
        helper.make_node("Gemm", ["f", "fc.weight", "fc.bias"], ["logits"], transB=1),
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 1, 8, 8])
    y = helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["n", 3])
    return _save(nodes, [x], [y], weights, tmp_path_factory.mktemp("cnn") / "cnn.onnx"), weights


def _torch_mlp(weights):
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    model.load_state_dict(
        {k.replace("fc1", "0").replace("fc2", "2"): torch.tensor(v) for k, v in weights.items()}
    )
    return model


def _torch_cnn(weights):
    model = torch.nn.Sequential(
        torch.nn.Conv2d(1, 4, 3, padding=1),
        torch.nn.ReLU(),
        torch.nn.MaxPool2d(2),
        torch.nn.Flatten(),
        torch.nn.Linear(64, 3),
    )
    renamed = {k.replace("conv", "0").replace("fc", "4"): torch.tensor(v) for k, v in weights.items()}
    model.load_state_dict(renamed)
    return model


def _ort(path: Path, x: np.ndarray) -> np.ndarray:
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return session.run(None, {"x": x})[0]


CASES = {"mlp": ((6, 8), 4, _torch_mlp), "cnn": ((6, 1, 8, 8), 3, _torch_cnn)}


@pytest.mark.parametrize("name", sorted(CASES))
def test_fine_tune_and_export(name, request, tmp_path):
    path, weights = request.getfixturevalue(name)
    shape, classes, make_torch = CASES[name]
    x = rng.standard_normal(shape).astype(np.float32)
    labels = rng.integers(0, classes, shape[0])

    module = nn.from_onnx(path)
    assert sorted(n for n, _ in module.named_parameters()) == sorted(k.replace(".", "_") for k in weights)
    np.testing.assert_allclose(module(spawnml.tensor(x)).detach().numpy(), _ort(path, x), atol=ATOL)

    reference = make_torch(weights)
    ours_opt = optim.SGD(module.parameters(), lr=0.1, momentum=0.9)
    theirs_opt = torch.optim.SGD(reference.parameters(), lr=0.1, momentum=0.9)
    for _ in range(3):
        ours_opt.zero_grad()
        nn.functional.cross_entropy(module(spawnml.tensor(x)), spawnml.tensor(labels)).backward()
        ours_opt.step()
        theirs_opt.zero_grad()
        torch.nn.functional.cross_entropy(reference(torch.tensor(x)), torch.tensor(labels)).backward()
        theirs_opt.step()
    trained = module(spawnml.tensor(x)).detach().numpy()
    np.testing.assert_allclose(trained, reference(torch.tensor(x)).detach().numpy(), atol=ATOL)

    exported = tmp_path / "trained.onnx"
    module.save_onnx(exported)
    np.testing.assert_allclose(_ort(exported, x), trained, atol=ATOL)
    assert np.abs(_ort(exported, x) - _ort(path, x)).max() > 1e-3  # the weights did change


def test_operator_without_gradient_is_refused(tmp_path):
    weights = {"w": _f32(4, 4)}
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Hardmax", ["h"], ["y"])]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])
    module = nn.from_onnx(_save(nodes, [x], [y], weights, tmp_path / "m.onnx"))
    with pytest.raises(spawnml.UnsupportedOperatorError, match=r"Hardmax.*no gradient"):
        module(spawnml.tensor(_f32(2, 4)))
    with spawnml.no_grad():
        module(spawnml.tensor(_f32(2, 4)))  # runs as is when no gradient has to cross it
