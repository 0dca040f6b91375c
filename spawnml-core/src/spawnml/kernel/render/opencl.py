"""OpenCL C: the C-style renderer with OpenCL's qualifiers, work-item functions and builtins."""

from __future__ import annotations

from typing import ClassVar

from ..ir import Kernel, Scalar, f16, f64
from .cstyle import CStyleRenderer


class OpenCLRenderer(CStyleRenderer):
    """Renders kernels as OpenCL C 1.2."""

    ids: ClassVar[dict[str, str]] = {
        "global": "((uint)get_global_id({axis}))",
        "local": "((uint)get_local_id({axis}))",
        "group": "((uint)get_group_id({axis}))",
    }
    kernel_prefix = "__kernel "
    buffer_prefix = "__global "
    shared_prefix = "__local "
    barrier = "barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE)"

    def prelude(self, k: Kernel) -> list[str]:
        extensions = {f16: "cl_khr_fp16", f64: "cl_khr_fp64"}
        return [
            f"#pragma OPENCL EXTENSION {name} : enable" for t, name in extensions.items() if t in k.dtypes
        ]

    def launch_bounds(self, k: Kernel) -> str:
        x, y, z = k.workgroup
        return f"__attribute__((reqd_work_group_size({x}, {y}, {z}))) "

    def call(self, fn: str, args: list[str], dtype: Scalar) -> str:
        if fn == "abs" and dtype.is_int:  # OpenCL's integer abs returns the unsigned type
            return self.cast(f"abs({args[0]})", dtype)
        return super().call(fn, args, dtype)
