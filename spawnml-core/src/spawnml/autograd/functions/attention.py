"""``scaled_dot_product_attention``, as torch's reference math: ``softmax(q kᵀ · scale + mask) v``."""

from __future__ import annotations

import math

import numpy as np

from ...errors import InvalidArgumentError
from ...tensor import Tensor
from ..dispatch import constant
from .compare import logical_not
from .dropout import dropout
from .indexing import masked_fill
from .linalg import matmul
from .movement import transpose
from .softmax import softmax


def scaled_dot_product_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attn_mask: Tensor | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: float | None = None,
    enable_gqa: bool = False,
) -> Tensor:
    """Attention of ``query (..., L, E)`` over ``key (..., S, E)`` and ``value (..., S, Ev)``.

    ``attn_mask`` is a bool mask (True: may attend) or float scores added; ``is_causal`` lets
    position i attend to positions up to i (top-left aligned, as torch); ``scale`` defaults to
    ``1 / sqrt(E)``; ``dropout_p`` drops attention weights (always, as torch's function does).
    """
    if enable_gqa:
        raise InvalidArgumentError("scaled_dot_product_attention: enable_gqa is not supported")
    if is_causal and attn_mask is not None:
        raise InvalidArgumentError(
            "_scaled_dot_product_attention: Explicit attn_mask should not be set when is_causal=True"
        )
    factor = 1 / math.sqrt(query.shape[-1]) if scale is None else scale
    scores = matmul(query, transpose(key, -2, -1)) * factor
    if is_causal:
        future = np.triu(np.ones((query.shape[-2], key.shape[-2]), dtype=bool), 1)
        scores = masked_fill(scores, constant(future, scores, bool), -math.inf)
    elif attn_mask is not None and attn_mask.dtype == np.dtype(bool):
        scores = masked_fill(scores, logical_not(attn_mask), -math.inf)
    elif attn_mask is not None:
        scores = scores + attn_mask
    weights = softmax(scores, -1)
    if dropout_p > 0:
        weights = dropout(weights, dropout_p)
    return matmul(weights, value)
