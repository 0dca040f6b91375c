"""The OpenCL runtime over pyopencl: one in-order queue, pooled buffers, a program per source."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyopencl as cl
from spawnml.errors import DeviceMemoryError
from spawnml.gpu import Runtime

#: Workgroups per grid dimension: keeps every thread index within the u32 the kernels compute in.
MAX_GROUPS = 65535
#: A compiled kernel: the kernel object, its workgroup shape, and the lock its launches take.
Program = tuple[cl.Kernel, tuple[int, int, int], threading.Lock]


def devices() -> list[cl.Device]:
    """Every OpenCL device of every platform, in platform order (empty when no ICD loads)."""
    try:
        platforms = cl.get_platforms()
    except cl.Error:
        return []
    found: list[cl.Device] = []
    for platform in platforms:
        try:
            found += platform.get_devices()
        except cl.Error:  # a platform with no devices raises DEVICE_NOT_FOUND
            continue
    return found


def pick(choice: str | None) -> tuple[cl.Device | None, str]:
    """The device ``choice`` names (an index or a name substring; else the first), or why there is none."""
    found = devices()
    if not found:
        return None, "pyopencl found no OpenCL platform with a device (install an ICD, e.g. pocl-opencl-icd)"
    listing = "; ".join(f"{i}: {describe(d)}" for i, d in enumerate(found))
    if not choice:
        return found[0], describe(found[0])
    if choice.isdigit():
        matches = found[int(choice) : int(choice) + 1]
    else:
        matches = [d for d in found if choice.lower() in describe(d).lower()]
    if not matches:
        return None, f"SPAWNML_OPENCL_DEVICE={choice!r} matches none of the OpenCL devices ({listing})"
    return matches[0], describe(matches[0])


def describe(device: cl.Device) -> str:
    """Platform, device and device type, e.g. ``Portable Computing Language: pthread-... (CPU)``."""
    # pyopencl's stub declares ``to_string`` as a member of the enum, not the classmethod it is.
    kind = cl.device_type.to_string(device.type).replace("ALL | ", "")  # type: ignore[operator]
    return f"{device.platform.name.strip()}: {device.name.strip()} ({kind})"


class OpenCLRuntime(Runtime):
    """One OpenCL device and one in-order queue; only :meth:`copy_out` waits for the device.

    OpenCL calls are thread-safe except setting a kernel's arguments, which a launch does on the
    kernel object shared by every thread: each kernel has its own lock, held from setting the
    arguments to queueing the launch (no wait for the device), so threads only queue in turn
    where they launch the same kernel at the same moment.
    """

    def __init__(self, device: cl.Device) -> None:
        super().__init__()
        self.device = device
        self.float64 = "cl_khr_fp64" in device.extensions.split()
        self.on_cpu = bool(device.type & cl.device_type.CPU)
        self.context = cl.Context([device])
        self.queue = cl.CommandQueue(self.context, device)
        self._uploads: list[cl.Event] = []

    def describe(self) -> str:
        return describe(self.device)

    @property
    def max_groups(self) -> int:
        return MAX_GROUPS

    @property
    def max_buffer_bytes(self) -> int:
        return int(self.device.max_mem_alloc_size)

    def _alloc(self, size: int) -> cl.Buffer:
        try:
            return cl.Buffer(self.context, cl.mem_flags.READ_WRITE, size)
        except cl.MemoryError as error:
            raise DeviceMemoryError(f"out of memory: {error}") from error

    def copy_in(self, handle: cl.Buffer, data: np.ndarray) -> None:
        # The event keeps ``data`` alive until the write is done; the next read back releases it.
        self._uploads.append(cl.enqueue_copy(self.queue, handle, data, is_blocking=False))

    def copy_out(self, handle: cl.Buffer, nbytes: int) -> bytes:
        out = np.empty(nbytes, np.uint8)
        cl.enqueue_copy(self.queue, out, handle, is_blocking=True)
        self._uploads.clear()
        return out.tobytes()

    def compile(self, source: str, name: str) -> Program:
        """The kernel, its workgroup shape (the renderer's ``reqd_work_group_size``, checked against
        the device's limit for that kernel) and its launch lock.

        A kernel the device cannot run raises a plain error, as the contract of
        :meth:`Runtime.compile` asks: the planner wraps it in an
        :class:`~spawnml.errors.ExecutionError` naming the node, operator and provider."""
        kernel = getattr(cl.Program(self.context, source).build(devices=[self.device]), name)
        info = cl.kernel_work_group_info
        x, y, z = kernel.get_work_group_info(info.COMPILE_WORK_GROUP_SIZE, self.device)
        limit = kernel.get_work_group_info(info.WORK_GROUP_SIZE, self.device)
        if x * y * z > limit:
            raise RuntimeError(
                f"kernel {name} needs workgroups of {[x, y, z]}, above the {limit} {self.describe()} allows"
            )
        return kernel, (x, y, z), threading.Lock()

    def launch(
        self,
        program: Program,
        buffers: Sequence[Any],
        grid: tuple[int, int, int],
        scalars: Sequence[np.generic],
    ) -> None:
        kernel, local, lock = program
        size = tuple(g * w for g, w in zip(grid, local, strict=True))
        with lock:
            kernel.set_args(*buffers, *scalars)
            cl.enqueue_nd_range_kernel(self.queue, kernel, size, local)
