"""The CPU kernel table. Each family module registers its kernels on import."""

from __future__ import annotations

from . import (  # noqa: F401  (registration by import)
    attention,
    contrib,
    contrib_attention,
    contrib_quant,
    control,
    conv_transpose,
    elementwise,
    fused,
    loss,
    misc,
    ml,
    nn,
    quant_gguf,
    quant_lstm,
    quant_qlinear,
    recurrent,
    reduce,
    signal,
    strings,
    tensor,
    train,
    vision,
)
from .table import KERNELS

__all__ = ["KERNELS"]
