"""The GPU kernel, written once in the kernel language: every GPU backend renders it to its own
language (WGSL, OpenCL C, CUDA C) and compiles it on first use."""

from __future__ import annotations

from typing import cast

from spawnml.backend import KernelContext
from spawnml.gpu import DeviceArray, GPUBackend
from spawnml.kernel import Buffer, ReadBuffer, exp, f32, global_id, kernel, select, u32


@kernel(workgroup=(64,))
def mish(x: ReadBuffer[f32], out: Buffer[f32], n: u32, width: u32):
    """``out = mish(x)`` over ``n`` elements, ``width`` threads per row of a 2-D grid.

    ``tanh(log(1 + e))`` is ``t / (t + 2)`` with ``t = e * (e + 2)``, ``e = exp(x)``: no
    cancellation where softplus is tiny; from 20 up, ``mish(x)`` is ``x`` in float32 (and
    ``exp`` is clamped there so that ``t`` stays finite).
    """
    i = global_id(1) * width + global_id(0)
    if i < n:
        v = x[i]
        e = exp(min(v, 20.0))
        t = e * (e + 2.0)
        out[i] = select(v > 20.0, v, v * t / (t + 2.0))


MISH_F32 = mish.specialize()


def mish_gpu(ctx: KernelContext, x: DeviceArray) -> DeviceArray:
    """Launch :data:`MISH_F32` with one thread per element of ``x``, a float32 device tensor."""
    backend = cast(GPUBackend, ctx.backend)  # registered for the GPU backends only
    out = backend.empty(x.shape, x.dtype)
    backend.launch_flat(MISH_F32, [x, out], x.size)
    return out
