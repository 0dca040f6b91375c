"""The recorded graph: ``Function`` (forward and backward of one operation) and its nodes.

As in torch, ``SomeFunction.apply(*args)`` runs ``forward`` without recording, and when any
tensor argument requires grad it links the outputs to a :class:`BackwardNode` that keeps what
``backward`` needs. The node is the ``ctx`` both methods receive.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..errors import AutogradError
from ..tensor import Tensor, capturing
from .mode import is_grad_enabled, no_grad

#: Where a gradient flows next: the node and which of its outputs, or None for no gradient.
Edge = tuple["GraphNode", int] | None


class GraphNode:
    """A node of the backward graph: takes the gradients of its outputs, gives its inputs'."""

    next_functions: tuple[Edge, ...] = ()
    output_count = 1

    def name(self) -> str:
        return type(self).__name__

    def apply(self, grads: Sequence[Tensor | None]) -> Sequence[Tensor | None]:
        raise NotImplementedError

    def release(self) -> None:
        """Free what the backward pass kept (after it ran without ``retain_graph``)."""

    def keep_grads(self, grads: Sequence[Tensor | None]) -> None:
        """Store the gradients of outputs that asked for it with ``retain_grad()``."""


class AccumulateGrad(GraphNode):
    """The end of the graph at a leaf: adds the incoming gradient into ``leaf.grad``."""

    def __init__(self, leaf: Tensor) -> None:
        self.leaf = leaf

    def apply(self, grads: Sequence[Tensor | None]) -> Sequence[Tensor | None]:
        (grad,) = grads
        if grad is not None:
            if self.leaf.grad is not None and capturing.recorder is not None:
                capturing.recorder.accumulating(self.leaf)
            grad = grad if is_grad_enabled() else grad.detach()  # create_graph keeps its history
            self.leaf.grad = grad if self.leaf.grad is None else self.leaf.grad + grad
        return ()


class BackwardNode(GraphNode):
    """The record of one ``Function.apply``: the ``ctx`` of its forward and backward."""

    # What a forward keeps for its backward besides tensors, as attributes of ``ctx`` (as in
    # torch); each Function sets the few it needs. Declared here so each name has one type.
    dim: int
    dims: Sequence[int]
    shape: tuple[int, ...]
    shapes: tuple[tuple[int, ...], ...]
    size: int
    sizes: list[int | None]
    pads: Sequence[int]
    before: int
    after: int
    reverse: bool
    nan_equal: bool
    disjoint: bool  # whether no two pooling windows share an element
    p: float
    alpha: float
    beta: float
    scale: float
    inner: float
    slope: float
    threshold: float
    low: float
    high: float
    approximate: str
    geometry: Any  # a convolution's or pooling's geometry (spawnml.autograd.functions.conv)
    source: Any  # where To's input came from: its device name or its dtype

    def __init__(self, function: type[Function], inputs: Sequence[Any]) -> None:
        self.function = function
        self.needs_input_grad = tuple(isinstance(x, Tensor) and x.requires_grad for x in inputs)
        self.next_functions = tuple(_edge(x) if isinstance(x, Tensor) else None for x in inputs)
        self._saved: tuple[tuple[Tensor | None, int], ...] | None = ()
        self.retained: dict[int, list[Tensor]] = {}  # output index -> non-leaf tensors keeping .grad

    def name(self) -> str:
        return f"{self.function.__name__.removesuffix('Function')}Backward0"

    def save_for_backward(self, *tensors: Tensor | None) -> None:
        """Keep ``tensors`` for ``backward``; an in-place change to one before then is an error."""
        self._saved = tuple((t, t._version if t is not None else 0) for t in tensors)

    @property
    def saved_tensors(self) -> tuple[Tensor, ...]:
        """What ``save_for_backward`` kept. Typed as torch types it, for the usual case of saved
        tensors only: a slot saved as None reads back None, and the Function knows which."""
        if self._saved is None:
            raise AutogradError(
                "Trying to backward through the graph a second time (or directly access saved tensors "
                "after they have already been freed). Specify retain_graph=True on the first backward "
                "call if you need to backward through the graph a second time."
            )
        for index, (tensor, version) in enumerate(self._saved):
            if tensor is not None and tensor._version != version:
                raise AutogradError(
                    f"one of the variables needed for gradient computation has been modified by an "
                    f"inplace operation: saved tensor {index} of {self.name()} is at version "
                    f"{tensor._version}; expected version {version} instead"
                )
        return tuple(tensor for tensor, _ in self._saved)  # type: ignore[misc]  # see the docstring

    def apply(self, grads: Sequence[Tensor | None]) -> Sequence[Tensor | None]:
        result = self.function.backward(self, *grads)
        result = result if isinstance(result, tuple) else (result,)
        if len(result) < len(self.next_functions):
            raise AutogradError(
                f"function {self.name()} returned {len(result)} gradients, expected "
                f"{len(self.next_functions)}"
            )
        return result[: len(self.next_functions)]

    def release(self) -> None:
        self._saved = None

    def keep_grads(self, grads: Sequence[Tensor | None]) -> None:
        for slot, keepers in self.retained.items():
            for tensor in keepers:
                if (grad := grads[slot]) is not None:
                    grad = grad.detach()
                    tensor.grad = grad if tensor.grad is None else tensor.grad + grad


def _edge(tensor: Tensor) -> Edge:
    if tensor.grad_fn is not None:
        return tensor.grad_fn, tensor._output_nr
    if tensor.requires_grad:
        return tensor._accumulator(), 0
    return None


class Function:
    """An operation with a hand-written backward; subclass and call ``apply``, as in torch.

    ``forward(ctx, *args, **kwargs)`` computes the outputs from tensors (and other arguments)
    without recording; ``backward(ctx, *grad_outputs)`` returns one gradient per positional
    argument of ``forward`` (``None`` for arguments that take none).
    """

    @staticmethod
    def forward(ctx: BackwardNode, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError

    @staticmethod
    def backward(ctx: BackwardNode, *grad_outputs: Any) -> Any:
        raise NotImplementedError

    @classmethod
    def apply(cls, *args: Any, **kwargs: Any) -> Any:
        ctx = BackwardNode(cls, args)
        with no_grad():
            outputs = cls.forward(ctx, *args, **kwargs)
        if not (is_grad_enabled() and any(ctx.needs_input_grad)):
            return outputs
        single = not isinstance(outputs, tuple)
        tracked = []
        ctx.output_count = 1 if single else len(outputs)
        for index, output in enumerate((outputs,) if single else outputs):
            if isinstance(output, Tensor) and output.dtype.kind in "fc":
                # An input returned as is becomes a new tensor, so the input keeps its own history.
                output = output.detach() if any(output is x for x in args) else output
                output._attach(ctx, index)
            tracked.append(output)
        return tracked[0] if single else tuple(tracked)
