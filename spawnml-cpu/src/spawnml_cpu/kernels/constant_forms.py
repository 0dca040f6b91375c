"""Forms of a constant input (a weight transposed, widened, shifted by its zero point) computed
the first time a kernel reads it and kept while the input lives.

A session's initializers reach the kernels as the same read-only arrays at every run (the
planner hands them out as read-only views that live as long as the plan), so a form can be
keyed by the array's id, with a weak reference that drops it when the array is freed and tells a
reused id from the array the form was made for. Writeable arrays (activations, whose buffers
may be refilled) are never cached: their forms are made at every call.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Hashable
from functools import partial
from typing import Any, TypeVar

import numpy as np

T = TypeVar("T")

#: Forms by the id of the array they came from: a weak reference to the array, and its forms by key.
_forms: dict[int, tuple[weakref.ref[np.ndarray], dict[Hashable, Any]]] = {}
_lock = threading.RLock()  # reentrant: a freed array's callback may run while a form is stored


def constant_form(array: np.ndarray, key: Hashable, make: Callable[[], T]) -> T:
    """``make()``, kept for ``array`` under ``key`` when ``array`` is read-only; ``make`` must
    not return a view of ``array`` (that would keep it alive)."""
    if array.flags.writeable:
        return make()
    ident = id(array)
    with _lock:
        entry = _forms.get(ident)
        if entry is not None and entry[0]() is array and key in entry[1]:
            return entry[1][key]
    form = make()
    with _lock:
        entry = _forms.get(ident)
        if entry is None or entry[0]() is not array:
            entry = (weakref.ref(array, partial(_forget, ident)), {})
            _forms[ident] = entry
        return entry[1].setdefault(key, form)


def _forget(ident: int, reference: weakref.ref[np.ndarray]) -> None:
    """Drop the forms of an array that was freed (unless the id already holds a newer one's)."""
    with _lock:
        entry = _forms.get(ident)
        if entry is not None and entry[0] is reference:
            del _forms[ident]
