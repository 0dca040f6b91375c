"""The kernel language: GPU compute kernels written once, in a typed subset of Python.

    from spawnml.kernel import Buffer, ReadBuffer, kernel, global_id, u32, f32

    @kernel(workgroup=(64,))
    def add(a: ReadBuffer[f32], b: ReadBuffer[f32], out: Buffer[f32], n: u32):
        i = global_id(0)
        if i < n:
            out[i] = a[i] + b[i]

    from spawnml.kernel.render import OpenCLRenderer
    source = OpenCLRenderer().render(add.specialize())

``Const[...]`` parameters are bound by ``specialize(NAME=value)``, so one kernel serves
every dtype and tile size; a dtype used in annotations is declared at module level as a
:class:`TypeParam` of the same name (``T = TypeParam("T")``) and bound by ``T: Const[Scalar]``.
The front end (:mod:`.frontend`) builds the IR (:mod:`.ir`); the renderers (:mod:`.render`) turn
it into WGSL, OpenCL C or CUDA C.
"""

from .frontend import KernelDef, kernel
from .ir import Kernel, KernelError, Scalar, bool_, f16, f32, f64, i32, u32
from .lang import (
    Buffer,
    Const,
    ReadBuffer,
    TypeParam,
    atomic_add,
    barrier,
    cos,
    erf,
    exp,
    floor,
    global_id,
    group_id,
    half_to_float,
    load_byte,
    local_id,
    log,
    pow,
    rsqrt,
    select,
    shared,
    sin,
    sqrt,
    tanh,
)

__all__ = [
    "Buffer",
    "Const",
    "Kernel",
    "KernelDef",
    "KernelError",
    "ReadBuffer",
    "Scalar",
    "TypeParam",
    "atomic_add",
    "barrier",
    "bool_",
    "cos",
    "erf",
    "exp",
    "f16",
    "f32",
    "f64",
    "floor",
    "global_id",
    "group_id",
    "half_to_float",
    "i32",
    "kernel",
    "load_byte",
    "local_id",
    "log",
    "pow",
    "rsqrt",
    "select",
    "shared",
    "sin",
    "sqrt",
    "tanh",
    "u32",
]
