"""``linear``: the affine map of torch's ``nn.Linear``."""

from __future__ import annotations

from ...errors import InvalidArgumentError
from ...tensor import Tensor
from .linalg import matmul
from .movement import transpose


def linear(input: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """``input @ weight.T + bias``; ``weight`` is ``(out_features, in_features)`` or ``(in_features,)``."""
    if weight.ndim not in (1, 2):
        raise InvalidArgumentError(f"linear(): weight must be 1-D or 2-D, got {weight.ndim}-D")
    out = matmul(input, transpose(weight, 0, 1) if weight.ndim == 2 else weight)
    return out if bias is None else out + bias
