"""Checkpoints: module weights exchanged with torch through SafeTensors files (outputs equal to
float32 rounding, 1e-6), and full training states (with dropout drawing from the saved RNG state)
from which training resumes bit-exactly on every backend."""

from __future__ import annotations

import numpy as np
import pytest
import spawnml
import spawnml.nn as nn
import spawnml.nn.functional as F
from safetensors.torch import load_file as torch_load_file
from safetensors.torch import save_file as torch_save_file
from spawnml.optim import Adam, lr_scheduler
from spawnml.utils.data import DataLoader, TensorDataset

from .devices import DEVICES, device_or_skip
from .torch_parity import torch

RTOL, ATOL = 1e-6, 1e-6
rng = np.random.default_rng(11)
X = rng.standard_normal((24, 6)).astype(np.float32)
Y = rng.integers(0, 3, 24)


MODELS = {
    "mlp": (lambda lib: lib.Sequential(lib.Linear(6, 8), lib.ReLU(), lib.Linear(8, 3)), (24, 6)),
    "cnn": (
        lambda lib: lib.Sequential(
            lib.Conv2d(1, 4, 3, padding=1),
            lib.BatchNorm2d(4),
            lib.ReLU(),
            lib.MaxPool2d(2),
            lib.Flatten(),
            lib.Linear(4, 3),
        ),
        (24, 1, 2, 3),
    ),
}


@pytest.mark.parametrize("kind", MODELS)
def test_torch_weights_load_through_safetensors_and_back(tmp_path, kind):
    build, shape = MODELS[kind]
    x = X.reshape(shape)
    theirs = build(torch.nn)
    theirs(torch.tensor(x))  # training mode: BatchNorm's running statistics and count move
    theirs.eval()
    torch_save_file(theirs.state_dict(), tmp_path / "torch.safetensors")
    ours = build(nn).eval()
    ours.load_state_dict(spawnml.load_safetensors(tmp_path / "torch.safetensors"))
    with torch.no_grad():
        np.testing.assert_allclose(
            ours(spawnml.tensor(x)).detach().numpy(), theirs(torch.tensor(x)).numpy(), RTOL, ATOL
        )

    ours.train()  # move away from torch's weights and statistics, then send them back
    optimizer = Adam(ours.parameters(), lr=0.1)
    F.cross_entropy(ours(spawnml.tensor(x)), spawnml.tensor(Y)).backward()
    optimizer.step()
    ours.eval()
    spawnml.save_safetensors(ours.state_dict(), tmp_path / "ours.safetensors")
    theirs.load_state_dict(torch_load_file(tmp_path / "ours.safetensors"))
    with torch.no_grad():
        np.testing.assert_allclose(
            ours(spawnml.tensor(x)).detach().numpy(), theirs(torch.tensor(x)).numpy(), RTOL, ATOL
        )


def _training(seed: int, device: str):
    spawnml.manual_seed(seed)
    model = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Dropout(0.2), nn.Linear(8, 3)).to(device)
    optimizer = Adam(model.parameters(), lr=0.05, amsgrad=True)
    scheduler = lr_scheduler.CosineAnnealingLR(optimizer, T_max=4)
    loader = DataLoader(TensorDataset(spawnml.tensor(X), spawnml.tensor(Y)), batch_size=8, shuffle=True)
    return model, optimizer, scheduler, loader


def _train(model, optimizer, scheduler, loader, epochs: int, device: str) -> list[float]:
    losses = []
    for _ in range(epochs):
        for x, y in loader:
            optimizer.zero_grad()
            loss = F.cross_entropy(model(x.to(device)), y.to(device))
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        scheduler.step()
    return losses


@pytest.mark.parametrize("device", DEVICES)
def test_training_resumes_bit_exactly(tmp_path, device):
    device = device_or_skip(device)
    straight = _training(0, device)
    expected = _train(*straight, epochs=2, device=device)  # 6 steps: 3 batches an epoch

    model, optimizer, scheduler, loader = _training(0, device)
    first = _train(model, optimizer, scheduler, loader, epochs=1, device=device)
    state = {
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "scheduler": scheduler.state_dict(),
        "rng": spawnml.get_rng_state(),
        "epoch": 1,
    }
    spawnml.save_checkpoint(state, tmp_path / "checkpoint.safetensors")

    model, optimizer, scheduler, loader = _training(1, device)  # fresh objects, other weights and RNG state
    saved = spawnml.load_checkpoint(tmp_path / "checkpoint.safetensors")
    model.load_state_dict(saved["model"])
    optimizer.load_state_dict(saved["optimizer"])
    scheduler.load_state_dict(saved["scheduler"])
    spawnml.set_rng_state(saved["rng"])
    assert saved["epoch"] == 1
    rest = _train(model, optimizer, scheduler, loader, epochs=1, device=device)

    assert first + rest == expected
    for (name, mine), reference in zip(
        model.state_dict().items(), straight[0].state_dict().values(), strict=True
    ):
        np.testing.assert_array_equal(mine.numpy(), reference.numpy(), err_msg=name)


def test_checkpoint_refusals(tmp_path):
    spawnml.save_safetensors({"w": spawnml.ones(2)}, tmp_path / "plain.safetensors")
    with pytest.raises(spawnml.InvalidArgumentError, match="not a spawnml checkpoint"):
        spawnml.load_checkpoint(tmp_path / "plain.safetensors")
    with pytest.raises(spawnml.InvalidArgumentError, match="not function"):
        spawnml.save_checkpoint({"fn": lambda: 0}, tmp_path / "bad.safetensors")
