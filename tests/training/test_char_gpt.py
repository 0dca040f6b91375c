"""A small character-level GPT, written once over torch's module names, trained in SpawnML (as a
captured step) and in torch from the same initial weights, batches and dropout masks.

The model: token and position embeddings, pre-norm blocks of causal scaled-dot-product
attention and a GELU MLP, dropout, a final LayerNorm and an output layer tied to the token
embedding; AdamW with weight decay on the matrices only, gradient clipping, and a warm-up then
cosine schedule. Its 50 losses must equal torch's within LOSS_RTOL, and greedy samples after
training must be torch's.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import spawnml
from spawnml.autograd import capture_step

from .devices import DEVICES, device_or_skip
from .torch_parity import torch

#: float32 sums in other orders (attention, LayerNorm, clipping's norm) compounded over 50 steps.
LOSS_RTOL = 1e-5
TEXT = (
    "It was the best of times, it was the worst of times, it was the age of wisdom, it was the "
    "age of foolishness, it was the epoch of belief, it was the epoch of incredulity, it was the "
    "season of Light, it was the season of Darkness, it was the spring of hope, it was the winter "
    "of despair."
)
VOCAB = sorted(set(TEXT))
BLOCK, BATCH, WIDTH, HEADS, LAYERS, DROPOUT = 16, 8, 32, 4, 2, 0.1
STEPS, WARMUP, LR = 50, 10, 3e-3


class NumpyDropout(torch.nn.Module):
    """torch's side of the dropout: masks drawn as spawnml draws them, from the same generator."""

    def __init__(self, p: float, rng: np.random.Generator) -> None:
        super().__init__()
        self.p, self.rng = p, rng

    def forward(self, x):
        if not self.training:
            return x
        keep = self.rng.random(tuple(x.shape)) >= self.p
        return x * torch.tensor(np.where(keep, 1 / (1 - self.p), 0.0), dtype=x.dtype)


def gpt(lib, dropout):
    """The model class over ``lib`` (spawnml or torch); ``dropout(p)`` makes a dropout module."""
    nn, F = lib.nn, lib.nn.functional

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(WIDTH), nn.LayerNorm(WIDTH)
            self.qkv, self.proj = nn.Linear(WIDTH, 3 * WIDTH), nn.Linear(WIDTH, WIDTH)
            self.up, self.act, self.down = nn.Linear(WIDTH, 4 * WIDTH), nn.GELU(), nn.Linear(4 * WIDTH, WIDTH)
            self.drop = dropout(DROPOUT)

        def forward(self, x):
            batch, length, width = x.shape
            q, k, v = (
                part.reshape(batch, length, HEADS, width // HEADS).transpose(1, 2)
                for part in self.qkv(self.ln1(x)).split(width, dim=2)
            )
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.drop(self.proj(y.transpose(1, 2).reshape(batch, length, width)))
            return x + self.drop(self.down(self.act(self.up(self.ln2(x)))))

    class GPT(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.tokens, self.positions = nn.Embedding(len(VOCAB), WIDTH), nn.Embedding(BLOCK, WIDTH)
            self.drop = dropout(DROPOUT)
            self.blocks = nn.ModuleList([Block() for _ in range(LAYERS)])
            self.norm = nn.LayerNorm(WIDTH)
            self.head = nn.Linear(WIDTH, len(VOCAB), bias=False)
            self.head.weight = self.tokens.weight

        def forward(self, idx):
            places = lib.arange(idx.shape[1], device=idx.device)
            x = self.drop(self.tokens(idx) + self.positions(places))
            for block in self.blocks:
                x = block(x)
            return self.head(self.norm(x))

    return GPT()


def warmup_cosine(step: int) -> float:
    if step < WARMUP:
        return (step + 1) / WARMUP
    return 0.5 * (1 + math.cos(math.pi * (step - WARMUP) / (STEPS - WARMUP)))


def trainer(lib, model):
    """The training step over ``lib``: AdamW (decay on matrices), clipping, warm-up then cosine."""
    params = list(model.parameters())
    groups = [
        {"params": [p for p in params if p.ndim >= 2], "weight_decay": 0.1},
        {"params": [p for p in params if p.ndim < 2], "weight_decay": 0.0},
    ]
    optimizer = lib.optim.AdamW(groups, lr=LR, betas=(0.9, 0.95))
    scheduler = lib.optim.lr_scheduler.LambdaLR(optimizer, warmup_cosine)

    def step(x, y):
        optimizer.zero_grad()
        logits = model(x)
        loss = lib.nn.functional.cross_entropy(logits.reshape(-1, len(VOCAB)), y.reshape(-1))
        loss.backward()
        lib.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        return loss

    return step


def batches() -> list[tuple[np.ndarray, np.ndarray]]:
    data = np.array([VOCAB.index(c) for c in TEXT])
    rng = np.random.default_rng(0)
    out = []
    for _ in range(STEPS):
        starts = rng.integers(0, len(data) - BLOCK - 1, BATCH)
        out.append(
            (
                np.stack([data[s : s + BLOCK] for s in starts]),
                np.stack([data[s + 1 : s + BLOCK + 1] for s in starts]),
            )
        )
    return out


def generate(lib, model, prompt: np.ndarray, count: int, device: str = "cpu") -> list[int]:
    """Greedy samples: ``count`` tokens after ``prompt``, the context cropped to BLOCK."""
    tokens = list(prompt)
    with lib.no_grad():
        for _ in range(count):
            idx = lib.tensor(np.array([tokens[-BLOCK:]]), device=device)
            tokens.append(int(model(idx)[0, -1].argmax().item()))
    return tokens[len(prompt) :]


@pytest.fixture
def torch_on_one_thread():
    """torch's OpenMP threads spin between its many small operations here: on a busy machine
    that slows them by orders of magnitude, and the results do not depend on it."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.mark.usefixtures("torch_on_one_thread")
@pytest.mark.parametrize("device", DEVICES)
def test_char_gpt_trains_like_torch(device):
    device = device_or_skip(device)
    torch.manual_seed(0)
    reference = gpt(torch, lambda p: NumpyDropout(p, np.random.default_rng(7)))
    shared = np.random.default_rng(7)
    for module in reference.modules():  # one generator for every dropout, as spawnml has
        if isinstance(module, NumpyDropout):
            module.rng = shared
    model = gpt(spawnml, spawnml.nn.Dropout)
    model.load_state_dict({k: v.detach().numpy() for k, v in reference.state_dict().items()})
    model.to(device)
    spawnml.manual_seed(7)
    assert model.head.weight is model.tokens.weight
    ours, theirs = capture_step(trainer(spawnml, model)), trainer(torch, reference)
    got, want = [], []
    for x, y in batches():
        got.append(ours(spawnml.tensor(x, device=device), spawnml.tensor(y, device=device)).item())
        want.append(theirs(torch.tensor(x), torch.tensor(y)).item())
    np.testing.assert_allclose(got, want, rtol=LOSS_RTOL)
    assert want[-1] < 0.7 * want[0]
    model.eval()
    reference.eval()
    prompt = np.array([VOCAB.index(c) for c in "it was the "])
    assert generate(spawnml, model, prompt, 24, device) == generate(torch, reference, prompt, 24)
