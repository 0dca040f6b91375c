"""Whether operations record a graph for backward: ``no_grad``, ``enable_grad``, per thread as in torch."""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])

_state = threading.local()


def is_grad_enabled() -> bool:
    """Whether operations on tensors that require grad record the graph (per thread; on by default)."""
    return getattr(_state, "enabled", True)


class set_grad_enabled:  # lowercase as in torch: a function and a context manager
    """Turn gradient recording on or off: at once, and back to the previous state on ``with`` exit."""

    def __init__(self, mode: bool) -> None:
        self.previous = is_grad_enabled()
        _state.enabled = bool(mode)

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        _state.enabled = self.previous


class _GradMode:
    """A context manager and decorator that sets the grad mode for its extent."""

    mode: bool

    def __enter__(self) -> None:
        self.previous = is_grad_enabled()
        _state.enabled = self.mode

    def __exit__(self, *exc: object) -> None:
        _state.enabled = self.previous

    def __call__(self, fn: F) -> F:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with type(self)():
                return fn(*args, **kwargs)

        return wrapper  # type: ignore[return-value]


class no_grad(_GradMode):
    """Run without recording a graph: results do not require grad."""

    mode = False


class enable_grad(_GradMode):
    """Record a graph again inside a ``no_grad`` region."""

    mode = True
