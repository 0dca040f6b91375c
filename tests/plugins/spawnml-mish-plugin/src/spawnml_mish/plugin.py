"""The entry-point module: the operator, and its kernels on the CPU and GPU backends."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from spawnml.plugins import RegisterKernel, hookimpl

from .cpu import mish_cpu
from .gpu import mish_gpu
from .ops import DOMAIN, MISH

#: The GPU backends the kernel-language kernel runs on: those whose kernels run on a
#: ``spawnml.gpu.GPUBackend``.
GPU_BACKENDS = ("webgpu", "opencl", "cuda")
FLOATS = (np.float16, np.float32, np.float64)


@hookimpl
def register_operators(register: Callable[..., None]) -> None:
    register(MISH)


@hookimpl
def register_kernels(register: RegisterKernel, backends: frozenset[str]) -> None:
    if "cpu" in backends:
        register(backend="cpu", op_type="Mish", domain=DOMAIN, kernel=mish_cpu, dtypes=FLOATS)
    for name in sorted(backends & set(GPU_BACKENDS)):
        register(backend=name, op_type="Mish", domain=DOMAIN, kernel=mish_gpu, dtypes=(np.float32,))
