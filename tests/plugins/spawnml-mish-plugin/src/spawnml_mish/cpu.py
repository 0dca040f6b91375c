"""The CPU kernel: the CPU backend's buffers are numpy arrays."""

from __future__ import annotations

import numpy as np
from spawnml.backend import KernelContext


def mish_cpu(ctx: KernelContext, x: np.ndarray) -> np.ndarray:
    """Mish in the input's precision; ``logaddexp(0, x)`` is softplus without overflow."""
    return x * np.tanh(np.logaddexp(0, x))
