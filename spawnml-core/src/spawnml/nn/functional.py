"""``spawnml.nn.functional``: torch's functional API (``import spawnml.nn.functional as F``).

Every function here is differentiable and runs on the backend holding its inputs.
"""

from __future__ import annotations

from ..autograd.functions.arith import relu, sigmoid, tanh
from ..autograd.functions.indexing import one_hot
from ..autograd.functions.loss import cross_entropy, l1_loss, mse_loss, nll_loss
from ..autograd.functions.softmax import log_softmax, softmax

__all__ = [
    "cross_entropy",
    "l1_loss",
    "log_softmax",
    "mse_loss",
    "nll_loss",
    "one_hot",
    "relu",
    "sigmoid",
    "softmax",
    "tanh",
]
