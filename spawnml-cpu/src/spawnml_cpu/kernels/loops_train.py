"""The optimizers' updates compiled with numba: one pass over a parameter's elements instead of
a numpy operation (and a temporary array) for each term, with the operations of
:mod:`.train`'s numpy form in the same order and type, so that the results are the same (a NaN
may differ in its sign bit).

Imported on first use (numba takes a while to import); compiled once per element type and
cached next to this file.
"""

from __future__ import annotations

import math
from typing import Any

import numba
import numpy as np

_JIT: dict[str, Any] = {"nogil": True, "cache": True}

#: ``adam``'s weight decay modes.
NO_DECAY, DECOUPLED, L2 = 0, 1, 2


@numba.njit(**_JIT)
def adam(
    param: np.ndarray,
    grad: np.ndarray,
    exp_avg: np.ndarray,
    exp_avg_sq: np.ndarray,
    max_sq: np.ndarray | None,
    new_param: np.ndarray,
    new_avg: np.ndarray,
    new_sq: np.ndarray,
    new_max: np.ndarray | None,
    maximize: bool,
    decay_mode: int,
    decay: Any,
    one_minus_beta1: Any,
    beta2: Any,
    one_minus_beta2: Any,
    correction2_sqrt: Any,
    eps: Any,
    step_size: Any,
) -> None:
    """One Adam step of the flat ``param`` (torch.optim's single-tensor form): the new parameter
    and moments into ``new_*``; ``max_sq`` (None: no AMSGrad) the running maximum of the second
    moment. ``decay`` is the factor of the parameter with ``DECOUPLED`` (AdamW), the L2 term's
    coefficient with ``L2``; the scalars are of the parameter's type."""
    for i in range(param.size):
        g = -grad[i] if maximize else grad[i]
        p = param[i]
        if decay_mode == DECOUPLED:
            p = p * decay
        elif decay_mode == L2:
            g = g + p * decay
        m = exp_avg[i] + (g - exp_avg[i]) * one_minus_beta1
        v = exp_avg_sq[i] * beta2 + g * one_minus_beta2 * g
        new_avg[i], new_sq[i] = m, v
        if max_sq is not None and new_max is not None:
            kept = max_sq[i]
            v = kept if kept > v or math.isnan(kept) else v  # np.maximum: NaN wins
            new_max[i] = v
        new_param[i] = p - m / (math.sqrt(v) / correction2_sqrt + eps) * step_size
