"""The kernel front end: IR shape, type rules, constants, and errors that name file and line."""

from __future__ import annotations

import pytest
from spawnml.errors import SpawnMLError
from spawnml.kernel import (
    Buffer,
    Const,
    KernelError,
    ReadBuffer,
    Scalar,
    atomic_add,
    exp,
    f16,
    f32,
    global_id,
    i32,
    ir,
    kernel,
    load_byte,
    u32,
)
from spawnml.kernel.lang import T
from spawnml.kernel.library import add, matmul, sum_partial


def test_add_builds_typed_ir():
    k = add.specialize(T=f32)
    assert [p.name for p in k.params] == ["a", "b", "out", "n"]
    assert k.params[0].type == ir.BufferType(f32, writable=False)
    assert k.params[2].type == ir.BufferType(f32, writable=True)
    assert k.params[3].type == u32
    assert k.workgroup == (64, 1, 1)
    assert k.body[0] == ir.Declare("i", ir.Id("global", 0))
    store = k.body[1].body[0]
    assert isinstance(store, ir.Store) and store.value.dtype == f32
    assert k.source.endswith("elementwise.py:10")


def test_constants_specialise_dtype_and_tile():
    k16 = matmul.specialize(T=f16, TILE=8)
    assert k16.workgroup == (8, 8, 1)
    assert [s.size for s in k16.shared] == [64, 64] and k16.shared[0].dtype == f16
    assert matmul.specialize(T=f16, TILE=8) is k16  # cached per constant set
    assert sum_partial.specialize(T=f32, BLOCK=128).workgroup == (128, 1, 1)


@pytest.mark.parametrize(
    ("consts", "message"),
    [
        ({}, "needs constants"),
        ({"T": f32, "TILE": 8, "X": 1}, "has no constants"),
        ({"T": 1, "TILE": 8}, "T must be"),
    ],
)
def test_bad_constants(consts, message):
    with pytest.raises(KernelError, match=message):
        matmul.specialize(**consts)


def test_literals_adapt_but_typed_values_do_not_mix():
    @kernel(workgroup=(1,))
    def ok(x: Buffer[f32], n: u32, m: i32):
        a = x[0] * 2 + 0.5  # int and float literals take f32
        b = n + 1  # the literal takes u32
        c = m - 1
        x[1] = a + f32(b) + f32(c)

    body = ok.specialize().body
    assert [s.value.dtype for s in body[:3]] == [f32, u32, i32]
    assert body[1].value == ir.Binary("+", ir.Var("n", u32), ir.Const(1, u32), u32)


def test_constant_folding_truncates_like_c():
    @kernel(workgroup=(1,))
    def folded(x: Buffer[i32]):
        x[0] = -7 // 2 + (-7 % 2) * 10 + 3 * 4

    assert folded.specialize().body[0].value == ir.Const(-3 - 10 + 12, i32)


def test_branches_on_constants_keep_only_the_side_taken():
    @kernel(workgroup=(1,))
    def chosen(x: Buffer[f32], WIDE: Const[bool], K: Const[int]):
        if K == 2 and WIDE:
            x[0] = 1.0
        elif K == 3:
            x[0] = 5.0
        else:
            x[0] = print  # not a kernel value: parsed only when this side is taken
        x[1] = 2.0 if K > 5 else 3.0

    body = chosen.specialize(WIDE=True, K=2).body
    assert body[0] == ir.If(
        ir.Const(True, ir.bool_), (ir.Store("x", ir.Const(0, i32), ir.Const(1.0, f32)),), ()
    )
    assert body[1] == ir.Store("x", ir.Const(1, i32), ir.Const(3.0, f32))
    store = ir.Store("x", ir.Const(0, i32), ir.Const(5.0, f32))
    taken = ir.Const(True, ir.bool_)
    assert chosen.specialize(WIDE=True, K=3).body[0] == ir.If(taken, (ir.If(taken, (store,), ()),), ())
    with pytest.raises(KernelError, match="unknown name print"):
        chosen.specialize(WIDE=False, K=2)


