"""``Embedding``: a lookup table of vectors."""

from __future__ import annotations

from typing import Any

from ...autograd.functions.creation import empty
from ...errors import InvalidArgumentError
from ...tensor import Tensor
from .. import functional as F
from .. import init
from .module import Module, Parameter


class Embedding(Module):
    """Rows of ``weight`` (``N(0, 1)`` initially) picked by integer indices; the ``padding_idx``
    row starts at zero and gets no gradient."""

    def __init__(
        self,
        num_embeddings: int,
        embedding_dim: int,
        padding_idx: int | None = None,
        device: str = "cpu",
        dtype: Any = None,
    ) -> None:
        super().__init__()
        if padding_idx is not None:
            if not -num_embeddings <= padding_idx < num_embeddings:
                raise InvalidArgumentError("Padding_idx must be within num_embeddings")
            padding_idx %= num_embeddings
        self.num_embeddings, self.embedding_dim, self.padding_idx = num_embeddings, embedding_dim, padding_idx
        self.weight = Parameter(empty(num_embeddings, embedding_dim, device=device, dtype=dtype))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        init.normal_(self.weight)
        if self.padding_idx is not None:
            values = self.weight.detach().numpy().copy()
            values[self.padding_idx] = 0
            init.fill_with(self.weight, values)

    def forward(self, input: Tensor) -> Tensor:
        return F.embedding(input, self.weight, self.padding_idx)

    def extra_repr(self) -> str:
        extra = "" if self.padding_idx is None else f", padding_idx={self.padding_idx}"
        return f"{self.num_embeddings}, {self.embedding_dim}{extra}"
