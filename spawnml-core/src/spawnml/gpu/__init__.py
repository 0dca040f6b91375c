"""GPU backends: the runtime contract, device tensors, and the kernel table they all share.

A GPU backend is a :class:`Runtime` (device, pooled allocator, programs) and a renderer;
:class:`GPUBackend` does the rest with the library kernels of :mod:`spawnml.kernel`. The kernel
modules register on :data:`GPU_KERNELS` when a backend first looks a kernel up (:mod:`.registry`).
"""

from .array import PHYSICAL, DeviceArray, Storage, physical
from .backend import GPUBackend
from .registry import GPU_KERNELS
from .runtime import Runtime

__all__ = ["GPU_KERNELS", "PHYSICAL", "DeviceArray", "GPUBackend", "Runtime", "Storage", "physical"]
