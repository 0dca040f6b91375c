"""``Dropout``: zeroes elements with probability ``p`` while training, scaling the rest."""

from __future__ import annotations

from ...errors import InvalidArgumentError
from ...tensor import Tensor
from .. import functional as F
from .module import Module


class Dropout(Module):
    def __init__(self, p: float = 0.5) -> None:
        super().__init__()
        if not 0 <= p <= 1:
            raise InvalidArgumentError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p = p

    def forward(self, input: Tensor) -> Tensor:
        return F.dropout(input, self.p, self.training)

    def extra_repr(self) -> str:
        return f"p={self.p}, inplace=False"
