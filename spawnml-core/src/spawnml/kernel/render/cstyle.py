"""The C-style renderer: kernel IR to source text, with every language-specific spelling a hook.

A dialect subclasses :class:`CStyleRenderer` and overrides the class tables (types, id
spellings, qualifiers) and, where a table is not enough, one of the small methods.
"""

from __future__ import annotations

from typing import ClassVar

from .. import ir
from ..ir import Expr, Kernel, KernelError, Scalar, Stmt, f32


class CStyleRenderer:
    """Renders a :class:`~spawnml.kernel.ir.Kernel` as one C-family compute kernel."""

    types: ClassVar[dict[str, str]] = {
        "f32": "float",
        "f64": "double",
        "f16": "half",
        "i32": "int",
        "u32": "uint",
        "bool": "bool",
    }
    ids: ClassVar[dict[str, str]] = {}  # "global" -> format with {axis} (0..2) and {xyz} ("x"..)
    kernel_prefix: ClassVar[str] = ""
    buffer_prefix: ClassVar[str] = ""
    restrict: ClassVar[str] = "restrict"
    shared_prefix: ClassVar[str] = ""
    barrier: ClassVar[str] = ""
    atomic_add_fn: ClassVar[str] = "atomic_add"
    float_fns: ClassVar[dict[str, str]] = {"abs": "fabs", "min": "fmin", "max": "fmax"}
    int_fns: ClassVar[dict[str, str]] = {}
    indent: ClassVar[str] = "  "

    def render(self, k: Kernel) -> str:
        """The complete source of ``k``, ready for the language's compiler."""
        body = self.block(k.body, 1)  # before the prelude, which may depend on what the body used
        shared = [f"{self.indent}{decl}" for s in k.shared if (decl := self.shared_decl(s))]
        return "\n".join([*self.prelude(k), f"{self.signature(k)} {{", *shared, *body, "}", ""])

    # Declarations.
    def prelude(self, k: Kernel) -> list[str]:
        return []

    def signature(self, k: Kernel) -> str:
        params = ", ".join(self.param(p) for p in k.params)
        return f"{self.kernel_prefix}void {self.launch_bounds(k)}{k.name}({params})"

    def launch_bounds(self, k: Kernel) -> str:
        return ""

    def param(self, p: ir.Param) -> str:
        if isinstance(p.type, Scalar):
            return self.declare(p.name, p.type)
        const = "" if p.type.writable else "const "
        return f"{self.buffer_prefix}{const}{self.type(p.type.elem)}* {self.restrict} {p.name}"

    def shared_decl(self, s: ir.SharedArray) -> str:
        return f"{self.shared_prefix}{self.type(s.dtype)} {s.name}[{s.size}];"

    def type(self, dtype: Scalar) -> str:
        return self.types[dtype.name]

    def declare(self, name: str, dtype: Scalar) -> str:
        return f"{self.type(dtype)} {name}"

    # Statements.
    def block(self, body: tuple[Stmt, ...], depth: int) -> list[str]:
        return [line for s in body for line in self.stmt(s, depth)]

    def stmt(self, s: Stmt, depth: int) -> list[str]:
        pad = self.indent * depth
        match s:
            case ir.Declare(name=name, value=value):
                return [f"{pad}{self.declare(name, value.dtype)} = {self.expr(value)};"]
            case ir.Assign(name=name, value=value):
                return [f"{pad}{name} = {self.expr(value)};"]
            case ir.Store(array=array, index=index, value=value):
                return [f"{pad}{array}[{self.expr(index)}] = {self.expr(value)};"]
            case ir.If(cond=cond, body=body, orelse=orelse):
                out = [f"{pad}if {self.paren(cond)} {{", *self.block(body, depth + 1)]
                if orelse:
                    out += [f"{pad}}} else {{", *self.block(orelse, depth + 1)]
                return [*out, f"{pad}}}"]
            case ir.For(var=var, start=start, stop=stop, step=step, body=body):
                init = f"{self.declare(var, start.dtype)} = {self.expr(start)}"
                amount = self.literal(abs(step), start.dtype)
                test, inc = ("<", "+=") if step > 0 else (">", "-=")
                head = f"for ({init}; {var} {test} {self.expr(stop)}; {var} {inc} {amount})"
                return [f"{pad}{head} {{", *self.block(body, depth + 1), f"{pad}}}"]
            case ir.While(cond=cond, body=body):
                return [f"{pad}while {self.paren(cond)} {{", *self.block(body, depth + 1), f"{pad}}}"]
            case ir.Eval(value=value):
                return [f"{pad}{self.expr(value)};"]
            case ir.Barrier():
                return [f"{pad}{self.barrier};"]
            case ir.Break():
                return [f"{pad}break;"]
            case ir.Continue():
                return [f"{pad}continue;"]
            case ir.Return():
                return [f"{pad}return;"]
        raise KernelError(f"{type(self).__name__} cannot render {s!r}")

    # Expressions.
    def expr(self, e: Expr) -> str:
        match e:
            case ir.Const(value=value, dtype=dtype):
                return self.literal(value, dtype)
            case ir.Var(name=name):
                return self.var(name)
            case ir.Load(array=array, index=index):
                return f"{array}[{self.expr(index)}]"
            case ir.Unary(op=op, x=x):
                return f"({op}{self.expr(x)})"
            case ir.Binary(op=op, a=a, b=b):
                return self.binary(op, a, b)
            case ir.Call(fn=fn, args=args, dtype=dtype):
                return self.call(fn, [self.expr(a) for a in args], dtype)
            case ir.Cast(x=x, dtype=dtype):
                return self.cast(self.expr(x), dtype)
            case ir.Select(cond=cond, a=a, b=b):
                return f"({self.expr(cond)} ? {self.expr(a)} : {self.expr(b)})"
            case ir.Id(kind=kind, axis=axis):
                return self.ids[kind].format(axis=axis, xyz="xyz"[axis])
            case ir.AtomicAdd(array=array, index=index, value=value):
                return f"{self.atomic_add_fn}(&{array}[{self.expr(index)}], {self.expr(value)})"
        raise KernelError(f"{type(self).__name__} cannot render {e!r}")

    def paren(self, e: Expr) -> str:
        """``e`` in exactly one pair of parentheses, as ``if`` and ``while`` want it."""
        return self.expr(e) if isinstance(e, ir.Unary | ir.Binary) else f"({self.expr(e)})"

    def var(self, name: str) -> str:
        return name

    def binary(self, op: str, a: Expr, b: Expr) -> str:
        return f"({self.expr(a)} {op} {self.expr(b)})"

    def literal(self, value: bool | int | float, dtype: Scalar) -> str:
        if dtype.kind == "b":
            return "true" if value else "false"
        if dtype.kind == "u":
            return f"{int(value)}u"
        if dtype.kind == "i":
            return f"{int(value)}" if value >= 0 else f"({int(value)})"
        if dtype.bits == 64:
            return repr(float(value))
        text = f"{float(value)!r}f"
        return text if dtype == f32 else self.cast(text, dtype)

    def cast(self, x: str, dtype: Scalar) -> str:
        return f"(({self.type(dtype)})({x}))"

    def call(self, fn: str, args: list[str], dtype: Scalar) -> str:
        return f"{self.math_names(dtype).get(fn, fn)}({', '.join(args)})"

    def math_names(self, dtype: Scalar) -> dict[str, str]:
        """The language's names of the math intrinsics on ``dtype``."""
        return self.float_fns if dtype.is_float else self.int_fns
