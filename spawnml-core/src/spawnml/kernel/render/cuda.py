"""CUDA C++: the C-style renderer with CUDA's qualifiers, thread indices and float math."""

from __future__ import annotations

from typing import ClassVar

from ..ir import Kernel, Scalar, f16, f32, f64
from .cstyle import CStyleRenderer


class CUDARenderer(CStyleRenderer):
    """Renders kernels as CUDA C++ for NVRTC (``extern "C"`` so the name is not mangled)."""

    types: ClassVar[dict[str, str]] = {**CStyleRenderer.types, "f16": "__half", "u32": "unsigned int"}
    ids: ClassVar[dict[str, str]] = {
        "global": "(blockIdx.{xyz} * blockDim.{xyz} + threadIdx.{xyz})",
        "local": "threadIdx.{xyz}",
        "group": "blockIdx.{xyz}",
    }
    kernel_prefix = 'extern "C" __global__ '
    restrict = "__restrict__"
    shared_prefix = "__shared__ "
    barrier = "__syncthreads()"
    atomic_add_fn = "atomicAdd"
    float_fns: ClassVar[dict[str, str]] = {
        fn: f"{fn}f" for fn in ("exp", "log", "sqrt", "rsqrt", "tanh", "erf", "sin", "cos", "floor", "pow")
    } | {"abs": "fabsf", "min": "fminf", "max": "fmaxf"}

    def prelude(self, k: Kernel) -> list[str]:
        return ["#include <cuda_fp16.h>"] if f16 in k.dtypes else []

    def launch_bounds(self, k: Kernel) -> str:
        x, y, z = k.workgroup
        return f"__launch_bounds__({x * y * z}) "

    def call(self, fn: str, args: list[str], dtype: Scalar) -> str:
        if dtype == f16:  # half math goes through float
            return self.cast(super().call(fn, [self.cast(a, f32) for a in args], f32), f16)
        return super().call(fn, args, dtype)

    def math_names(self, dtype: Scalar) -> dict[str, str]:
        return CStyleRenderer.float_fns if dtype == f64 else super().math_names(dtype)  # C's double names
