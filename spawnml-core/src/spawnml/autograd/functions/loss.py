"""Loss functions with torch's reductions ("none", "mean", "sum") and legacy arguments."""

from __future__ import annotations

from ...errors import InvalidArgumentError
from ...tensor import Tensor
from .arith import abs
from .compare import logical_and, where
from .indexing import class_mask
from .movement import reshape, unsqueeze
from .promotion import cast
from .reduce import mean, sum
from .softmax import log_softmax

REDUCTIONS = ("none", "mean", "sum")


def reduction_of(size_average: bool | None, reduce: bool | None, reduction: str) -> str:
    """``reduction``, or what the deprecated ``size_average``/``reduce`` pair asks for."""
    if size_average is not None or reduce is not None:
        size_average = True if size_average is None else size_average
        reduce = True if reduce is None else reduce
        reduction = "none" if not reduce else "mean" if size_average else "sum"
    if reduction not in REDUCTIONS:
        raise InvalidArgumentError(f"{reduction} is not a valid value for reduction")
    return reduction


def reduce_loss(loss: Tensor, reduction: str) -> Tensor:
    return loss if reduction == "none" else sum(loss) if reduction == "sum" else mean(loss)


def _check_class_targets(input: Tensor, target: Tensor) -> int:
    """The class dimension of ``input`` after checking ``target`` against it as torch does."""
    if target.dtype.kind not in "iu":
        raise InvalidArgumentError(f"expected scalar type Long but found {target.dtype}")
    if input.ndim == 0:
        raise InvalidArgumentError("input tensor should be 1D or more")
    class_dim = 0 if input.ndim == 1 else 1
    if input.ndim == 1 and target.ndim != 0:
        raise InvalidArgumentError("0D or 1D target tensor expected, multi-target not supported")
    if input.ndim > 1 and target.shape[:1] != input.shape[:1]:
        raise InvalidArgumentError(
            f"Expected input batch_size ({input.shape[0]}) to match target batch_size "
            f"({target.shape[0] if target.ndim else 0})."
        )
    expected = [*input.shape[:class_dim], *input.shape[class_dim + 1 :]]
    if list(target.shape) != expected:
        raise InvalidArgumentError(f"Expected target size {expected}, got {list(target.shape)}")
    return class_dim


def _check_in_range(target: Tensor, classes: int, ignore_index: int) -> None:
    values = target.numpy()
    wrong = values[(values != ignore_index) & ((values < 0) | (values >= classes))]
    if wrong.size:
        raise InvalidArgumentError(f"Target {wrong.flat[0]} is out of bounds.")


def _class_weights(weight: Tensor, classes: int, class_dim: int, ndim: int) -> Tensor:
    if weight.ndim != 1 or weight.shape[0] != classes:
        raise InvalidArgumentError(
            f"weight tensor should be defined either for all {classes} classes or no classes but got "
            f"weight tensor of shape: {list(weight.shape)}"
        )
    return reshape(weight, [classes] + [1] * (ndim - class_dim - 1))


def nll_loss(
    input: Tensor,
    target: Tensor,
    weight: Tensor | None = None,
    size_average: bool | None = None,
    ignore_index: int = -100,
    reduce: bool | None = None,
    reduction: str = "mean",
) -> Tensor:
    """The negative log-likelihood of the ``target`` classes under log-probabilities ``input``
    (classes along dimension 1, or 0 for a single sample). With ``weight`` the mean divides by
    the summed weights of the targets; targets equal to ``ignore_index`` count for nothing."""
    reduction = reduction_of(size_average, reduce, reduction)
    class_dim = _check_class_targets(input, target)
    chosen, weights = _target_weights(input, target, weight, class_dim, ignore_index)
    loss = -(sum(where(chosen, input, 0.0), class_dim) * weights)
    if reduction == "none":
        return loss
    return sum(loss) if reduction == "sum" else sum(loss) / sum(weights)


def _target_weights(
    input: Tensor, target: Tensor, weight: Tensor | None, class_dim: int, ignore_index: int
) -> tuple[Tensor, Tensor]:
    """Where each target class is in ``input`` (nowhere for ignored targets), and each target's
    weight (0 when ignored)."""
    classes = input.shape[class_dim]
    _check_in_range(target, classes, ignore_index)
    kept = target != ignore_index
    chosen = logical_and(class_mask(target, classes, class_dim), unsqueeze(kept, class_dim))
    if weight is None:
        return chosen, cast(kept, input.dtype)
    weights = where(chosen, _class_weights(weight, classes, class_dim, input.ndim), 0.0)
    return chosen, sum(weights, class_dim)


