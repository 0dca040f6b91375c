"""The names a kernel is written with: parameter annotations and device intrinsics.

They exist so that kernel source is valid, importable Python; the front end recognises
them by identity and none of them runs on the host.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .ir import BufferType, KernelError, Scalar


class Buffer:
    """``Buffer[f32]``: a read-write device array parameter."""

    def __class_getitem__(cls, elem: Scalar) -> BufferType:
        return BufferType(_scalar(elem, "Buffer"), writable=True)


class ReadBuffer:
    """``ReadBuffer[f32]``: a read-only device array parameter."""

    def __class_getitem__(cls, elem: Scalar) -> BufferType:
        return BufferType(_scalar(elem, "ReadBuffer"), writable=False)


@dataclass(frozen=True)
class ConstSpec:
    """The annotation of a compile-time constant, baked in at specialisation."""

    type: type

    def check(self, name: str, value: Any) -> None:
        ok = isinstance(value, self.type) and not (self.type is not bool and isinstance(value, bool))
        if not ok:
            raise KernelError(f"constant {name} must be {self.type.__name__}, got {value!r}")


class Const:
    """``Const[int]``, ``Const[float]``, ``Const[bool]`` or ``Const[Scalar]`` (a dtype)."""

    def __class_getitem__(cls, kind: type) -> ConstSpec:
        if kind not in (int, float, bool, Scalar):
            raise KernelError(f"Const[{kind!r}]: constants are int, float, bool or Scalar")
        return ConstSpec(kind)


@dataclass(frozen=True)
class TypeParam:
    """A dtype placeholder, declared at module level (``T = TypeParam("T")``) so that kernels can
    annotate ``ReadBuffer[T]``; the kernel's parameter ``T: Const[Scalar]`` binds it."""

    name: str


#: The element-type placeholders of the kernel library: ``T`` the data's, ``R`` a result's.
T, R = TypeParam("T"), TypeParam("R")


def _scalar(elem: Any, what: str) -> Scalar:
    if isinstance(elem, TypeParam):
        raise KernelError(
            f"{what}[{elem.name}]: bind the placeholder with a parameter {elem.name}: Const[Scalar]"
        )
    if not isinstance(elem, Scalar):
        raise KernelError(f"{what}[{elem!r}]: the element type must be a Scalar such as f32")
    return elem


@dataclass(frozen=True)
class Intrinsic:
    """A device function; the front end turns calls to it into IR."""

    name: str

    def __call__(self, *args: Any) -> Any:
        raise KernelError(f"{self.name}() runs only inside a kernel")


global_id, local_id, group_id = Intrinsic("global_id"), Intrinsic("local_id"), Intrinsic("group_id")
barrier, shared, atomic_add = Intrinsic("barrier"), Intrinsic("shared"), Intrinsic("atomic_add")
exp, log, sqrt, rsqrt = Intrinsic("exp"), Intrinsic("log"), Intrinsic("sqrt"), Intrinsic("rsqrt")
tanh, erf, sin, cos = Intrinsic("tanh"), Intrinsic("erf"), Intrinsic("sin"), Intrinsic("cos")
floor, pow, select = Intrinsic("floor"), Intrinsic("pow"), Intrinsic("select")
#: Reading packed data: ``load_byte(words, i)`` is byte ``i`` (little-endian) of a ``u32`` buffer,
#: as u32; ``half_to_float(bits)`` is the float16 whose bits are the low 16 of a u32, as f32.
load_byte, half_to_float = Intrinsic("load_byte"), Intrinsic("half_to_float")
