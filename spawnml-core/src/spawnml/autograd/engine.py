"""Backward through the recorded graph, in dependency order, as ``torch.autograd.backward`` does."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from ..errors import AutogradError
from ..tensor import Tensor
from .function import GraphNode
from .mode import set_grad_enabled


def backward(
    tensors: Tensor | Sequence[Tensor],
    grad_tensors: Tensor | Sequence[Tensor | None] | None = None,
    retain_graph: bool | None = None,
    create_graph: bool = False,
) -> None:
    """Add the gradients of ``tensors`` (weighted by ``grad_tensors``) into the leaves' ``.grad``.

    Without ``retain_graph`` the graph's saved tensors are freed on the way, so a second
    backward through it raises. With ``create_graph`` the backward itself is recorded.
    """
    roots = [tensors] if isinstance(tensors, Tensor) else list(tensors)
    if grad_tensors is None or isinstance(grad_tensors, Tensor):
        grads: list[Tensor | None] = (
            [grad_tensors] if isinstance(grad_tensors, Tensor) else [None] * len(roots)
        )
    else:
        grads = list(grad_tensors)
    if len(grads) != len(roots):
        raise AutogradError(f"got {len(roots)} tensors and {len(grads)} gradients")
    retain = create_graph if retain_graph is None else retain_graph
    pending: dict[GraphNode, dict[int, Tensor]] = defaultdict(dict)
    for index, (root, grad) in enumerate(zip(roots, grads, strict=True)):
        if not root.requires_grad:
            raise AutogradError(
                f"element {index} of tensors does not require grad and does not have a grad_fn"
            )
        grad = _initial_grad(root, grad)
        node, slot = (root.grad_fn, root._output_nr) if root.grad_fn is not None else (root._accumulator(), 0)
        _add(pending[node], slot, grad)
    with set_grad_enabled(create_graph):
        for node in _order(list(pending)):
            received = pending.pop(node, {})
            if not received:
                continue
            incoming = [received.get(i) for i in range(node.output_count)]
            node.keep_grads(incoming)
            outgoing = node.apply(incoming)
            for edge, grad in zip(node.next_functions, outgoing, strict=False):
                if edge is not None and grad is not None:
                    _add(pending[edge[0]], edge[1], grad)
            if not retain:
                node.release()


def _initial_grad(root: Tensor, grad: Tensor | None) -> Tensor:
    if grad is None:
        if root.numel() != 1:
            raise AutogradError("grad can be implicitly created only for scalar outputs")
        from .functions.creation import ones_like

        return ones_like(root)
    if tuple(grad.shape) != tuple(root.shape):
        raise AutogradError(
            f"Mismatch in shape: grad_output[0] has a shape of {list(grad.shape)} and output[0] has a "
            f"shape of {list(root.shape)}."
        )
    return grad if grad.dtype == root.dtype else grad.detach().to(root.dtype)  # as torch casts it


def _add(slots: dict[int, Tensor], slot: int, grad: Tensor) -> None:
    slots[slot] = grad if slot not in slots else slots[slot] + grad


def _order(roots: list[GraphNode]) -> list[GraphNode]:
    """Every node reachable from ``roots``, each after all the nodes that feed it gradients."""
    seen: set[GraphNode] = set()
    order: list[GraphNode] = []
    stack: list[tuple[GraphNode, bool]] = [(root, False) for root in roots]
    while stack:
        node, expanded = stack.pop()
        if expanded:
            order.append(node)
            continue
        if node in seen:
            continue
        seen.add(node)
        stack.append((node, True))
        stack.extend(
            (edge[0], False) for edge in node.next_functions if edge is not None and edge[0] not in seen
        )
    return order[::-1]
