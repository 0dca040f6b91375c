"""Optimizers with torch.optim's names, hyperparameters and state; each parameter's update is one
fused operator (``ai.spawnml.train``) run on the parameter's backend."""

from __future__ import annotations

from . import lr_scheduler
from .adam import Adam, AdamW
from .optimizer import Optimizer
from .rmsprop import RMSprop
from .sgd import SGD

__all__ = ["SGD", "Adam", "AdamW", "Optimizer", "RMSprop", "lr_scheduler"]
