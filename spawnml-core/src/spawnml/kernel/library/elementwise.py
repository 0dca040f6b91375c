"""Elementwise kernels."""

from __future__ import annotations

from ..frontend import kernel
from ..ir import Scalar, u32
from ..lang import Buffer, Const, ReadBuffer, T, global_id


@kernel(workgroup=(64,))
def add(a: ReadBuffer[T], b: ReadBuffer[T], out: Buffer[T], n: u32, T: Const[Scalar]):
    """``out = a + b`` over ``n`` elements; launch ``ceil(n / 64)`` workgroups."""
    i = global_id(0)
    if i < n:
        out[i] = a[i] + b[i]
