"""``spawnml.nn.functional``: torch's functional API (``import spawnml.nn.functional as F``).

Every function here is differentiable and runs on the backend holding its inputs.
"""

from __future__ import annotations

from ..autograd.functions.arith import relu, sigmoid, tanh
from ..autograd.functions.conv import (
    conv1d,
    conv2d,
    conv3d,
    conv_transpose1d,
    conv_transpose2d,
    conv_transpose3d,
)
from ..autograd.functions.indexing import embedding, one_hot
from ..autograd.functions.loss import cross_entropy, l1_loss, mse_loss, nll_loss
from ..autograd.functions.pool import (
    adaptive_avg_pool1d,
    adaptive_avg_pool2d,
    adaptive_avg_pool3d,
    avg_pool1d,
    avg_pool2d,
    avg_pool3d,
    max_pool1d,
    max_pool2d,
    max_pool3d,
)
from ..autograd.functions.shape import pad
from ..autograd.functions.softmax import log_softmax, softmax

__all__ = [
    "adaptive_avg_pool1d",
    "adaptive_avg_pool2d",
    "adaptive_avg_pool3d",
    "avg_pool1d",
    "avg_pool2d",
    "avg_pool3d",
    "conv1d",
    "conv2d",
    "conv3d",
    "conv_transpose1d",
    "conv_transpose2d",
    "conv_transpose3d",
    "cross_entropy",
    "embedding",
    "l1_loss",
    "log_softmax",
    "max_pool1d",
    "max_pool2d",
    "max_pool3d",
    "mse_loss",
    "nll_loss",
    "one_hot",
    "pad",
    "relu",
    "sigmoid",
    "softmax",
    "tanh",
]
