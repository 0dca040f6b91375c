"""onnxruntime's device, memory and allocator descriptions: ``OrtDevice``, ``OrtMemoryInfo``,
``OrtArenaCfg`` and their enums, with onnxruntime's values.

They describe where memory lives; SpawnML plans its own buffers, so they are kept for code that
builds and reads them, and registering an allocator changes nothing.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any

from ..errors import InvalidArgumentError


class OrtDeviceVendorId(enum.IntEnum):
    """PCI vendor ids, as onnxruntime numbers them."""

    NONE = 0
    AMD = 0x1002
    NVIDIA = 0x10DE
    ARM = 0x13B5
    MICROSOFT = 0x1414
    HUAWEI = 0x19E5
    QUALCOMM = 0x5143
    INTEL = 0x8086


class OrtMemoryInfoDeviceType(enum.IntEnum):
    CPU = 0
    GPU = 1
    FPGA = 2
    NPU = 3


class OrtAllocatorType(enum.IntEnum):
    INVALID = -1
    ORT_DEVICE_ALLOCATOR = 0
    ORT_ARENA_ALLOCATOR = 1


class OrtMemType(enum.IntEnum):
    CPU_INPUT = -2
    CPU_OUTPUT = -1
    CPU = -1
    DEFAULT = 0


class OrtDeviceMemoryType(enum.IntEnum):
    DEFAULT = 0
    HOST_ACCESSIBLE = 5


#: onnxruntime's device type names: (device type, vendor).
_DEVICE_TYPES: dict[str, tuple[OrtMemoryInfoDeviceType, OrtDeviceVendorId]] = {
    "cpu": (OrtMemoryInfoDeviceType.CPU, OrtDeviceVendorId.NONE),
    "cuda": (OrtMemoryInfoDeviceType.GPU, OrtDeviceVendorId.NVIDIA),
    "cann": (OrtMemoryInfoDeviceType.NPU, OrtDeviceVendorId.HUAWEI),
    "dml": (OrtMemoryInfoDeviceType.GPU, OrtDeviceVendorId.MICROSOFT),
    "webgpu": (OrtMemoryInfoDeviceType.GPU, OrtDeviceVendorId.NONE),
    "gpu": (OrtMemoryInfoDeviceType.GPU, OrtDeviceVendorId.NONE),
    "npu": (OrtMemoryInfoDeviceType.NPU, OrtDeviceVendorId.NONE),
}


class OrtDevice:
    """A device: its type, vendor, id and memory type."""

    def __init__(self, device_type: int, memory_type: int, vendor_id: int, device_id: int) -> None:
        self._type, self._memory, self._vendor, self._id = device_type, memory_type, vendor_id, device_id

    @staticmethod
    def make(ort_device_name: str, device_id: int) -> OrtDevice:
        """The device onnxruntime names ``ort_device_name`` (``"cpu"``, ``"cuda"``, ...)."""
        try:
            kind, vendor = _DEVICE_TYPES[ort_device_name]
        except KeyError:
            raise InvalidArgumentError(
                f"Unsupported device type: {ort_device_name} (known: {', '.join(_DEVICE_TYPES)})"
            ) from None
        return OrtDevice(int(kind), int(OrtDeviceMemoryType.DEFAULT), int(vendor), int(device_id))

    def device_id(self) -> int:
        return self._id

    def device_type(self) -> int:
        return self._type

    def device_mem_type(self) -> int:
        return self._memory

    def device_vendor_id(self) -> int:
        return self._vendor


class OrtMemoryInfo:
    """Where an allocator's memory lives."""

    def __init__(self, name: str, allocator_type: int, device_id: int, mem_type: int) -> None:
        self.name = name
        self.allocator_type = OrtAllocatorType(allocator_type)
        self.device_id = int(device_id)
        self.mem_type = OrtMemType(mem_type)
        self.device_mem_type = OrtDeviceMemoryType.DEFAULT
        self.device_vendor_id = int(OrtDeviceVendorId.NONE)

    @staticmethod
    def create_v2(
        name: str,
        device_type: int,
        vendor_id: int,
        device_id: int,
        device_mem_type: int,
        alignment: int,
        allocator_type: int,
    ) -> OrtMemoryInfo:
        """onnxruntime's second constructor; the alignment is kept nowhere (SpawnML aligns itself)."""
        info = OrtMemoryInfo(name, allocator_type, device_id, OrtMemType.DEFAULT)
        info.device_mem_type = OrtDeviceMemoryType(device_mem_type)
        info.device_vendor_id = int(vendor_id)
        return info


#: ``OrtArenaCfg``'s settings, in the order its positional constructor takes the first four.
_ARENA_SETTINGS = (
    "max_mem",
    "arena_extend_strategy",
    "initial_chunk_size_bytes",
    "max_dead_bytes_per_chunk",
    "initial_growth_chunk_size_bytes",
    "max_power_of_two_extend_bytes",
)


class OrtArenaCfg:
    """An arena allocator's settings, from four positional values or a dict of any of them
    (unset ones are -1, as onnxruntime's are)."""

    max_mem: int
    arena_extend_strategy: int
    initial_chunk_size_bytes: int
    max_dead_bytes_per_chunk: int
    initial_growth_chunk_size_bytes: int
    max_power_of_two_extend_bytes: int

    def __init__(self, *args: Any) -> None:
        if len(args) == 1 and isinstance(args[0], Mapping):
            unknown = set(args[0]) - set(_ARENA_SETTINGS)
            if unknown:
                raise InvalidArgumentError(f"OrtArenaCfg: unknown settings {sorted(unknown)}")
            given = {key: int(value) for key, value in args[0].items()}
        elif len(args) == 4:
            given = dict(zip(_ARENA_SETTINGS, (int(value) for value in args), strict=False))
        else:
            raise InvalidArgumentError("OrtArenaCfg takes four numbers or one dict of settings")
        for key in _ARENA_SETTINGS:
            setattr(self, key, given.get(key, -1))


def create_and_register_allocator(mem_info: OrtMemoryInfo, arena_cfg: OrtArenaCfg | None) -> None:
    """Kept as a no-op: SpawnML's sessions plan their own buffers."""


def create_and_register_allocator_v2(
    provider_type: str, mem_info: OrtMemoryInfo, provider_options: Mapping[str, Any], arena_cfg: Any
) -> None:
    """Kept as a no-op: SpawnML's sessions plan their own buffers."""