def test_a_conditional_on_constants_keeps_the_type_of_both_sides():
    @kernel(workgroup=(1,))
    def typed(x: Buffer[u32], n: u32, FIRST: Const[bool]):
        k = 0 if FIRST else n  # the literal takes u32, as it would were FIRST known at run time
        x[0] = k

    assert typed.specialize(FIRST=True).body[0] == ir.Declare("k", ir.Const(0, u32))


def test_a_dtype_placeholder_is_bound_by_its_constant():
    @kernel(workgroup=(1,))
    def typed(x: Buffer[T], T: Const[Scalar]):
        x[0] = T(1)

    assert typed.specialize(T=i32).params[0].type == ir.BufferType(i32, writable=True)

    message = r"Buffer\[T\]: bind the placeholder with a parameter T: Const\[Scalar\]"
    with pytest.raises(KernelError, match=message):

        @kernel(workgroup=(1,))
        def unbound(x: Buffer[T]):
            x[0] = 1.0


def _error(tmp_path, source: str) -> KernelError:
    """Define a kernel from ``source`` in a real file (so its lines can be read) and catch its error."""
    env = {"Buffer": Buffer, "ReadBuffer": ReadBuffer, "f32": f32, "u32": u32, "i32": i32, "kernel": kernel}
    env |= {"global_id": global_id, "exp": exp, "atomic_add": atomic_add, "Const": Const, "Scalar": Scalar}
    env |= {"load_byte": load_byte}
    path = tmp_path / "case.py"
    path.write_text(source)
    with pytest.raises(KernelError) as info:
        exec(compile(source, str(path), "exec"), env)
    return info.value


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("x[0] = x[0] + n", "`+` mixes f32 and u32; cast one side explicitly"),
        ("x[0] = 1.0 if n else 0.0", "condition must be bool, got u32"),
        ("y = n\n    y = 1.5", "expected u32, got f32"),
        ("k = n // 2.0", "expected u32, got f32"),
        ("k = f32(n) // 2.0", "`//` is an integer operator"),
        ("k = n / 2", "`/` is float division"),
        ("k = exp(n)", "exp() does not take u32"),
        ("r[0] = 1.0", "buffer r is read-only"),
        ("x[0] = r", "buffer r is not a value"),
        ("k = [1, 2]", "`[1, 2]` is not in the kernel language"),
        ("with open('f') as g:\n        pass", "With statement"),
        ("k = print(n)", "call to print is not in the kernel language"),
        ("for i in range(0, n, n):\n        pass", "step of range() is a non-zero constant int"),
        ("if n > 0:\n        k = 1\n    x[0] = f32(k)", "unknown name k"),
        ("k = -n", "unary minus on u32"),
        ("k = u32(-1)", "constant -1 does not fit u32"),
        ("n = 3", "cannot assign to n"),
        ("atomic_add(x, 0, 1.0)", "needs a writable i32 or u32 Buffer"),
        ("k = global_id(n)", "constant axis"),
        ("x[0:2] = 0.0", "one integer index"),
        ("k = n if n > 0 else 2.5", "expected u32, got f32"),
        ("k = load_byte(x, n)", "load_byte(words, index) needs a u32 buffer"),
    ],
)
def test_errors_name_the_construct_file_and_line(tmp_path, body, message):
    header = "@kernel(workgroup=(1,))\ndef bad(x: Buffer[f32], r: ReadBuffer[f32], n: u32):\n"
    source = f"{header}    m = 0\n    {body}\n"
    err = _error(tmp_path, source)
    line = 4 + body.count("\n") if "for" not in body and "with" not in body else 4
    assert isinstance(err, SpawnMLError)
    assert f"{tmp_path / 'case.py'}:{line}: in kernel bad: " in str(err)
    assert message in str(err)


def test_atomic_buffers_are_only_atomic(tmp_path):
    err = _error(
        tmp_path, "@kernel(workgroup=(1,))\ndef bad(c: Buffer[u32]):\n    atomic_add(c, 0, 1)\n    c[1] = 2\n"
    )
    assert "used both by atomic_add and by plain indexing" in str(err)


def test_kernels_are_not_called_on_the_host():
    with pytest.raises(KernelError, match="runs on a device"):
        add(1, 2)
    with pytest.raises(KernelError, match="is a cast inside a kernel"):
        f32(1)
