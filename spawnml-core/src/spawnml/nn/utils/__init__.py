"""``spawnml.nn.utils``: helpers around parameters, as ``torch.nn.utils``."""

from __future__ import annotations

from .clip_grad import clip_grad_norm_

__all__ = ["clip_grad_norm_"]
