"""Dropout: zero elements (or whole channels) at random while training, scaling the rest by
``1 / (1 - p)``; the masks come from spawnml's generator (``spawnml.manual_seed``)."""

from __future__ import annotations

import numpy as np

from ...errors import InvalidArgumentError
from ...tensor import Tensor
from ..dispatch import drawn
from .creation import generator


def _check(p: float) -> None:
    if not 0.0 <= p <= 1.0:
        raise InvalidArgumentError(f"dropout probability has to be between 0 and 1, but got {p}")


def _dropped(input: Tensor, p: float, mask_shape: tuple[int, ...], inplace: bool) -> Tensor:
    def draw() -> np.ndarray:
        keep = generator().random(mask_shape) >= p
        return np.where(keep, 1 / (1 - p), 0.0) if p < 1 else np.zeros(mask_shape)

    mask = drawn(draw, input)
    return input.mul_(mask) if inplace else input * mask


def dropout(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Each element zeroed with probability ``p`` while ``training``, the others scaled up."""
    _check(p)
    if not training or p == 0:
        return input
    return _dropped(input, p, tuple(input.shape), inplace)


def _feature_dropout(input: Tensor, p: float, training: bool, inplace: bool, rank: int) -> Tensor:
    _check(p)
    if input.ndim not in (rank + 1, rank + 2):
        raise InvalidArgumentError(
            f"dropout{rank}d: Expected {rank + 1}D or {rank + 2}D input, but received a {input.ndim}D input."
        )
    if not training or p == 0:
        return input
    channels = input.shape[: input.ndim - rank]
    return _dropped(input, p, (*channels, *[1] * rank), inplace)


def dropout1d(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Whole channels of ``(N, C, L)`` (or ``(C, L)``) zeroed with probability ``p``."""
    return _feature_dropout(input, p, training, inplace, 1)


def dropout2d(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Whole channels of ``(N, C, H, W)`` (or ``(C, H, W)``) zeroed with probability ``p``."""
    return _feature_dropout(input, p, training, inplace, 2)


def dropout3d(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Whole channels of ``(N, C, D, H, W)`` (or ``(C, D, H, W)``) zeroed with probability ``p``."""
    return _feature_dropout(input, p, training, inplace, 3)
