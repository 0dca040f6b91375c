"""``integer_matmul`` is exact: int64 numpy products of the shifted values, for every type pair,
zero-point shape, batch and thread count, through the compiled dot-product loop (a few rows),
float32 BLAS (cut into runs where sums could pass 2**24) and float64 BLAS."""

from __future__ import annotations

import numpy as np
import pytest
import spawnml
from onnx import TensorProto, helper, numpy_helper
from spawnml.threads import intra_op
from spawnml_cpu.kernels.integer_product import FEW_ROWS, exact_product, integer_matmul

rng = np.random.default_rng(0)


def values(dtype: type, shape: tuple[int, ...]) -> np.ndarray:
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max + 1, shape).astype(dtype)


def reference(a, b, a_zero, b_zero) -> np.ndarray:
    za = np.zeros((), np.int64) if a_zero is None else a_zero.astype(np.int64)
    if za.ndim == 1 and za.size > 1:
        za = za[:, None]
    zb = 0 if b_zero is None else b_zero.astype(np.int64)
    return (a.astype(np.int64) - za) @ (b.astype(np.int64) - zb)


@pytest.mark.parametrize("a_type", [np.uint8, np.int8])
@pytest.mark.parametrize("b_type", [np.uint8, np.int8])
@pytest.mark.parametrize("a_shape", [(7, 33), (2, 5, 33), (33,), (FEW_ROWS, 33)])
@pytest.mark.parametrize("zeros", ["none", "scalar", "per_column"])
@pytest.mark.parametrize("threads", [1, 2])
def test_compiled_products_are_exact(a_type, b_type, a_shape, zeros, threads):
    a, b = values(a_type, a_shape), values(b_type, (33, 300))
    a_zero = None if zeros == "none" else values(a_type, ())
    b_zero = {"none": None, "scalar": values(b_type, ()), "per_column": values(b_type, (300,))}[zeros]
    with intra_op(threads):
        got = integer_matmul(a, b, a_zero, b_zero)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, reference(a, b, a_zero, b_zero))


def test_per_row_zero_points_of_a_2d_a():
    a, b = values(np.uint8, (6, 40)), values(np.int8, (40, 9))
    a_zero = values(np.uint8, (6,))
    np.testing.assert_array_equal(integer_matmul(a, b, a_zero, None), reference(a, b, a_zero, None))


@pytest.mark.parametrize(
    ("a", "b"),
    [
        (values(np.uint8, (2, 3, 8)), values(np.int8, (2, 8, 5))),  # batched b
        (values(np.int16, (3, 8)), values(np.int16, (8, 5))),  # wider than 8 bits
    ],
)
def test_other_shapes_and_types_are_exact_through_blas(a, b):
    np.testing.assert_array_equal(exact_product(a, b, None, None), reference(a, b, None, None))


@pytest.mark.parametrize("rows", [1, 40])
def test_long_sums_of_extreme_values_are_exact(rows):
    """Every term at its largest magnitude, over many more terms than float32 sums exactly at
    once (the float32 products run in pieces), and through the dot-product loop."""
    depth = 3 * 1024 + 5
    a = np.zeros((rows, depth), np.uint8)
    a[:, ::2] = 255
    b = np.full((depth, 6), -128, np.int8)
    b[1::3] = 127
    a_zero, b_zero = np.array(0, np.uint8), np.array(127, np.int8)
    expected = reference(a, b, a_zero, b_zero)
    assert np.abs(expected).max() > 1 << 24
    np.testing.assert_array_equal(integer_matmul(a, b, a_zero, b_zero), expected)


def test_constant_weights_are_converted_once_and_follow_their_zero_point():
    """A read-only b (an initializer) is converted on first use and kept; another zero point
    gets its own form, and a writeable b that changes is read afresh."""
    a, b = values(np.uint8, (12, 50)), values(np.int8, (50, 7))
    b.flags.writeable = False
    for b_zero in (np.array(0, np.int8), np.array(5, np.int8), np.array(0, np.int8)):
        np.testing.assert_array_equal(integer_matmul(a, b, None, b_zero), reference(a, b, None, b_zero))
    changing = b.copy()
    for value in (1, 2):
        changing[0] = value
        np.testing.assert_array_equal(
            integer_matmul(a, changing, None, None), reference(a, changing, None, None)
        )


@pytest.mark.parametrize(("channels", "kernel"), [(600, 1), (70, 3)])
def test_conv_integer_over_channel_runs_is_exact(channels, kernel):
    """ConvInteger with every term at its largest magnitude over more input channels than one
    float32 run sums exactly: the int64 sums of numpy's sliding windows."""
    x = np.full((1, channels, 5, 6), 255, np.uint8)
    x[:, ::2] = 0
    w = np.full((3, channels, kernel, kernel), 255, np.uint8)
    x_zero, w_zero = np.array(255, np.uint8), np.array(0, np.uint8)
    graph = helper.make_graph(
        [helper.make_node("ConvInteger", ["x", "w", "x_zero", "w_zero"], ["y"])],
        "conv",
        [helper.make_tensor_value_info("x", TensorProto.UINT8, list(x.shape))],
        [helper.make_tensor_value_info("y", TensorProto.INT32, None)],
        [
            numpy_helper.from_array(w, "w"),
            numpy_helper.from_array(x_zero, "x_zero"),
            numpy_helper.from_array(w_zero, "w_zero"),
        ],
    )
    data = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString()
    got = np.asarray(spawnml.InferenceSession(data, providers=["cpu"]).run(None, {"x": x})[0])
    windows = np.lib.stride_tricks.sliding_window_view(
        x.astype(np.int64) - 255, (kernel, kernel), axis=(2, 3)
    )
    expected = np.einsum("ncyxij,mcij->nmyx", windows, w.astype(np.int64))
    assert np.abs(expected).max() > 1 << 24
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, expected)
