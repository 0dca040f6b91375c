"""Selecting by index: one-hot masks and ``one_hot``."""

from __future__ import annotations

import numpy as np

from ...errors import InvalidArgumentError
from ...tensor import Tensor
from ..dispatch import constant, run
from .movement import unsqueeze
from .promotion import DEFAULT_INT, cast


def class_mask(index: Tensor, size: int, dim: int) -> Tensor:
    """A bool tensor of ``index``'s shape with a dimension of ``size`` inserted at ``dim``, true
    where the position along it equals ``index``."""
    shape = [1] * (index.ndim + 1)
    shape[dim] = size
    positions = constant(np.arange(size).reshape(shape), index, DEFAULT_INT)
    return run("Equal", [unsqueeze(cast(index, DEFAULT_INT), dim), positions])


def one_hot(tensor: Tensor, num_classes: int = -1) -> Tensor:
    """Class indices as int64 one-hot vectors along a new last dimension (``num_classes`` wide,
    or one more than the largest index)."""
    if tensor.dtype.kind not in "iu":
        raise InvalidArgumentError("one_hot is only applicable to index tensor of type LongTensor.")
    values = tensor.numpy()
    if values.size and values.min() < 0:
        raise InvalidArgumentError("Class values must be non-negative.")
    if num_classes == -1:
        if not values.size:
            raise InvalidArgumentError("Can not infer total number of classes from empty tensor.")
        num_classes = int(values.max()) + 1
    elif values.size and values.max() >= num_classes:
        raise InvalidArgumentError("Class values must be smaller than num_classes.")
    return cast(class_mask(tensor, num_classes, tensor.ndim), DEFAULT_INT)
