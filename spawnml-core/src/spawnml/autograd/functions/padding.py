"""``pad`` in torch's modes: constant padding, and the modes that repeat the input's own elements."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np

from ...errors import InvalidArgumentError
from ...tensor import Tensor
from .indexing import take
from .shape import ConstantPad

#: torch's padding modes other than "constant", as numpy names them.
_NUMPY_PAD_MODES: dict[str, Literal["reflect", "edge", "wrap"]] = {
    "reflect": "reflect",
    "replicate": "edge",
    "circular": "wrap",
}


def pad(input: Tensor, pad: Sequence[int], mode: str = "constant", value: float | None = None) -> Tensor:
    """``input`` padded; ``pad`` lists (begin, end) pairs starting from the last dimension, as
    torch's. "constant" fills with ``value`` (0 by default; negative amounts crop); "reflect",
    "replicate" and "circular" repeat the input's own elements, and their gradients add back."""
    if len(pad) % 2 or len(pad) // 2 > input.ndim:
        raise InvalidArgumentError("Padding length must be divisible by 2 and at most twice the input's rank")
    begins, ends = [0] * input.ndim, [0] * input.ndim
    for i in range(len(pad) // 2):
        begins[-1 - i], ends[-1 - i] = pad[2 * i], pad[2 * i + 1]
    if mode == "constant":
        return ConstantPad.apply(input, begins + ends, 0.0 if value is None else value)
    if mode not in _NUMPY_PAD_MODES:
        raise InvalidArgumentError(
            f"Unrecognised padding mode {mode}; expected constant, reflect, replicate or circular"
        )
    for d, (before, after) in enumerate(zip(begins, ends, strict=True)):
        size = input.shape[d]
        limit = size - 1 if mode == "reflect" else size if mode == "circular" else None
        if (
            min(before, after) < 0
            or (limit is not None and max(before, after) > limit)
            or (size == 0 and before + after)
        ):
            raise InvalidArgumentError(
                f"{mode} padding of ({before}, {after}) does not fit dimension {d} of size {size}"
            )
    positions = np.arange(input.numel(), dtype=np.int64).reshape(input.shape)
    return take(input, np.pad(positions, list(zip(begins, ends, strict=True)), _NUMPY_PAD_MODES[mode]))
