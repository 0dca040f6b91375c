"""How outputs are compared: the rules of onnx's own backend test runner.

As ``onnx.backend.test.runner.Runner.assert_similar_outputs`` does: the same number of
outputs; sequences element by element; for tensors the same shape, then strings
(object arrays) exactly, every other dtype the same dtype and ``assert_allclose`` within
the case's ``rtol`` / ``atol`` (NaN matches NaN), bfloat16 through float32 with ``rtol``
at least two bfloat16 ulps. Stricter than onnx in three places that onnx leaves to chance:
a sequence must have the expected length, an absent optional output must be absent, and
integers and booleans must be equal (a relative tolerance would accept a BitCast or a
bit shift wrong in its low bits, and no correct integer result is approximate).
"""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np

from .case import Runs

BFLOAT16 = np.dtype(ml_dtypes.bfloat16)
#: onnx's runner allows bfloat16 results two ulps (2**-7 each) of relative error.
BFLOAT16_RTOL = 2.0**-6
#: ml_dtypes' sub-byte integers, which numpy sees as opaque ("V") dtypes.
SMALL_INTEGERS = frozenset(
    np.dtype(getattr(ml_dtypes, name))
    for name in ("int2", "uint2", "int4", "uint4")
    if hasattr(ml_dtypes, name)
)


def compare_runs(expected: Runs, got: Runs, rtol: float, atol: float) -> str | None:
    """Why ``got`` differs from ``expected`` (one list of outputs per run), or None."""
    if len(got) != len(expected):
        return f"{len(got)} runs, expected {len(expected)}"
    for index, (want, have) in enumerate(zip(expected, got, strict=True)):
        where = f"data set {index}: " if len(expected) > 1 else ""
        problem = compare_outputs(want, have, rtol, atol)
        if problem:
            return where + problem
    return None


def compare_outputs(expected: list[Any], got: list[Any], rtol: float, atol: float) -> str | None:
    """Why one run's outputs differ from the expected ones, or None."""
    if len(got) != len(expected):
        return f"{len(got)} outputs, expected {len(expected)}"
    for index, (want, have) in enumerate(zip(expected, got, strict=True)):
        try:
            assert_similar(want, have, rtol, atol, f"output {index}")
        except AssertionError as error:
            return str(error).strip()
    return None


def assert_similar(want: Any, have: Any, rtol: float, atol: float, where: str) -> None:
    """Raise AssertionError, naming ``where``, when ``have`` is not close enough to ``want``."""
    if isinstance(want, list | tuple):
        _assert_sequence(want, have, rtol, atol, where)
    elif want is None:
        if have is not None:
            raise AssertionError(f"{where} is {_kind(have)}, expected an absent optional value")
    else:
        _assert_tensor(np.asarray(want), have, rtol, atol, where)


def _assert_sequence(
    want: list[Any] | tuple[Any, ...], have: Any, rtol: float, atol: float, where: str
) -> None:
    if not isinstance(have, list | tuple):
        raise AssertionError(f"{where} is {_kind(have)}, expected a sequence")
    if len(have) != len(want):
        raise AssertionError(f"{where} is a sequence of {len(have)}, expected {len(want)}")
    for index, (item, got) in enumerate(zip(want, have, strict=True)):
        assert_similar(item, got, rtol, atol, f"{where}[{index}]")


def _assert_tensor(want: np.ndarray, have: Any, rtol: float, atol: float, where: str) -> None:
    if not isinstance(have, np.ndarray | np.generic):
        raise AssertionError(f"{where} is {_kind(have)}, expected a {want.dtype} array")
    if have.shape != want.shape:
        raise AssertionError(f"{where} has shape {list(have.shape)}, expected {list(want.shape)}")
    if want.dtype == object:
        np.testing.assert_array_equal(have, want, err_msg=where)
        return
    if have.dtype != want.dtype:
        raise AssertionError(f"{where} has dtype {have.dtype}, expected {want.dtype}")
    if is_exact(want.dtype):
        np.testing.assert_array_equal(have, want, err_msg=where)
        return
    if want.dtype == BFLOAT16:
        rtol = max(rtol, BFLOAT16_RTOL)
        have, want = have.astype(np.float32), want.astype(np.float32)
    np.testing.assert_allclose(have, want, rtol=rtol, atol=atol, err_msg=where)


def is_exact(dtype: np.dtype) -> bool:
    """Whether values of ``dtype`` must match exactly: integers and booleans."""
    return dtype.kind in "biu" or dtype in SMALL_INTEGERS


def _kind(value: Any) -> str:
    return "absent (None)" if value is None else f"a {type(value).__name__}"
