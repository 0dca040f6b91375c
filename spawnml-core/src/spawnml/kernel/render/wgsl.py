"""WGSL: declarations in ``let``/``var`` form, module-scope bindings and workgroup arrays.

Bindings, all in ``@group(0)``: buffers take ``@binding(0..)`` in parameter order; the
scalar parameters, if any, are one uniform struct at the next binding, each member
4 bytes in parameter order (see :func:`scalar_layout`).
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from .. import ir
from ..ir import Expr, Kernel, KernelError, Scalar, f16, f64, u32
from . import wgsl_f64
from .cstyle import CStyleRenderer

_ERF = """fn spawn_erf_{t}(x: {t}) -> {t} {{
  let t = 1.0 / (1.0 + 0.3275911 * abs(x));
  let p = ((((1.061405429 * t - 1.453152027) * t + 1.421413741) * t - 0.284496736) * t + 0.254829592) * t;
  return sign(x) * (1.0 - p * exp(-x * x));
}}"""


class WGSLRenderer(CStyleRenderer):
    """Renders kernels as one WGSL compute entry point."""

    types: ClassVar[dict[str, str]] = {
        "f32": "f32",
        "f64": "f64",
        "f16": "f16",
        "i32": "i32",
        "u32": "u32",
        "bool": "bool",
    }
    ids: ClassVar[dict[str, str]] = {
        "global": "spawn_gid.{xyz}",
        "local": "spawn_lid.{xyz}",
        "group": "spawn_wid.{xyz}",
    }
    barrier = "workgroupBarrier()"
    atomic_add_fn = "atomicAdd"
    float_fns: ClassVar[dict[str, str]] = {"rsqrt": "inverseSqrt"}
    uniform = "spawn_scalars"

    def render(self, k: Kernel) -> str:
        self._scalars = {p.name for p in k.scalars}
        self._erf: set[Scalar] = set()
        self._f64_math: set[str] = set()
        return super().render(k)

    def prelude(self, k: Kernel) -> list[str]:
        lines = ["enable f16;"] if f16 in k.dtypes else []
        for i, p in enumerate(k.buffers):
            assert isinstance(p.type, ir.BufferType)
            elem = f"atomic<{self.type(p.type.elem)}>" if p.atomic else self.type(p.type.elem)
            access = "read_write" if p.type.writable else "read"
            lines.append(f"@group(0) @binding({i}) var<storage, {access}> {p.name}: array<{elem}>;")
        if k.scalars:
            for p in k.scalars:
                if p.type not in scalar_layout:
                    raise KernelError(f"{k.source}: WGSL scalar parameter {p.name} must be f32, i32 or u32")
            members = " ".join(f"{p.name}: {self.type(p.type)}," for p in k.scalars)  # type: ignore[arg-type]
            lines.append(f"struct SpawnScalars {{ {members} }}")
            lines.append(f"@group(0) @binding({len(k.buffers)}) var<uniform> {self.uniform}: SpawnScalars;")
        lines += [f"var<workgroup> {s.name}: array<{self.type(s.dtype)}, {s.size}>;" for s in k.shared]
        lines += [_ERF.format(t=self.type(t)) for t in sorted(self._erf, key=str)]
        return lines + wgsl_f64.prelude(self._f64_math)

    def signature(self, k: Kernel) -> str:
        x, y, z = k.workgroup
        ids = (
            ("global_invocation_id", "spawn_gid"),
            ("local_invocation_id", "spawn_lid"),
            ("workgroup_id", "spawn_wid"),
        )
        params = ", ".join(f"@builtin({b}) {name}: vec3<u32>" for b, name in ids)
        return f"@compute @workgroup_size({x}, {y}, {z})\nfn {k.name}({params})"

    def shared_decl(self, s: ir.SharedArray) -> str:
        return ""

    def declare(self, name: str, dtype: Scalar) -> str:
        return f"var {name}: {self.type(dtype)}"

    def var(self, name: str) -> str:
        return f"{self.uniform}.{name}" if name in self._scalars else name

    def binary(self, op: str, a: Expr, b: Expr) -> str:
        rhs = self.expr(b)
        if op in ("<<", ">>") and b.dtype != u32:  # WGSL shifts by a u32 amount
            rhs = self.cast(rhs, u32)
        return f"({self.expr(a)} {op} {rhs})"

    def literal(self, value: bool | int | float, dtype: Scalar) -> str:
        suffix = {"f32": "f", "f64": "lf", "f16": "h", "i32": "i", "u32": "u"}
        if dtype.is_float:
            return f"{float(value)!r}{suffix[dtype.name]}"
        return "true" if value is True else "false" if value is False else f"{int(value)}{suffix[dtype.name]}"

    def call(self, fn: str, args: list[str], dtype: Scalar) -> str:
        if dtype == f64 and fn in wgsl_f64.FUNCTIONS:  # no f64 transcendentals in Vulkan's SPIR-V
            self._f64_math.add(fn)
            return f"spawn_{fn}_f64({', '.join(args)})"
        if fn == "erf":  # WGSL has no erf: Abramowitz & Stegun 7.1.26, |error| < 1.5e-7
            self._erf.add(dtype)
            return f"spawn_erf_{self.type(dtype)}({args[0]})"
        if fn == "isnan":  # by the bits: WGSL lets compilers fold `x != x` to false
            return f"((bitcast<u32>({args[0]}) & 0x7fffffffu) > 0x7f800000u)"
        return super().call(fn, args, dtype)

    def cast(self, x: str, dtype: Scalar) -> str:
        return f"{self.type(dtype)}({x})"

    def expr(self, e: Expr) -> str:
        match e:
            case ir.Select(cond=cond, a=a, b=b):
                return f"select({self.expr(b)}, {self.expr(a)}, {self.expr(cond)})"
            case ir.Call(fn="isnan", args=(x,)) if x.dtype == f64:  # NaN stays NaN in float32
                return self.call("isnan", [self.cast(self.expr(x), ir.f32)], e.dtype)
        return super().expr(e)


#: The numpy dtype of each scalar type WGSL takes as a uniform member (4 bytes each).
scalar_layout: dict[Scalar, np.dtype] = {
    ir.f32: np.dtype(np.float32),
    ir.i32: np.dtype(np.int32),
    u32: np.dtype(np.uint32),
}
