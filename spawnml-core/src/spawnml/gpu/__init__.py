"""GPU backends: the runtime contract, device tensors, and the kernel table they all share.

A GPU backend is a :class:`Runtime` (device, pooled allocator, programs) and a renderer;
:class:`GPUBackend` does the rest with the library kernels of :mod:`spawnml.kernel`.
"""

from . import (  # noqa: F401  (the kernel modules register on GPU_KERNELS when imported)
    attention,
    control,
    einsum,
    flex_attention,
    forest,
    fused,
    gemm,
    indexing,
    layout,
    linalg,
    linear_attention,
    loss,
    mel,
    ml,
    quant,
    quant_conv,
    recurrent,
    reduce,
    regions,
    sampling,
    selection,
    sequence,
    signal,
    train,
    unary,
    vision,
)
from .array import PHYSICAL, DeviceArray, Storage, physical
from .backend import GPUBackend
from .runtime import Runtime
from .table import GPU_KERNELS

__all__ = ["GPU_KERNELS", "PHYSICAL", "DeviceArray", "GPUBackend", "Runtime", "Storage", "physical"]
