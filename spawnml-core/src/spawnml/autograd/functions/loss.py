"""Loss functions with torch's reductions ("none", "mean", "sum") and legacy arguments."""

from __future__ import annotations

from ...errors import InvalidArgumentError
from ...tensor import Tensor
from ..dispatch import check
from ..function import BackwardNode, Function
from .activation import logsigmoid
from .arith import abs, exp, log
from .compare import logical_and, where
from .extrema import clamp
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
    check(_check_in_range, target, classes, ignore_index)
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
        return sum(loss) / (logp.numel() // max(classes, 1))  # the batch's positions; 0/0 when empty
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


def smooth_l1_loss(
    input: Tensor,
    target: Tensor,
    size_average: bool | None = None,
    reduce: bool | None = None,
    reduction: str = "mean",
    beta: float = 1.0,
) -> Tensor:
    """``0.5 * d**2 / beta`` where ``|d| < beta``, else ``|d| - 0.5 * beta`` (``d = input - target``)."""
    reduction = reduction_of(size_average, reduce, reduction)
    if beta < 0:
        raise InvalidArgumentError("smooth_l1_loss does not support negative values for beta.")
    difference = input - target
    distance = abs(difference)
    if beta == 0:
        return reduce_loss(distance, reduction)
    loss = where(distance < beta, difference * difference * (0.5 / beta), distance - 0.5 * beta)
    return reduce_loss(loss, reduction)


def huber_loss(
    input: Tensor,
    target: Tensor,
    reduction: str = "mean",
    delta: float = 1.0,
    weight: Tensor | None = None,
) -> Tensor:
    """``0.5 * d**2`` where ``|d| < delta``, else ``delta * (|d| - 0.5 * delta)``."""
    reduction = reduction_of(None, None, reduction)
    difference = input - target
    distance = abs(difference)
    loss = where(distance < delta, difference * difference * 0.5, (distance - 0.5 * delta) * delta)
    return _weighted(loss, weight, input, reduction, by_weight=False)


#: torch's floor under ``log`` in binary cross-entropy, and under ``x * (1 - x)`` in its gradient.
LOG_FLOOR, GRAD_EPSILON = -100.0, 1e-12


class BinaryCrossEntropy(Function):
    @staticmethod
    def forward(ctx: BackwardNode, x: Tensor, t: Tensor) -> Tensor:
        ctx.save_for_backward(x, t)
        return -(t * clamp(log(x), LOG_FLOOR) + (1 - t) * clamp(log(1 - x), LOG_FLOOR))

    @staticmethod
    def backward(ctx: BackwardNode, grad: Tensor) -> tuple[Tensor | None, Tensor | None]:
        x, t = ctx.saved_tensors
        grad_x = grad_t = None
        if ctx.needs_input_grad[0]:
            grad_x = grad * (x - t) / clamp((1 - x) * x, GRAD_EPSILON)
        if ctx.needs_input_grad[1]:
            grad_t = grad * (log(1 - x) - log(x))  # unfloored, as torch
        return grad_x, grad_t


def binary_cross_entropy(
    input: Tensor,
    target: Tensor,
    weight: Tensor | None = None,
    size_average: bool | None = None,
    reduce: bool | None = None,
    reduction: str = "mean",
) -> Tensor:
    """``-(t * log(x) + (1 - t) * log(1 - x))`` for probabilities ``x``, logs floored at -100."""
    reduction = reduction_of(size_average, reduce, reduction)
    if tuple(target.shape) != tuple(input.shape):
        raise InvalidArgumentError(
            f"Using a target size ({list(target.shape)}) that is different to the input size "
            f"({list(input.shape)}) is deprecated. Please ensure they have the same size."
        )
    values = input.detach().numpy()
    if values.size and not ((values >= 0) & (values <= 1)).all():
        raise InvalidArgumentError("all elements of input should be between 0 and 1")
    loss = BinaryCrossEntropy.apply(input, target)
    return reduce_loss(loss if weight is None else loss * weight, reduction)


def binary_cross_entropy_with_logits(
    input: Tensor,
    target: Tensor,
    weight: Tensor | None = None,
    size_average: bool | None = None,
    reduce: bool | None = None,
    reduction: str = "mean",
    pos_weight: Tensor | None = None,
) -> Tensor:
    """Binary cross-entropy of ``sigmoid(input)``, computed stably from the logits; ``pos_weight``
    weighs the positive term (per class, broadcast over the last dimension)."""
    reduction = reduction_of(size_average, reduce, reduction)
    if tuple(target.shape) != tuple(input.shape):
        raise InvalidArgumentError(
            f"Target size ({list(target.shape)}) must be the same as input size ({list(input.shape)})"
        )
    log_p = logsigmoid(input)
    if pos_weight is not None:
        log_p = log_p * ((pos_weight - 1) * target + 1)
    loss = (1 - target) * input - log_p
    return reduce_loss(loss if weight is None else loss * weight, reduction)


def kl_div(
    input: Tensor,
    target: Tensor,
    size_average: bool | None = None,
    reduce: bool | None = None,
    reduction: str = "mean",
    log_target: bool = False,
) -> Tensor:
    """The Kullback-Leibler divergence of ``target`` from log-probabilities ``input``:
    ``target * (log(target) - input)`` (0 where ``target`` is 0), or with ``log_target``
    ``exp(target) * (target - input)``; "batchmean" divides the sum by the batch size."""
    reduction = "batchmean" if reduction == "batchmean" else reduction_of(size_average, reduce, reduction)
    if log_target:
        loss = exp(target) * (target - input)
    else:
        empty = target == 0
        loss = where(empty, 0.0, target * log(where(empty, 1.0, target))) - target * input
    if reduction == "batchmean":
        return sum(loss) / (input.shape[0] if input.ndim else 1)
    return reduce_loss(loss, reduction)