def cross_entropy(
    input: Tensor,
    target: Tensor,
    weight: Tensor | None = None,
    size_average: bool | None = None,
    ignore_index: int = -100,
    reduce: bool | None = None,
    reduction: str = "mean",
    label_smoothing: float = 0.0,
) -> Tensor:
    """``nll_loss(log_softmax(input, class_dim), target)`` for class-index targets, or the
    cross-entropy against class probabilities when ``target`` is a float tensor shaped like
    ``input``; ``label_smoothing`` mixes in the uniform distribution as torch does."""
    reduction = reduction_of(size_average, reduce, reduction)
    if not 0.0 <= label_smoothing <= 1.0:
        raise InvalidArgumentError(f"label_smoothing must be between 0.0 and 1.0. Got: {label_smoothing}")
    class_dim = 0 if input.ndim == 1 else 1
    logp = log_softmax(input, class_dim)
    if input.ndim and tuple(target.shape) == tuple(input.shape) and target.dtype.kind == "f":
        return _probability_cross_entropy(logp, target, weight, ignore_index, reduction, label_smoothing)
    loss = nll_loss(logp, target, weight, ignore_index=ignore_index, reduction=reduction)
    if label_smoothing == 0:
        return loss
    classes = input.shape[class_dim]
    _, weights = _target_weights(input, target, weight, class_dim, ignore_index)
    if weight is not None:
        logp = logp * _class_weights(weight, classes, class_dim, input.ndim)
    smooth = -sum(where(unsqueeze(target != ignore_index, class_dim), logp, 0.0), class_dim)
    smooth = sum(smooth) / sum(weights) if reduction == "mean" else reduce_loss(smooth, reduction)
    return loss * (1 - label_smoothing) + smooth * (label_smoothing / classes)


def _probability_cross_entropy(
    logp: Tensor,
    target: Tensor,
    weight: Tensor | None,
    ignore_index: int,
    reduction: str,
    label_smoothing: float,
) -> Tensor:
    if ignore_index >= 0:
        raise InvalidArgumentError("ignore_index is not supported for floating point target")
    class_dim = 0 if logp.ndim == 1 else 1
    classes = logp.shape[class_dim]
    if label_smoothing > 0:
        target = target * (1 - label_smoothing) + label_smoothing / classes
    products = logp * target
    if weight is not None:
        products = products * _class_weights(weight, classes, class_dim, logp.ndim)
    loss = -sum(products, class_dim)
    if reduction == "mean":
        return sum(loss) / (logp.numel() // classes) if logp.numel() else sum(loss) / 0.0
    return reduce_loss(loss, reduction)


def _weighted(loss: Tensor, weight: Tensor | None, input: Tensor, reduction: str, by_weight: bool) -> Tensor:
    """``loss`` times elementwise ``weight``, reduced; the mean divides by the summed weights
    (``by_weight``, as torch's MSE and L1 losses) or by the element count (Huber)."""
    if weight is None:
        return reduce_loss(loss, reduction)
    if tuple(weight.shape) != tuple(input.shape):
        raise InvalidArgumentError("Weights and input must have the same size.")
    loss = loss * weight
    if reduction == "mean" and by_weight:
        return sum(loss) / sum(weight)
    return reduce_loss(loss, reduction)


def mse_loss(
    input: Tensor,
    target: Tensor,
    size_average: bool | None = None,
    reduce: bool | None = None,
    reduction: str = "mean",
    weight: Tensor | None = None,
) -> Tensor:
    """The squared difference, broadcast, optionally weighted, then reduced."""
    reduction = reduction_of(size_average, reduce, reduction)
    difference = input - target
    return _weighted(difference * difference, weight, input, reduction, by_weight=True)


def l1_loss(
    input: Tensor,
    target: Tensor,
    size_average: bool | None = None,
    reduce: bool | None = None,
    reduction: str = "mean",
    weight: Tensor | None = None,
) -> Tensor:
    """The absolute difference, broadcast, optionally weighted, then reduced (gradient 0 where
    they are equal)."""
    reduction = reduction_of(size_average, reduce, reduction)
    return _weighted(abs(input - target), weight, input, reduction, by_weight=True)
