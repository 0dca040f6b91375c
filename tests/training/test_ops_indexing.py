"""Indexing, gathering, scattering and joining against PyTorch: values and gradients, repeated
indices (gradients add up), in-place writes recorded for backward, and empty selections."""

from __future__ import annotations

import numpy as np
import pytest
import spawnml
import spawnml.nn.functional as F

from .torch_parity import assert_close, both, check, torch

rng = np.random.default_rng(4)
TF = torch.nn.functional


def f32(*shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


def longs(values) -> np.ndarray:
    return np.asarray(values, np.int64)


KEYS = {
    "int": lambda m: 1,
    "negative_int": lambda m: -1,
    "slice_step": lambda m: (slice(None), slice(1, None, 2)),
    "none_ellipsis": lambda m: (None, Ellipsis, 0),
    "ints_and_slices": lambda m: (1, slice(None, 2), -2),
    "list": lambda m: [0, 2, 0],
    "tensor": lambda m: m.tensor([[1, 0], [2, 2]]),
    "two_tensors": lambda m: (m.tensor([0, 2]), slice(None), m.tensor([1, 3])),
    "separated_tensors": lambda m: (m.tensor([0, 2, 1]), 1, m.tensor([3, 0, 0])),
    "bool_mask": lambda m: m.tensor([True, False, True]),
    "full_mask": lambda m: m.tensor(MASK),
    "empty": lambda m: slice(2, 2),
    "zero_dim_tensor": lambda m: m.tensor(1),
}
MASK = rng.random((3, 4, 5)) > 0.5


@pytest.mark.parametrize("name", sorted(KEYS))
def test_getitem(name):
    check(lambda m, x: x[KEYS[name](m)], [f32(3, 4, 5)])


@pytest.mark.parametrize("name", sorted(KEYS))
def test_setitem_records_the_write(name):
    def write(m, x, v):
        y = x * 1
        y[KEYS[name](m)] = v.sum() * 2
        return y * x

    check(write, [f32(3, 4, 5), f32(2)])


def test_setitem_with_a_broadcast_tensor_and_numbers():
    def write(m, x, v):
        y = x * 1
        y[:, 1] = v
        y[0, 0, 0] = 7.0
        y[y > 1] = 0.5
        return y

    check(write, [f32(3, 4, 5), f32(5)])


def test_index_errors():
    x = spawnml.zeros(3, 4)
    with pytest.raises(spawnml.InvalidArgumentError, match="out of bounds"):
        x[3]
    with pytest.raises(spawnml.InvalidArgumentError, match="step must be greater than zero"):
        x[::-1]
    with pytest.raises(spawnml.InvalidArgumentError, match="must be long, int, byte or bool"):
        x[spawnml.tensor([0.0])]


def test_len_and_iteration():
    x = spawnml.tensor(f32(3, 2))
    assert len(x) == 3
    rows = list(x)
    assert len(rows) == 3
    np.testing.assert_array_equal(rows[1].numpy(), x.numpy()[1])


def test_gather_scatter_and_scatter_add_with_repeated_indices():
    index = longs([[0, 1, 1], [2, 0, 0]])
    check(lambda m, x: m.gather(x, 0, m.tensor(index)), [f32(3, 4)])
    check(lambda m, x: x.gather(1, m.tensor(index)), [f32(2, 5)])
    check(lambda m, x, s: m.scatter_add(x, 1, m.tensor(index), s), [f32(2, 4), f32(2, 3)])
    check(lambda m, x, s: x.scatter_add(0, m.tensor(index), s), [f32(3, 3), f32(2, 3)])
    unique = longs([[0, 3, 1], [2, 0, 1]])
    check(lambda m, x, s: m.scatter(x, 1, m.tensor(unique), s), [f32(2, 4), f32(2, 3)])
    check(lambda m, x: x.scatter(1, m.tensor(unique), 2.5), [f32(2, 4)])


def test_index_select_index_add_and_masked_fill():
    index = longs([2, 0, 2])
    check(lambda m, x: m.index_select(x, 1, m.tensor(index)), [f32(3, 4, 2)])
    check(lambda m, x: x.index_select(0, m.tensor(1)), [f32(3, 2)])
    check(lambda m, x, s: x.index_add(1, m.tensor(index), s, alpha=2), [f32(2, 4), f32(2, 3)])
    mask = rng.random((3, 1)) > 0.5
    check(lambda m, x: x.masked_fill(m.tensor(mask), -np.inf), [f32(3, 4)])
    check(lambda m, x: m.masked_fill(x, m.tensor(mask), m.tensor(1.5)), [f32(3, 4)])


def test_index_ops_refuse_out_of_range_indices():
    x = spawnml.zeros(3, 4)
    with pytest.raises(spawnml.InvalidArgumentError, match="index 4 is out of bounds for dimension 1"):
        x.gather(1, spawnml.tensor([[4]]))
    with pytest.raises(spawnml.InvalidArgumentError, match="index -1 is out of bounds"):
        x.index_select(0, spawnml.tensor([-1]))


@pytest.mark.parametrize("padding_idx", [None, 1, -1])
def test_embedding(padding_idx):
    indices = longs([[0, 1, 4], [1, 1, 2]])
    check(lambda m, w: (F if m is spawnml else TF).embedding(m.tensor(indices), w, padding_idx), [f32(5, 3)])


def test_cat_stack_split_chunk_unbind():
    check(lambda m, a, b: m.cat([a, b, a], 1), [f32(2, 3), f32(2, 1)])
    check(lambda m, a, b: m.cat((a, b)), [f32(2, 3), np.zeros((0,), np.float32)])  # 1-D empty skipped
    check(lambda m, a, b: m.stack([a, b], -1), [f32(2, 3), f32(2, 3)])
    check(lambda m, x: m.cat(m.split(x, 2, 1)[::-1], 1), [f32(3, 5)])
    check(lambda m, x: m.cat(x.split([1, 3, 1], 1)[1:], 1) * 2, [f32(3, 5)])
    check(lambda m, x: m.stack(m.chunk(x, 3, 0)[:2]), [f32(5, 2)])
    check(lambda m, x: x.unbind(1)[2] * x.unbind(1)[0], [f32(3, 4)])
    check(lambda m, x: x.narrow(1, -3, 2), [f32(3, 4)])
    check(
        lambda m, x: (
            F.pad(x, (1, 2, 0, 1), value=-1.0) if m is spawnml else TF.pad(x, (1, 2, 0, 1), value=-1.0)
        ),
        [f32(2, 3)],
    )
    ours, theirs = both([np.zeros((0, 3), np.float32)])
    assert len(spawnml.split(ours[0], 2)) == len(torch.split(theirs[0], 2))
    assert len(spawnml.chunk(ours[0], 3)) == len(torch.chunk(theirs[0], 3))


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_cumsum(dim):
    check(lambda m, x: m.cumsum(x, dim), [f32(3, 4, 2)])
    check(lambda m, x: x.cumsum(dim) * x, [np.array([[1.0, np.inf, 2.0], [np.nan, 1.0, 0.0]], np.float32)])
    assert_close(spawnml.cumsum(spawnml.tensor([True, True]), 0), torch.cumsum(torch.tensor([True, True]), 0))


@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
@pytest.mark.parametrize("amounts", [(2, 1), (1, 0, 2, 2), (0, 3, 1, 1, 1, 0)])
def test_pad_modes_repeating_the_input(mode, amounts):
    shape = {2: (2, 3), 4: (2, 3, 4), 6: (1, 2, 4, 4, 5)}[len(amounts)]  # ranks torch pads so
    if mode == "reflect":
        amounts = tuple(min(a, 2) for a in amounts)  # below the padded size
    check(lambda m, x: (F if m is spawnml else TF).pad(x, amounts, mode=mode), [f32(*shape)])


BASIC_KEYS = [
    (Ellipsis, 2),
    (slice(None), None, slice(1, 3)),
    (0, Ellipsis, None),
    (slice(-2, None), -1, slice(10)),
    (slice(3, 1),),
    (),
]


@pytest.mark.parametrize("key", BASIC_KEYS, ids=str)
def test_basic_indexing_by_slices_matches_torch(key):
    check(lambda m, x: x[key], [f32(3, 4, 5)])
    check(lambda m, x: x[key] * 1, [np.float32(2.0)] if key == () else [f32(2, 3, 4)])


def test_reshapes_of_empty_tensors_keep_their_zero_sizes():
    check(lambda m, x: x.reshape(3, 0, 2), [np.zeros((0, 6), np.float32)])
    check(lambda m, x: x.reshape(0, 4).sum(0), [np.zeros((4, 0), np.float32)])
