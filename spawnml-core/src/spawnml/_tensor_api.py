"""The torch-style API re-exported by ``spawnml``: tensor functions, autograd, nn, optim.

``spawnml`` imports this module on first use of one of these names, so that running a model
file does not pay for the training stack (see ``spawnml.__getattr__``).
"""

# ruff: noqa: F401  (every import here is a re-export)

from __future__ import annotations

from . import autograd, dtypes, nn, optim, passes, utils
from .autograd import Function, enable_grad, is_grad_enabled, no_grad, set_grad_enabled
from .autograd.functions.arith import abs, add, div, exp, log, mul, neg, pow, relu, sigmoid, sqrt, sub, tanh
from .autograd.functions.compare import eq, ge, gt, le, logical_and, logical_not, logical_or, lt, ne, where
from .autograd.functions.creation import (
    arange,
    empty,
    from_numpy,
    full,
    full_like,
    manual_seed,
    ones,
    ones_like,
    rand,
    randint,
    randn,
    randperm,
    tensor,
    zeros,
    zeros_like,
)
from .autograd.functions.extrema import (
    amax,
    amin,
    argmax,
    argmin,
    clamp,
    clip,
    isnan,
    max,
    maximum,
    min,
    minimum,
)
from .autograd.functions.indexing import (
    cumsum,
    gather,
    index_add,
    index_select,
    masked_fill,
    scatter,
    scatter_add,
)
from .autograd.functions.linalg import matmul, mm
from .autograd.functions.movement import flatten, permute, reshape, squeeze, t, transpose, unsqueeze
from .autograd.functions.pointwise import (
    ceil,
    cos,
    erf,
    expm1,
    floor,
    log1p,
    reciprocal,
    round,
    rsqrt,
    sign,
    sin,
    square,
    trunc,
)
from .autograd.functions.reduce import expand, mean, sum
from .autograd.functions.shape import cat, chunk, narrow, split, stack, unbind
from .autograd.functions.softmax import log_softmax, softmax
from .autograd.functions.statistics import logsumexp, norm, std, var
from .dtypes import bool, float16, float32, float64, int8, int16, int32, int64, uint8
from .serialization import (
    get_rng_state,
    load_checkpoint,
    load_safetensors,
    save_checkpoint,
    save_safetensors,
    set_rng_state,
)
from .tensor import Tensor
