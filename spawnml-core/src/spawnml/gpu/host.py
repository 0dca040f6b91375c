"""Reading small shape-like inputs (axes, sizes, scales, counts) back on the host.

Free for initializers, which keep their host values; one small read-back otherwise.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, overload

import numpy as np

from .array import DeviceArray

if TYPE_CHECKING:
    from .table import GPUContext


@overload
def to_host(ctx: GPUContext, x: DeviceArray) -> np.ndarray: ...
@overload
def to_host(ctx: GPUContext, x: DeviceArray | None) -> np.ndarray | None: ...
def to_host(ctx: GPUContext, x: DeviceArray | None) -> np.ndarray | None:
    """``x`` as a numpy array; None for an absent optional input."""
    return None if x is None else ctx.backend.to_numpy(x)


def given_on_host(ctx: GPUContext, x: DeviceArray | None) -> np.ndarray | None:
    """An optional input as a numpy array, None where it is absent or empty (Resize's roi,
    scales and sizes, of which an empty tensor means "not given")."""
    return None if x is None or x.size == 0 else ctx.backend.to_numpy(x)


def host_int(ctx: GPUContext, x: DeviceArray) -> int:
    """The first element of ``x`` (a scalar input such as a size or a count) as an int."""
    return int(to_host(ctx, x).reshape(-1)[0])


def axes_argument(ctx: GPUContext, given: DeviceArray | None) -> list[int] | None:
    """The axes of an operator that takes them as an input (``given``) or, before, as an attribute."""
    axes = ctx.attrs.get("axes") if given is None else to_host(ctx, given)
    return None if axes is None else [int(a) for a in np.asarray(axes).reshape(-1)]
