"""Fine-tuning an imported model, on every backend: a torch model exported to ONNX becomes a
GraphModule whose outputs match onnxruntime's (1e-5), whose training steps give torch's losses on
the same weights (1e-5), and whose trained weights, written back to ONNX, make onnxruntime give
the module's own outputs (1e-5)."""

from __future__ import annotations

import io
import warnings

import numpy as np
import onnxruntime
import pytest
import spawnml
import spawnml.nn.functional as F
from spawnml import nn
from spawnml.optim import SGD

from .devices import DEVICES, device_or_skip
from .torch_parity import torch

RTOL, ATOL = 1e-5, 1e-5
rng = np.random.default_rng(2)


def _models():
    torch.manual_seed(0)
    tnn = torch.nn
    cnn = tnn.Sequential(
        tnn.Conv2d(2, 4, 3, padding=1),
        tnn.ReLU(),
        tnn.BatchNorm2d(4),  # after the ReLU, so that the export keeps it (evaluation mode)
        tnn.MaxPool2d(2),
        tnn.Flatten(),
        tnn.Linear(4 * 3 * 3, 3),
    ).eval()
    with torch.no_grad():  # statistics of their own (the exporter shares equal initializers)
        for tensor in (cnn[2].weight, cnn[2].bias, cnn[2].running_mean, cnn[2].running_var):
            tensor.uniform_(0.5, 1.5)
    return {
        "mlp": (tnn.Sequential(tnn.Linear(6, 8), tnn.Tanh(), tnn.Linear(8, 3)), (5, 6)),
        "cnn": (cnn, (5, 2, 6, 6)),
    }


def _export(model, shape) -> bytes:
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            model,
            (torch.zeros(shape),),
            buffer,
            dynamo=False,
            do_constant_folding=False,
            input_names=["x"],
            output_names=["y"],
        )
    return buffer.getvalue()


def _onnxruntime(model: bytes, x: np.ndarray) -> np.ndarray:
    session = onnxruntime.InferenceSession(model, providers=["CPUExecutionProvider"])
    return session.run(None, {"x": x})[0]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("kind", ["mlp", "cnn"])
def test_fine_tune_and_export(kind, device, tmp_path):
    device = device_or_skip(device)
    reference, shape = _models()[kind]
    exported = _export(reference, shape)
    module = nn.from_onnx(exported, device)
    x = rng.standard_normal(shape).astype(np.float32)
    y = rng.integers(0, 3, shape[0])
    with spawnml.no_grad():
        np.testing.assert_allclose(
            module(spawnml.tensor(x, device=device)).numpy(), _onnxruntime(exported, x), RTOL, ATOL
        )

    ours, theirs = (
        SGD(module.parameters(), lr=0.1, momentum=0.9),
        torch.optim.SGD(reference.parameters(), lr=0.1, momentum=0.9),
    )
    for _ in range(5):
        ours.zero_grad()
        loss = F.cross_entropy(module(spawnml.tensor(x, device=device)), spawnml.tensor(y, device=device))
        loss.backward()
        ours.step()
        theirs.zero_grad()
        expected = torch.nn.functional.cross_entropy(reference(torch.tensor(x)), torch.tensor(y))
        expected.backward()
        theirs.step()
        np.testing.assert_allclose(loss.item(), expected.item(), RTOL)

    module.save_onnx(tmp_path / "trained.onnx")
    trained = (tmp_path / "trained.onnx").read_bytes()
    with spawnml.no_grad():
        ours_out = module(spawnml.tensor(x, device=device)).numpy()
    np.testing.assert_allclose(_onnxruntime(trained, x), ours_out, RTOL, ATOL)
    with torch.no_grad():
        np.testing.assert_allclose(ours_out, reference(torch.tensor(x)).numpy(), RTOL, ATOL)


def test_operators_without_a_differentiable_form_are_refused():
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Hardsigmoid())
    with pytest.raises(spawnml.UnsupportedOperatorError, match=r"HardSigmoid .*no differentiable form"):
        nn.from_onnx(_export(model, (2, 4)))
