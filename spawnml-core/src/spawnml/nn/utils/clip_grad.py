"""Gradient clipping by the total norm, as ``torch.nn.utils.clip_grad_norm_``."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from ...autograd.dispatch import check
from ...autograd.functions.creation import zeros
from ...autograd.functions.extrema import clamp
from ...autograd.functions.shape import stack
from ...autograd.functions.statistics import norm
from ...autograd.mode import no_grad
from ...errors import InvalidArgumentError
from ...tensor import Tensor


@no_grad()
def clip_grad_norm_(
    parameters: Tensor | Iterable[Tensor],
    max_norm: float,
    norm_type: float = 2.0,
    error_if_nonfinite: bool = False,
    foreach: bool | None = None,
) -> Tensor:
    """Scale the gradients of ``parameters`` in place so that their ``norm_type`` norm, taken over
    all of them together, is at most ``max_norm``; return that total norm (before clipping).

    As torch does, the scale ``max_norm / (total + 1e-6)`` is capped at 1 and applied on the
    device, so the step reads nothing back (and can be captured).
    """
    params = [parameters] if isinstance(parameters, Tensor) else list(parameters)
    grads = [p.grad for p in params if p.grad is not None]
    if not grads:
        return zeros(())
    total = norm(stack([norm(g, norm_type) for g in grads]), norm_type)
    if error_if_nonfinite:
        check(_check_finite, total, norm_type)
    scale = clamp(max_norm / (total + 1e-6), max=1.0)
    for grad in grads:
        grad.mul_(scale)
    return total


def _check_finite(total: Tensor, norm_type: float) -> None:
    if not np.isfinite(total.numpy()).all():
        raise InvalidArgumentError(
            f"The total norm of order {float(norm_type)} for gradients from `parameters` is non-finite, "
            "so it cannot be clipped. To disable this error and scale the gradients by the non-finite "
            "norm anyway, set `error_if_nonfinite=False`"
        )
