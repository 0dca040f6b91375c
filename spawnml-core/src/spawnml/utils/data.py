"""Datasets and batching, as ``torch.utils.data``: ``Dataset``, ``TensorDataset``, ``DataLoader``.

Batches stay on their tensors' device: samples are indexed and stacked there, and a loader over
a ``TensorDataset`` with the default collation gathers each batch with one ``index_select`` per
tensor (what stacking its samples gives) instead of one operation per sample.

Shuffling draws each epoch's order from a numpy ``Generator``: the loader's own when given one,
else the global one ``spawnml.manual_seed`` seeds (so a checkpoint of the RNG state resumes it).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from ..autograd.functions.creation import generator as global_generator
from ..autograd.functions.indexing import index_select
from ..autograd.functions.shape import stack
from ..errors import InvalidArgumentError
from ..tensor import Tensor, backend_named


class Dataset:
    """A map-style dataset: ``dataset[i]`` is sample ``i`` of ``len(dataset)``."""

    def __getitem__(self, index: int) -> Any:
        raise NotImplementedError

    def __len__(self) -> int:
        raise NotImplementedError


class TensorDataset(Dataset):
    """Samples are the ``i``-th rows of tensors of the same first dimension."""

    def __init__(self, *tensors: Tensor) -> None:
        if not tensors or any(t.shape[:1] != tensors[0].shape[:1] for t in tensors):
            raise InvalidArgumentError("Size mismatch between tensors")
        self.tensors = tensors

    def __getitem__(self, index: int) -> tuple[Tensor, ...]:
        return tuple(t[index] for t in self.tensors)

    def __len__(self) -> int:
        return self.tensors[0].shape[0]

    def rows(self, indices: np.ndarray) -> list[Tensor]:
        """The rows ``indices`` of every tensor, each gathered on its device: the batch that
        :func:`default_collate` makes of those samples."""
        return [index_select(t, 0, _on(t.device, indices.astype(np.int64))) for t in self.tensors]


def _on(device: str, array: np.ndarray) -> Tensor:
    backend = backend_named(device)
    return Tensor(backend.from_numpy(np.array(array, order="C")), backend)


def default_collate(batch: Sequence[Any]) -> Any:
    """Samples stacked into a batch: tensors on their device, arrays along a new first dimension
    (on the cpu), Python floats as float64 and ints as int64, strings as they are; tuples and lists
    field by field into a list, dicts key by key (as torch's ``default_collate``)."""
    first = batch[0]
    if isinstance(first, Tensor):
        return stack(list(batch))
    if isinstance(first, np.ndarray | np.generic):
        return _on("cpu", np.stack(batch))
    if isinstance(first, bool):
        return _on("cpu", np.array(batch, bool))
    if isinstance(first, int):
        return _on("cpu", np.array(batch, np.int64))
    if isinstance(first, float):
        return _on("cpu", np.array(batch, np.float64))
    if isinstance(first, str):
        return batch
    if isinstance(first, Mapping):
        return {key: default_collate([sample[key] for sample in batch]) for key in first}
    if isinstance(first, tuple | list):
        if any(len(sample) != len(first) for sample in batch):
            raise InvalidArgumentError("each element in list of batch should be of equal size")
        return [default_collate(column) for column in zip(*batch, strict=True)]
    raise InvalidArgumentError(
        "default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; "
        f"found {type(first)}"
    )


class DataLoader:
    """Batches of ``batch_size`` samples of ``dataset``, in order or shuffled anew each epoch."""

    def __init__(
        self,
        dataset: Dataset,
        batch_size: int = 1,
        shuffle: bool = False,
        *,
        drop_last: bool = False,
        collate_fn: Callable[[list[Any]], Any] | None = None,
        generator: np.random.Generator | None = None,
    ) -> None:
        if not isinstance(batch_size, int) or batch_size <= 0:
            raise InvalidArgumentError(
                f"batch_size should be a positive integer value, but got batch_size={batch_size}"
            )
        self.dataset, self.batch_size, self.shuffle, self.drop_last = dataset, batch_size, shuffle, drop_last
        self.collate_fn = collate_fn or default_collate
        self.generator = generator

    def __len__(self) -> int:
        count = len(self.dataset) / self.batch_size
        return math.floor(count) if self.drop_last else math.ceil(count)

    def _order(self) -> np.ndarray:
        size = len(self.dataset)
        if not self.shuffle:
            return np.arange(size)
        return (self.generator or global_generator()).permutation(size)

    def __iter__(self) -> Iterator[Any]:
        order = self._order()
        for start in range(0, len(self) * self.batch_size, self.batch_size):
            indices = order[start : start + self.batch_size]
            if self.collate_fn is default_collate and isinstance(self.dataset, TensorDataset):
                yield self.dataset.rows(indices)
            else:
                yield self.collate_fn([self.dataset[int(i)] for i in indices])
