"""Run one registered operator eagerly on the backend that holds its inputs.

Training uses the same operator registry and kernel tables as inference: an operation is a
one-node graph, its attributes resolved against the operator's schema, its kernel taken from
the backend's table. A backend that runs the forward and backward operators can train.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from functools import cache, lru_cache
from typing import Any

import numpy as np

from ..backend import Backend, KernelContext, KernelSpec
from ..errors import (
    ExecutionError,
    InvalidArgumentError,
    SpawnMLError,
    UnsupportedOperator,
    UnsupportedOperatorError,
)
from ..ir import Node
from ..ops.schema import OpSchema
from ..tensor import Tensor, capturing

#: The opset eager operations are written against, per domain (others: 1).
OPSETS = {"": 21}


def device_of(tensors: Sequence[Tensor | None]) -> Backend:
    """The one backend every given tensor lives on."""
    found = [t.backend for t in tensors if t is not None]
    if not found or any(b is not found[0] and b.name != found[0].name for b in found):
        names = sorted({b.name for b in found})
        raise InvalidArgumentError(
            f"expected all tensors to be on the same device, but found {names or 'none'}"
        )
    return found[0]


def run(
    op_type: str,
    inputs: Sequence[Tensor | None],
    *,
    outputs: int = 1,
    domain: str = "",
    refresh: Callable[[], dict[str, Any]] | None = None,
    **attrs: Any,
):
    """``op_type`` applied to ``inputs`` (``None`` for omitted optional inputs) on their backend,
    with the operator's version at the domain's :data:`OPSETS` entry.

    Returns one :class:`Tensor`, or a tuple of ``outputs`` tensors (``None`` where the kernel
    produced nothing). The result does not track gradients; :class:`~spawnml.autograd.Function`
    subclasses do that. ``refresh`` gives the attributes that change from step to step (an
    optimizer's step count and learning rate): called now, and again on each replay of a
    captured step.
    """
    if refresh is not None:
        attrs.update(refresh())
    backend = device_of(inputs)
    dtypes = tuple(None if x is None else x.dtype for x in inputs)
    # Calls with the same operator, attributes and input types share one checked, resolved
    # context; attributes that change every step (``refresh``) are resolved each time.
    key = None if refresh is not None else _key(backend, domain, op_type, outputs, dtypes, attrs)
    prepared = _PREPARED.get(key) if key is not None else None
    if prepared is None:
        prepared = _prepare(backend, domain, op_type, outputs, dtypes, attrs)
        if key is not None:
            if len(_PREPARED) >= _PREPARED_LIMIT:
                _PREPARED.clear()
            _PREPARED[key] = prepared
    spec, ctx = prepared
    node = ctx.node
    buffers = [None if x is None else x.buffer for x in inputs]
    try:
        with np.errstate(all="ignore"):  # IEEE results (inf, NaN) without warnings, as in a plan's run
            result = spec.fn(ctx, *buffers)
    except SpawnMLError:
        raise
    except Exception as error:
        raise ExecutionError(node.label(), op_type, backend.name, error) from error
    results = tuple(result) if isinstance(result, tuple | list) else (result,)
    if capturing.recorder is not None:
        capturing.recorder.kernel(spec.fn, ctx, inputs, results, refresh)
    wrapped = tuple(None if r is None else Tensor(r, backend) for r in results)
    return wrapped[0] if outputs == 1 else wrapped


#: Prepared calls by :func:`_key`; cleared when full, as attributes may take many values.
_PREPARED: dict[Hashable, tuple[KernelSpec, KernelContext]] = {}
_PREPARED_LIMIT = 4096


def _key(
    backend: Backend,
    domain: str,
    op_type: str,
    outputs: int,
    dtypes: tuple[np.dtype | None, ...],
    attrs: dict[str, Any],
) -> Hashable | None:
    """What a prepared call depends on (None where an attribute cannot be hashed); each value with
    its type, since 1, 1.0 and True are equal keys but not equal attributes."""
    frozen = tuple((name, type(v), tuple(v) if isinstance(v, list) else v) for name, v in attrs.items())
    key = (backend, domain, op_type, outputs, dtypes, frozen)  # the instance: a refresh makes new ones
    try:
        hash(key)
    except TypeError:
        return None
    return key


def _prepare(
    backend: Backend,
    domain: str,
    op_type: str,
    outputs: int,
    dtypes: tuple[np.dtype | None, ...],
    attrs: dict[str, Any],
) -> tuple[KernelSpec, KernelContext]:
    """The kernel and context of a call, after the backend's and the schema's checks."""
    opset = OPSETS.get(domain, 1)
    schema, spec = _resolve(backend, domain, op_type, opset)
    node = Node(
        op_type,
        [f"x{i}" if dtype is not None else "" for i, dtype in enumerate(dtypes)],
        [f"y{i}" for i in range(outputs)],
        attrs,
        op_type,
        domain,
    )
    refusal = backend.unsupported_reason(node, opset, list(dtypes))
    if refusal:
        raise UnsupportedOperatorError(
            [UnsupportedOperator(domain, op_type, opset, 1, (refusal,))], [backend.name]
        )
    return spec, KernelContext(node, opset, schema.resolve_attrs(node), backend)


def constant(values: Any, like: Tensor, dtype: Any = None) -> Tensor:
    """A small host array (axes, shapes, scalars) placed on ``like``'s device."""
    array = np.asarray(values, dtype=dtype if dtype is not None else like.dtype)
    return Tensor(like.backend.from_numpy(array), like.backend)


def sizes(values: Sequence[int] | int, like: Tensor) -> Tensor:
    """A shape, axes or pads (int64, 1-D; one int: 0-D) on ``like``'s device, shared by every call
    with the same values on that backend: operators only read these, and each new one would be
    another upload (GPU backends) and another buffer."""
    key = tuple(int(v) for v in values) if isinstance(values, Sequence) else int(values)
    return _sizes(like.backend, key)


@lru_cache(maxsize=1024)
def _sizes(backend: Backend, values: tuple[int, ...] | int) -> Tensor:
    return Tensor(backend.from_numpy(np.asarray(values, dtype=np.int64)), backend)


def drawn(draw: Callable[[], np.ndarray], like: Tensor) -> Tensor:
    """A host array made by ``draw`` from the random generator (a dropout mask), of ``like``'s type
    and on its device; a captured step draws it again on each replay."""
    recorder = capturing.recorder
    if recorder is None:
        return constant(draw(), like)
    with recorder.drawing():
        made = constant(draw(), like)
    recorder.upload(draw, made)
    return made


def check(test: Callable[..., None], tensor: Tensor, *args: Any) -> None:
    """Run ``test(tensor, *args)``, which reads ``tensor`` on the host to validate it (index ranges)
    and raises; a captured step runs it again on each replay."""
    recorder = capturing.recorder
    if recorder is None:
        test(tensor, *args)
        return
    with recorder.reading():
        test(tensor, *args)
    recorder.check(test, tensor, args)


def moved(x: Tensor, target: Backend) -> Tensor:
    """``x``'s data copied onto the ``target`` backend, through the host."""
    result = Tensor(target.from_numpy(x.backend.to_numpy(x.buffer)), target)
    if capturing.recorder is not None:
        capturing.recorder.transfer(x, result)
    return result


@cache
def _resolve(backend: Backend, domain: str, op_type: str, opset: int) -> tuple[OpSchema, KernelSpec]:
    from ..discovery import operators

    schema = operators().lookup(domain, op_type, opset)
    spec = backend.kernels.find(domain, op_type, opset)
    if schema is None or spec is None:
        reason = "no operator schema registered" if schema is None else f"{backend.name}: no kernel"
        raise UnsupportedOperatorError(
            [UnsupportedOperator(domain, op_type, opset, 1, (reason,))], [backend.name]
        )
    return schema, spec
