"""The front end: a Python function in the kernel subset, parsed with ``ast`` into the kernel IR."""

from __future__ import annotations

import ast
import builtins
import inspect
import math
import operator
import textwrap
from collections.abc import Callable
from typing import Any

from . import ir
from .ir import Const, Expr, KernelError, Scalar, Stmt, bool_, f32, i32, u32
from .lang import Const as ConstAnnotation
from .lang import ConstSpec, Intrinsic

_ARITH = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%"}
_BITS = {ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^", ast.LShift: "<<", ast.RShift: ">>"}
_CMP = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!="}
_FOLD: dict[str, Callable[[Any, Any], Any]] = {
    "+": lambda a, b: a + b,
    "-": lambda a, b: a - b,
    "*": lambda a, b: a * b,
    "/": lambda a, b: a / b if isinstance(a, float) else int(a / b),  # C truncation
    "%": lambda a, b: a - b * int(a / b),
    "&": lambda a, b: a & b,
    "|": lambda a, b: a | b,
    "^": lambda a, b: a ^ b,
    "<<": lambda a, b: a << b,
    ">>": lambda a, b: a >> b,
}
_COMPARE: dict[str, Callable[[Any, Any], bool]] = {
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
    "==": operator.eq,
    "!=": operator.ne,
}
_FLOAT_FNS = {"exp": 1, "log": 1, "sqrt": 1, "rsqrt": 1, "tanh": 1, "erf": 1, "sin": 1, "cos": 1}
_FLOAT_FNS |= {"floor": 1, "pow": 2}
_NUMERIC_FNS = {"abs": 1, "min": 2, "max": 2}
_IDS = {"global_id": "global", "local_id": "local", "group_id": "group"}
_RANGES = {i32: (-(2**31), 2**31 - 1), u32: (0, 2**32 - 1)}


class KernelDef:
    """A kernel as written in Python; :meth:`specialize` binds its constants and yields IR."""

    def __init__(self, fn: Callable[..., Any], workgroup: tuple[int | str, ...]) -> None:
        if not 1 <= len(workgroup) <= 3:
            raise KernelError(f"kernel {fn.__name__}: workgroup has 1 to 3 dimensions, got {workgroup}")
        self.fn, self.name, self.workgroup = fn, fn.__name__, workgroup
        lines, self.first_line = inspect.getsourcelines(fn)
        self.file = inspect.getsourcefile(fn) or "<unknown>"
        tree = ast.parse(textwrap.dedent("".join(lines)))
        if not isinstance(tree.body[0], ast.FunctionDef):
            raise KernelError(f"{self.file}:{self.first_line}: @kernel decorates a plain function")
        self.tree = tree.body[0]
        self.constants: dict[str, ConstSpec] = {
            a.arg: self.annotation(a.annotation, {})
            for a in self.tree.args.args
            if isinstance(a.annotation, ast.Subscript)
            and self.annotation(a.annotation.value, {}) is ConstAnnotation
        }
        self._cache: dict[tuple[tuple[str, Any], ...], ir.Kernel] = {}
        if not self.constants:
            self.specialize()

    def specialize(self, **consts: Any) -> ir.Kernel:
        """The IR of this kernel with its ``Const`` parameters bound to ``consts``."""
        key = tuple(sorted(consts.items(), key=lambda kv: kv[0]))
        if key not in self._cache:
            if missing := sorted(set(self.constants) - set(consts)):
                raise KernelError(f"kernel {self.name} needs constants {missing}")
            if extra := sorted(set(consts) - set(self.constants)):
                raise KernelError(f"kernel {self.name} has no constants {extra}")
            for name, value in consts.items():
                self.constants[name].check(name, value)
            self._cache[key] = _Parser(self, consts).kernel()
        return self._cache[key]

    def annotation(self, node: ast.expr, consts: dict[str, Any]) -> Any:
        try:
            return _static(node, consts, self.fn.__globals__)
        except (KeyError, AttributeError, TypeError) as e:
            line = self.first_line + node.lineno - 1
            raise KernelError(f"{self.file}:{line}: cannot resolve annotation {ast.unparse(node)}") from e

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise KernelError(f"kernel {self.name} runs on a device: specialize() it and render the IR")

    def __repr__(self) -> str:
        return f"<kernel {self.name} at {self.file}:{self.first_line}>"


def kernel(*, workgroup: tuple[int | str, ...]) -> Callable[[Callable[..., Any]], KernelDef]:
    """Decorator: a kernel in the kernel language; workgroup entries are ints or ``Const`` names."""
    return lambda fn: KernelDef(fn, workgroup)


def _static(node: ast.expr, consts: dict[str, Any], env: dict[str, Any]) -> Any:
    """Evaluate a name, attribute, subscript or literal without running the function."""
    match node:
        case ast.Name(id=name):
            if name in consts:
                return consts[name]
            return env[name] if name in env else getattr(builtins, name)
        case ast.Attribute(value=value, attr=attr):
            return getattr(_static(value, consts, env), attr)
        case ast.Subscript(value=value, slice=index):
            return _static(value, consts, env)[_static(index, consts, env)]
        case ast.Constant(value=value):
            return value
    raise TypeError(ast.unparse(node))


class _Parser:
    """Turns one function body into IR, tracking scopes, types and buffer use."""

    def __init__(self, kdef: KernelDef, consts: dict[str, Any]) -> None:
        self.kdef, self.consts = kdef, consts
        self.params: dict[str, ir.Param] = {}
        self.shared: dict[str, ir.SharedArray] = {}
        self.scopes: list[dict[str, Scalar]] = [{}]
        self.atomic: set[str] = set()
        self.plain: set[str] = set()
        self.seen: set[Scalar] = set()

    def error(self, node: ast.AST, message: str) -> KernelError:
        line = self.kdef.first_line + getattr(node, "lineno", 1) - 1
        return KernelError(f"{self.kdef.file}:{line}: in kernel {self.kdef.name}: {message}")

    def kernel(self) -> ir.Kernel:
        tree = self.kdef.tree
        args = tree.args
        if args.vararg or args.kwarg or args.kwonlyargs or args.posonlyargs or args.defaults:
            raise self.error(tree, "parameters are plain, annotated and without defaults")
        for a in args.args:
            if a.annotation is None:
                raise self.error(a, f"parameter {a.arg} has no type annotation")
            kind = self.kdef.annotation(a.annotation, self.consts)
            if isinstance(kind, ConstSpec):
                continue
            if not isinstance(kind, Scalar | ir.BufferType) or kind == bool_:
                raise self.error(a, f"parameter {a.arg}: {ast.unparse(a.annotation)} is not a kernel type")
            self.seen.add(kind if isinstance(kind, Scalar) else kind.elem)
            self.params[a.arg] = ir.Param(a.arg, kind)
        body = self.block(tree.body, scoped=False)
        if both := sorted(self.atomic & self.plain):
            raise self.error(tree, f"buffers {both} are used both by atomic_add and by plain indexing")
        params = tuple(ir.Param(p.name, p.type, p.name in self.atomic) for p in self.params.values())
        across, down, deep = (*(self.workgroup_size(w) for w in self.kdef.workgroup), 1, 1)[:3]
        return ir.Kernel(
            name=self.kdef.name,
            params=params,
            shared=tuple(self.shared.values()),
            body=body,
            workgroup=(across, down, deep),
            source=f"{self.kdef.file}:{self.kdef.first_line}",
            dtypes=frozenset(self.seen),
        )

    def workgroup_size(self, w: int | str) -> int:
        size = self.consts.get(w) if isinstance(w, str) else w
        if not isinstance(size, int) or isinstance(size, bool) or size < 1:
            raise self.error(self.kdef.tree, f"workgroup size {w!r} is not a positive int or int constant")
        return size

    # Statements.
    def block(
        self, nodes: list[ast.stmt], scoped: bool = True, names: dict[str, Scalar] | None = None
    ) -> tuple[Stmt, ...]:
        if scoped:
            self.scopes.append(dict(names or {}))
        out: list[Stmt] = []
        for node in nodes:
            out.extend(self.stmt(node))
        if scoped:
            self.scopes.pop()
        return tuple(out)

    def stmt(self, node: ast.stmt) -> list[Stmt]:
        match node:
            case ast.Expr(value=ast.Constant(value=str())) | ast.Pass():
                return []
            case ast.Expr(value=ast.Call() as call) if self.target(call.func) == Intrinsic("barrier"):
                if call.args:
                    raise self.error(node, "barrier() takes no arguments")
                return [ir.Barrier()]
            case ast.Expr(value=ast.Call() as call) if self.target(call.func) == Intrinsic("atomic_add"):
                return [ir.Eval(self.expr(call))]
            case ast.Assign(targets=[ast.Name(id=name)], value=ast.Call() as call) if self.target(
                call.func
            ) == Intrinsic("shared"):
                self.declare_shared(node, name, call)
                return []
            case ast.Assign(targets=[target], value=value):
                return [self.assign(node, target, self.expr(value))]
            case ast.AnnAssign(target=ast.Name(id=name) as target, annotation=ann, value=value) if value:
                dtype = self.kdef.annotation(ann, self.consts)
                if not isinstance(dtype, Scalar) or self.lookup(name):
                    raise self.error(node, f"{name}: {ast.unparse(ann)} must declare a new scalar variable")
                return [self.assign(node, target, self.coerce(node, self.expr(value), dtype))]
            case ast.AugAssign(target=ast.Name() | ast.Subscript() as target, op=op, value=value):
                current = self.expr(target)
                return [self.assign(node, target, self.binary(node, op, current, self.expr(value)))]
            case ast.If(test=test, body=body, orelse=orelse):
                cond = self.condition(test)
                if isinstance(cond, Const):  # a branch on constants: the other side is not parsed
                    taken = body if cond.value else orelse
                    return [ir.If(Const(True, bool_), self.block(taken), ())] if taken else []
                return [ir.If(cond, self.block(body), self.block(orelse))]
            case ast.While(test=test, body=body, orelse=[]):
                return [ir.While(self.condition(test), self.block(body))]
            case ast.For(target=ast.Name(id=var), iter=ast.Call() as call, body=body, orelse=[]) if (
                self.target(call.func) is range
            ):
                return [self.loop(node, var, call, body)]
            case ast.Break():
                return [ir.Break()]
            case ast.Continue():
                return [ir.Continue()]
            case ast.Return(value=None):
                return [ir.Return()]
        raise self.error(
            node, f"{type(node).__name__} statement `{_line(node)}` is not in the kernel language"
        )

    def assign(self, node: ast.stmt, target: ast.expr, value: Expr) -> Stmt:
        match target:
            case ast.Name(id=name):
                if name in self.params or name in self.shared or name in self.consts:
                    raise self.error(node, f"cannot assign to {name}: it is a parameter or shared array")
                if (dtype := self.lookup(name)) is not None:
                    return ir.Assign(name, self.coerce(node, value, dtype))
                self.scopes[-1][name] = value.dtype
                return ir.Declare(name, value)
            case ast.Subscript(value=ast.Name(id=name), slice=index):
                elem = self.array(node, name, writing=True)
                return ir.Store(name, self.index(index), self.coerce(node, value, elem))
        raise self.error(node, f"cannot assign to `{ast.unparse(target)}`; assign one name or element")

    def declare_shared(self, node: ast.stmt, name: str, call: ast.Call) -> None:
        if len(self.scopes) != 1 or len(call.args) != 2:
            raise self.error(node, "shared(dtype, size) is declared at the top level of the kernel")
        dtype = _static(call.args[0], self.consts, self.kdef.fn.__globals__)
        size = self.expr(call.args[1])
        if not isinstance(dtype, Scalar) or not isinstance(size, Const) or not size.dtype.is_int:
            raise self.error(node, "shared(dtype, size) needs a Scalar and a constant int size")
        if name in self.shared or name in self.params or self.lookup(name):
            raise self.error(node, f"{name} is already defined")
        self.seen.add(dtype)
        self.shared[name] = ir.SharedArray(name, dtype, int(size.value))

    def loop(self, node: ast.For, var: str, call: ast.Call, body: list[ast.stmt]) -> ir.For:
        args = [self.expr(a) for a in call.args]
        if not 1 <= len(args) <= 3 or call.keywords:
            raise self.error(node, "range() takes 1 to 3 positional arguments")
        start, stop = (Const(0, i32), args[0]) if len(args) == 1 else args[:2]
        step = args[2] if len(args) == 3 else Const(1, i32)
        if not (isinstance(step, Const) and step.dtype.is_int and step.value != 0):
            raise self.error(node, "the step of range() is a non-zero constant int")
        start, stop = self.unify(node, start, stop, "range()")
        if not start.dtype.is_int:
            raise self.error(node, f"range() bounds are integers, got {start.dtype}")
        if self.lookup(var) or var in self.params:
            raise self.error(node, f"loop variable {var} is already defined")
        return ir.For(var, start, stop, int(step.value), self.block(body, names={var: start.dtype}))

    def condition(self, node: ast.expr) -> Expr:
        cond = self.expr(node)
        if cond.dtype != bool_:
            raise self.error(node, f"a condition must be bool, got {cond.dtype}; compare explicitly")
        return cond

    # Expressions.
    def expr(self, node: ast.expr) -> Expr:
        e = self._expr(node)
        self.seen.add(e.dtype)
        return e

    def _expr(self, node: ast.expr) -> Expr:
        match node:
            case ast.Constant(value=bool() as v):
                return Const(v, bool_)
            case ast.Constant(value=int() as v):
                return Const(v, i32)
            case ast.Constant(value=float() as v) if math.isfinite(v):
                return Const(v, f32)
            case ast.Name(id=name):
                return self.name(node, name)
            case ast.BinOp(left=a, op=op, right=b):
                return self.binary(node, op, self.expr(a), self.expr(b))
            case ast.UnaryOp(op=ast.UAdd(), operand=x):
                return self.expr(x)
            case ast.UnaryOp(op=op, operand=x):
                return self.unary(node, op, self.expr(x))
            case ast.Compare(left=left, ops=ops, comparators=rights):
                terms, lhs = [], self.expr(left)
                for cmp, right in zip(ops, rights, strict=True):
                    rhs = self.expr(right)
                    terms.append(self.compare(node, cmp, lhs, rhs))
                    lhs = rhs
                return self.logical(node, "&&", terms)
            case ast.BoolOp(op=op, values=values):
                return self.logical(node, "&&" if isinstance(op, ast.And) else "||", map(self.expr, values))
            case ast.IfExp(test=test, body=a, orelse=b):
                a2, b2 = self.unify(node, self.expr(a), self.expr(b), "a conditional expression")
                cond = self.condition(test)
                if isinstance(cond, Const):  # both sides typed alike, as when chosen at run time
                    return a2 if cond.value else b2
                return ir.Select(cond, a2, b2, a2.dtype)
            case ast.Subscript(value=ast.Name(id=name), slice=index):
                return ir.Load(name, self.index(index), self.array(node, name, writing=False))
            case ast.Call(func=func, args=args, keywords=[]):
                return self.call(node, self.target(func), args)
        raise self.error(node, f"`{ast.unparse(node)}` is not in the kernel language")

    def name(self, node: ast.expr, name: str) -> Expr:
        if (dtype := self.lookup(name)) is not None:
            return ir.Var(name, dtype)
        if name in self.params:
            kind = self.params[name].type
            if not isinstance(kind, Scalar):
                raise self.error(node, f"buffer {name} is not a value; index it: {name}[i]")
            return ir.Var(name, kind)
        value = self.consts.get(name, self.kdef.fn.__globals__.get(name))
        if isinstance(value, bool):
            return Const(value, bool_)
        if isinstance(value, int):
            return Const(value, i32)
        if isinstance(value, float) and math.isfinite(value):
            return Const(value, f32)
        raise self.error(node, f"unknown name {name} (only locals, parameters and number constants)")

    def lookup(self, name: str) -> Scalar | None:
        return next((s[name] for s in reversed(self.scopes) if name in s), None)

    def target(self, func: ast.expr) -> Any:
        if isinstance(func, ast.Name) and (self.lookup(func.id) or func.id in self.params):
            return None
        try:
            return _static(func, self.consts, self.kdef.fn.__globals__)
        except (KeyError, AttributeError, TypeError):
            return None

    def array(self, node: ast.expr | ast.stmt, name: str, writing: bool) -> Scalar:
        if name in self.shared:
            return self.shared[name].dtype
        kind = self.params[name].type if name in self.params else None
        if not isinstance(kind, ir.BufferType):
            raise self.error(node, f"{name} is not a buffer or shared array")
        if writing and not kind.writable:
            raise self.error(node, f"buffer {name} is read-only (ReadBuffer); declare it Buffer to write")
        self.plain.add(name)
        return kind.elem

    def index(self, node: ast.expr) -> Expr:
        if isinstance(node, ast.Slice | ast.Tuple):
            raise self.error(node, "buffers take one integer index; slices and tuples are not supported")
        i = self.expr(node)
        if not i.dtype.is_int:
            raise self.error(node, f"an index must be i32 or u32, got {i.dtype}")
        return i

    def call(self, node: ast.Call, fn: Any, args: list[ast.expr]) -> Expr:
        what = getattr(fn, "name", getattr(fn, "__name__", ast.unparse(node.func)))
        if fn is builtins.bool:
            fn = bool_
        if isinstance(fn, Scalar):
            if len(args) != 1:
                raise self.error(node, f"the cast {fn}(x) takes one argument")
            return self.cast(node, self.expr(args[0]), fn)
        if fn in (builtins.abs, builtins.min, builtins.max):
            fn = Intrinsic(fn.__name__)
        if not isinstance(fn, Intrinsic) or fn.name in ("barrier", "shared"):
            raise self.error(node, f"call to {what} is not in the kernel language here")
        if fn.name in _IDS:
            if (
                len(args) != 1
                or not isinstance(axis := self.expr(args[0]), Const)
                or axis.value not in (0, 1, 2)
            ):
                raise self.error(node, f"{fn.name}(axis) takes a constant axis 0, 1 or 2")
            return ir.Id(_IDS[fn.name], int(axis.value))
        if fn.name == "atomic_add":
            return self.atomic_add(node, args)
        if fn.name == "load_byte":
            return self.load_byte(node, args)
        if fn.name == "half_to_float":
            if len(args) != 1:
                raise self.error(node, "half_to_float(bits) takes one argument")
            return _half_to_float(self.coerce(node, self.expr(args[0]), u32))
        values = [self.expr(a) for a in args]
        if fn.name == "select":
            if len(values) != 3:
                raise self.error(node, "select(cond, a, b) takes three arguments")
            a, b = self.unify(node, values[1], values[2], "select()")
            return ir.Select(self.coerce(node, values[0], bool_), a, b, a.dtype)
        return self.math(node, fn.name, values)

    def math(self, node: ast.AST, name: str, values: list[Expr]) -> Expr:
        arity = _FLOAT_FNS.get(name) or _NUMERIC_FNS[name]
        if len(values) != arity:
            raise self.error(node, f"{name}() takes {arity} argument(s)")
        if arity == 2:
            values = list(self.unify(node, values[0], values[1], f"{name}()"))
        if name in _FLOAT_FNS:
            values = [self.coerce(node, v, f32) if _int_const(v) else v for v in values]
        if values[0].dtype == bool_ or (name in _FLOAT_FNS and not values[0].dtype.is_float):
            raise self.error(node, f"{name}() does not take {values[0].dtype}")
        return ir.Call(name, tuple(values), values[0].dtype)

    def atomic_add(self, node: ast.Call, args: list[ast.expr]) -> Expr:
        name = ast.unparse(args[0]) if len(args) == 3 else ""
        kind = self.params[name].type if name in self.params else None
        if not isinstance(kind, ir.BufferType) or not kind.writable or not kind.elem.is_int:
            raise self.error(node, "atomic_add(buffer, index, value) needs a writable i32 or u32 Buffer")
        self.atomic.add(name)
        value = self.coerce(node, self.expr(args[2]), kind.elem)
        return ir.AtomicAdd(name, self.index(args[1]), value, kind.elem)

    def load_byte(self, node: ast.Call, args: list[ast.expr]) -> Expr:
        name = ast.unparse(args[0]) if len(args) == 2 else ""
        kind = self.params[name].type if name in self.params else None
        if not isinstance(kind, ir.BufferType) or kind.elem != u32:
            raise self.error(node, "load_byte(words, index) needs a u32 buffer and a byte index")
        self.array(node, name, writing=False)
        i = self.coerce(node, self.index(args[1]), u32)
        word = ir.Load(name, ir.Binary(">>", i, Const(2, u32), u32), u32)
        shift = ir.Binary("<<", ir.Binary("&", i, Const(3, u32), u32), Const(3, u32), u32)
        return ir.Binary("&", ir.Binary(">>", word, shift, u32), Const(255, u32), u32)

    def cast(self, node: ast.expr, x: Expr, dtype: Scalar) -> Expr:
        if x.dtype == dtype:
            return x
        if isinstance(x, Const):
            value = {"f": float, "b": bool}.get(dtype.kind, int)(x.value)
            if dtype in _RANGES and not _RANGES[dtype][0] <= value <= _RANGES[dtype][1]:
                raise self.error(node, f"constant {value} does not fit {dtype}")
            return Const(value, dtype)
        return ir.Cast(x, dtype)

    def coerce(self, node: ast.AST, x: Expr, dtype: Scalar) -> Expr:
        """``x`` as ``dtype``: only literals and constants adapt, never typed values."""
        if x.dtype == dtype:
            return x
        if isinstance(x, Const) and x.dtype != bool_ and dtype != bool_:
            if dtype.is_float:
                return Const(float(x.value), dtype)
            if isinstance(x.value, int):
                low, high = _RANGES[dtype]
                if not low <= x.value <= high:
                    raise self.error(node, f"constant {x.value} does not fit {dtype}")
                return Const(x.value, dtype)
        raise self.error(node, f"expected {dtype}, got {x.dtype}; cast explicitly, e.g. {dtype}(...)")

    def unify(self, node: ast.AST, a: Expr, b: Expr, what: str) -> tuple[Expr, Expr]:
        if a.dtype == b.dtype:
            return a, b
        a_const, b_const = isinstance(a, Const), isinstance(b, Const)
        if a_const and b_const:  # floats win over ints, explicit types over the literal defaults
            target = max(a.dtype, b.dtype, key=lambda d: (d.is_float, d not in (i32, f32)))
            return self.coerce(node, a, target), self.coerce(node, b, target)
        if a_const:
            return self.coerce(node, a, b.dtype), b
        if b_const:
            return a, self.coerce(node, b, a.dtype)
        raise self.error(
            node, f"{what} mixes {a.dtype} and {b.dtype}; cast one side explicitly, e.g. {a.dtype}(...)"
        )

    def binary(self, node: ast.AST, op: ast.operator, a: Expr, b: Expr) -> Expr:
        if isinstance(op, ast.Pow):
            return self.math(node, "pow", [a, b])
        symbol = _ARITH.get(type(op)) or _BITS.get(type(op))
        if symbol is None:
            raise self.error(node, f"operator {type(op).__name__} is not in the kernel language")
        a, b = self.unify(node, a, b, f"`{symbol}`")
        dtype = a.dtype
        if dtype == bool_ or (symbol in _BITS.values() and not dtype.is_int):
            raise self.error(node, f"`{symbol}` does not take {dtype}")
        if symbol == "/" and not dtype.is_float:
            raise self.error(node, "`/` is float division; use `//` for integers")
        if symbol in ("//", "%") and not dtype.is_int:
            raise self.error(node, f"`{symbol}` is an integer operator; use floor(a / b) for floats")
        symbol = "/" if symbol == "//" else symbol
        if isinstance(a, Const) and isinstance(b, Const) and symbol in _FOLD:
            if symbol in ("/", "%") and b.value == 0:
                raise self.error(node, "division by the constant zero")
            return self.coerce(
                node, Const(_FOLD[symbol](a.value, b.value), i32 if dtype.is_int else f32), dtype
            )
        return ir.Binary(symbol, a, b, dtype)

    def unary(self, node: ast.AST, op: ast.unaryop, x: Expr) -> Expr:
        if isinstance(op, ast.Not):
            x = self.coerce(node, x, bool_)
            return Const(not x.value, bool_) if isinstance(x, Const) else ir.Unary("!", x, bool_)
        if isinstance(op, ast.USub) and x.dtype != bool_:
            if isinstance(x, Const):
                return self.coerce(node, Const(-x.value, i32 if x.dtype.is_int else f32), x.dtype)
            if x.dtype == u32:
                raise self.error(node, "unary minus on u32; cast to i32 first")
            return ir.Unary("-", x, x.dtype)
        if isinstance(op, ast.Invert) and x.dtype.is_int:
            return ir.Unary("~", x, x.dtype)
        raise self.error(node, f"{type(op).__name__} does not take {x.dtype}")

    def compare(self, node: ast.AST, op: ast.cmpop, a: Expr, b: Expr) -> Expr:
        symbol = _CMP.get(type(op))
        if symbol is None:
            raise self.error(node, f"comparison {type(op).__name__} is not in the kernel language")
        a, b = self.unify(node, a, b, f"`{symbol}`")
        if a.dtype == bool_ and symbol not in ("==", "!="):
            raise self.error(node, f"`{symbol}` does not take bool")
        if isinstance(a, Const) and isinstance(b, Const):
            return Const(bool(_COMPARE[symbol](a.value, b.value)), bool_)
        return ir.Binary(symbol, a, b, bool_)

    def logical(self, node: ast.AST, symbol: str, values: Any) -> Expr:
        identity = symbol == "&&"  # True for "and", False for "or"; the other constant decides
        terms = [self.coerce(node, v, bool_) for v in values]
        if any(isinstance(t, Const) and t.value != identity for t in terms):
            return Const(not identity, bool_)
        terms = [t for t in terms if not isinstance(t, Const)]
        if not terms:
            return Const(identity, bool_)
        out = terms[0]
        for t in terms[1:]:
            out = ir.Binary(symbol, out, t, bool_)
        return out


def _half_to_float(bits: Expr) -> Expr:
    """The float16 in the low 16 bits of ``bits`` as f32, exactly: the significand (with its
    implicit bit where the exponent is not 0) times a power of two built as an integer, so that
    no device flushes the subnormals to zero. Infinities and NaNs, which GGUF scales never are,
    come out as large finite values."""

    def u(op: str, a: Expr, b: Expr | int) -> Expr:
        return ir.Binary(op, a, Const(b, u32) if isinstance(b, int) else b, u32)

    exponent = u("&", u(">>", bits, 10), 31)
    implicit = ir.Select(ir.Binary(">", exponent, Const(0, u32), bool_), Const(1024, u32), Const(0, u32), u32)
    significand = ir.Cast(u("|", u("&", bits, 1023), implicit), f32)
    scale = ir.Cast(ir.Binary("<<", Const(1, u32), ir.Call("max", (exponent, Const(1, u32)), u32), u32), f32)
    magnitude = ir.Binary("*", ir.Binary("*", significand, scale, f32), Const(2.0**-25, f32), f32)
    negative = ir.Binary("!=", u("&", bits, 0x8000), Const(0, u32), bool_)
    return ir.Select(negative, ir.Unary("-", magnitude, f32), magnitude, f32)


def _int_const(x: Expr) -> bool:
    return isinstance(x, Const) and x.dtype.is_int


def _line(node: ast.AST) -> str:
    return ast.unparse(node).splitlines()[0]
