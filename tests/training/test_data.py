"""spawnml.utils.data against torch.utils.data: the same batches in the same order, the same
collated structure and element types; shuffling checked for being a fresh permutation each
epoch that a seed reproduces (the generators differ from torch's, so not the same order)."""

from __future__ import annotations

import numpy as np
import pytest
import spawnml
from spawnml.utils.data import DataLoader, Dataset, TensorDataset, default_collate

from .devices import DEVICES, device_or_skip
from .torch_parity import torch

tdata = torch.utils.data
rng = np.random.default_rng(3)
X = rng.standard_normal((23, 4)).astype(np.float32)
Y = rng.integers(0, 5, 23)


def _batches(loader):
    return [[t.numpy() for t in batch] for batch in loader]


@pytest.mark.parametrize("batch_size", [1, 5, 23, 30])
@pytest.mark.parametrize("drop_last", [False, True])
def test_batches_match_torch(batch_size, drop_last):
    ours = DataLoader(
        TensorDataset(spawnml.tensor(X), spawnml.tensor(Y)), batch_size=batch_size, drop_last=drop_last
    )
    theirs = tdata.DataLoader(
        tdata.TensorDataset(torch.tensor(X), torch.tensor(Y)), batch_size=batch_size, drop_last=drop_last
    )
    assert len(ours) == len(theirs)
    got, want = _batches(ours), _batches(theirs)
    assert len(got) == len(want)
    for mine, reference in zip(got, want, strict=True):
        for a, b in zip(mine, reference, strict=True):
            assert a.dtype == b.dtype
            np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("device", DEVICES)
def test_batches_stay_on_their_device(device):
    """A loader over device tensors gathers and stacks there: each batch is on the dataset's
    device and equals torch's, by the gathering path and by collating samples."""
    device = device_or_skip(device)
    dataset = TensorDataset(spawnml.tensor(X, device=device), spawnml.tensor(Y, device=device))
    order = np.random.default_rng(1)
    theirs = tdata.TensorDataset(torch.tensor(X), torch.tensor(Y))
    for collate in (default_collate, _by_samples):
        ours = DataLoader(dataset, batch_size=5, shuffle=True, generator=order, collate_fn=collate)
        for batch in ours:
            assert {t.device for t in batch} == {device}
            reference = tdata.default_collate([theirs[i] for i in _rows_of(batch[0].numpy())])
            for a, b in zip(batch, reference, strict=True):
                assert a.dtype == b.numpy().dtype
                np.testing.assert_array_equal(a.numpy(), b.numpy())


def _by_samples(samples: list) -> list:
    """The default collation, but not the loader's own function: it takes the samples one by one."""
    return default_collate(samples)


def _rows_of(values: np.ndarray) -> list[int]:
    """Which rows of ``X`` a batch of its rows holds."""
    return [int(np.flatnonzero((row == X).all(axis=1))[0]) for row in values]


def test_shuffle_is_a_new_permutation_each_epoch_and_seeded():
    dataset = TensorDataset(spawnml.arange(23))
    loader = DataLoader(dataset, batch_size=4, shuffle=True, generator=np.random.default_rng(0))
    first = np.concatenate([b[0].numpy() for b in loader])
    second = np.concatenate([b[0].numpy() for b in loader])
    assert sorted(first) == sorted(second) == list(range(23))
    assert not np.array_equal(first, second)
    again = DataLoader(dataset, batch_size=4, shuffle=True, generator=np.random.default_rng(0))
    np.testing.assert_array_equal(np.concatenate([b[0].numpy() for b in again]), first)
    spawnml.manual_seed(5)
    global_first = np.concatenate([b[0].numpy() for b in DataLoader(dataset, batch_size=4, shuffle=True)])
    spawnml.manual_seed(5)
    global_again = np.concatenate([b[0].numpy() for b in DataLoader(dataset, batch_size=4, shuffle=True)])
    np.testing.assert_array_equal(global_first, global_again)


class Pairs(Dataset):
    def __len__(self):
        return 6

    def __getitem__(self, i):
        return {"x": np.full(3, i, np.float32), "meta": (i, float(i) / 2, f"s{i}")}


class TorchPairs(tdata.Dataset):
    __len__ = Pairs.__len__
    __getitem__ = Pairs.__getitem__


def test_collate_structure_and_types_match_torch():
    (ours,) = list(DataLoader(Pairs(), batch_size=6))
    (theirs,) = list(tdata.DataLoader(TorchPairs(), batch_size=6))
    np.testing.assert_array_equal(ours["x"].numpy(), theirs["x"].numpy())
    for mine, reference in zip(ours["meta"][:2], theirs["meta"][:2], strict=True):
        assert mine.dtype == reference.numpy().dtype
        np.testing.assert_array_equal(mine.numpy(), reference.numpy())
    assert ours["meta"][2] == theirs["meta"][2]
    assert isinstance(ours["meta"], type(theirs["meta"]))


def test_bad_arguments_are_refused():
    with pytest.raises(spawnml.InvalidArgumentError, match="Size mismatch between tensors"):
        TensorDataset(spawnml.zeros(3), spawnml.zeros(4))
    with pytest.raises(spawnml.InvalidArgumentError, match="batch_size should be a positive integer"):
        DataLoader(Pairs(), batch_size=0)
    with pytest.raises(spawnml.InvalidArgumentError, match="found <class 'object'>"):
        default_collate([object()])
