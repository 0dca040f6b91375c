"""The training operations on the GPU backends against PyTorch on the CPU: values and
gradients computed entirely on the device, through the shared GPU kernel table.

Tolerances: 1e-4 relative and 1e-5 absolute, as WGSL and OpenCL allow a few ulp in exp,
division and rsqrt and sums run in another order.
"""

from __future__ import annotations

import numpy as np
import pytest
import spawnml
import spawnml.nn.functional as F

from .devices import DEVICES, device_or_skip
from .torch_parity import check, torch

rng = np.random.default_rng(8)
TF = torch.nn.functional
GPU = {"rtol": 1e-4, "atol": 1e-5}


@pytest.fixture(params=[name for name in DEVICES if name != "cpu"], scope="module")
def device(request) -> str:
    return device_or_skip(request.param)


def f32(*shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


def lib(m):
    return F if m is spawnml else TF


CASES = {
    "softmax": (lambda m, x: lib(m).softmax(x, 1), [(4, 5)]),
    "log_softmax": (lambda m, x: lib(m).log_softmax(x, -1), [(4, 5)]),
    "mse_l1": (
        lambda m, x, y: lib(m).mse_loss(x, y) + lib(m).l1_loss(x, y, reduction="sum"),
        [(3, 4), (3, 4)],
    ),
    "max_dim": (lambda m, x: m.max(x, 1).values, [(4, 6)]),
    "amax": (lambda m, x: m.amax(x, 0), [(4, 6)]),
    "maximum": (lambda m, x, y: m.maximum(x, y), [(3, 4), (4,)]),
    "clamp": (lambda m, x: m.clamp(x, -0.5, 0.7), [(3, 4)]),
    "conv2d": (
        lambda m, x, w, b: lib(m).conv2d(x, w, b, stride=2, padding=1),
        [(2, 3, 7, 6), (4, 3, 3, 3), (4,)],
    ),
    "conv_transpose2d": (
        lambda m, x, w: lib(m).conv_transpose2d(x, w, stride=2, output_padding=1),
        [(1, 2, 4, 3), (2, 3, 3, 3)],
    ),
    "max_pool2d": (lambda m, x: lib(m).max_pool2d(x, 3, 2, 1), [(2, 3, 7, 7)]),
    "avg_pool2d": (lambda m, x: lib(m).avg_pool2d(x, 3, 2, 1), [(2, 3, 7, 7)]),
    "adaptive_avg_pool2d": (lambda m, x: lib(m).adaptive_avg_pool2d(x, 1), [(2, 3, 5, 4)]),
    "linear": (lambda m, x, w, b: lib(m).linear(x, w, b), [(5, 4), (3, 4), (3,)]),
    "layer_norm": (lambda m, x, w, b: lib(m).layer_norm(x, (6,), w, b), [(4, 6), (6,), (6,)]),
    "batch_norm": (lambda m, x: lib(m).batch_norm(x, None, None, training=True), [(6, 3, 2)]),
    "group_norm": (lambda m, x: lib(m).group_norm(x, 2), [(2, 4, 3)]),
    "activations": (
        lambda m, x: (
            lib(m).gelu(x)
            + lib(m).silu(x)
            + lib(m).leaky_relu(x)
            + lib(m).elu(x)
            + lib(m).softplus(x)
            + lib(m).hardswish(x)
        ),
        [(4, 5)],
    ),
    "slicing": (lambda m, x: x[1:, None, ..., 2] * x[0, :, 1:4].sum(), [(3, 4, 5)]),
    "gather_scatter_add": (
        lambda m, x, s: (
            x.gather(1, m.tensor([[0, 2], [1, 1]], device=x.device)).sum()
            + x.scatter_add(1, m.tensor([[2, 2], [0, 1]], device=x.device), s)
        ),
        [(2, 3), (2, 2)],
    ),
    "advanced_indexing": (lambda m, x: x[m.tensor([2, 0, 2], device=x.device), ::2], [(3, 4)]),
    "cat_split": (lambda m, x, y: m.cat(m.split(m.cat([x, y], 1), 2, 1)[::-1], 1), [(3, 2), (3, 3)]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_operation_on_the_gpu(device, name):
    fn, shapes = CASES[name]
    check(fn, [f32(*shape) for shape in shapes], device=device, **GPU)


def test_embedding_and_item_assignment_on_the_gpu(device):
    indices = np.array([[0, 3, 3], [1, 0, 2]], np.int64)

    def fn(m, w, v):
        on = device if m is spawnml else "cpu"
        rows = lib(m).embedding(m.tensor(indices, device=on), w, padding_idx=2)
        rows[:, 1] = v
        return rows

    check(fn, [f32(4, 5), f32(5)], device=device, **GPU)


def test_cross_entropy_on_the_gpu(device):
    target = np.array([0, 3, 1, 3], np.int64)
    check(
        lambda m, x: lib(m).cross_entropy(
            x, m.tensor(target, device=device if m is spawnml else "cpu"), label_smoothing=0.1
        ),
        [f32(4, 5)],
        device=device,
        **GPU,
    )


def test_batch_norm_running_statistics_on_the_gpu(device):
    mean, var = f32(3), np.abs(f32(3)) + 0.5
    stats = {}

    def fn(m, x):
        on = device if m is spawnml else "cpu"
        running = m.tensor(mean, device=on), m.tensor(var, device=on)
        stats[m.__name__] = running
        return lib(m).batch_norm(x, *running, training=True, momentum=0.2)

    check(fn, [f32(5, 3, 4)], device=device, **GPU)
    for ours, theirs in zip(stats["spawnml"], stats["torch"], strict=True):
        np.testing.assert_allclose(ours.numpy(), theirs.numpy(), **GPU)
