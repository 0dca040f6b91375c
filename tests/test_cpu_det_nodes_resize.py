"""Nearest Resize on the CPU against onnxruntime: the last two axes gathered by one compiled loop
(PP-OCRv4 det's 2x, 4x and 8x upsampling), other axes and element types around it.

Nearest resizing copies elements, so results must be equal. Element types onnxruntime's CPU
Resize does not take (float64, int64, uint16) are checked against onnx's reference evaluator,
bool against onnxruntime on the same values as uint8. The scales avoid source coordinates an
ulp from a rounding tie: in float32, 18 / 2.4 is 7.4999995, which rounds to 7, where
onnxruntime 1.32 picks 8 (asymmetric, round_prefer_ceil).
"""

from __future__ import annotations

import numpy as np
import pytest
import spawnml
from onnx.reference import ReferenceEvaluator

from tests.ops.conftest import assert_close, make_model, run_both

EXACT = {"rtol": 0.0, "atol": 0.0}

rng = np.random.default_rng(5)


def values(*shape: int, dtype=np.float32) -> np.ndarray:
    if np.dtype(dtype) == np.bool_:
        return rng.random(shape) < 0.5
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        return rng.integers(max(info.min, -1000), min(info.max, 1000), shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def resize_model(x: np.ndarray, scales=None, sizes=None, roi=None, opset: int = 19, **attrs):
    """A Resize of graph input ``x`` with constant ``roi``, ``scales`` and ``sizes``."""
    constants = {"roi": np.asarray(roi if roi is not None else [], np.float32)}
    if scales is not None:
        constants["scales"] = np.asarray(scales, np.float32)
    else:
        constants["scales"] = np.zeros(0, np.float32)
        constants["sizes"] = np.asarray(sizes, np.int64)
    return make_model("Resize", {"x": x}, initializers=constants, opset=opset, mode="nearest", **attrs)


def check(x: np.ndarray, scales=None, sizes=None, roi=None, opset: int = 19, **attrs) -> None:
    ours, reference = run_both(resize_model(x, scales, sizes, roi, opset, **attrs), {"x": x})
    assert_close(ours, reference, **EXACT)


DET = {"coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"}


@pytest.mark.parametrize("factor", [2, 4, 8])
def test_det_upsampling(factor):
    check(values(1, 6, 5, 7), [1, 1, factor, factor], **DET)


@pytest.mark.parametrize(
    "transform", ["half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel", "half_pixel_symmetric"]
)
@pytest.mark.parametrize("nearest_mode", ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"])
@pytest.mark.parametrize("scales", [[1, 1, 1.7, 2.3], [1, 1, 0.6, 0.45], [1, 1, 3, 0.5]])
def test_nearest_modes_and_transforms(transform, nearest_mode, scales):
    check(values(2, 3, 6, 9), scales, coordinate_transformation_mode=transform, nearest_mode=nearest_mode)


@pytest.mark.parametrize("sizes", [[1, 2, 13, 4], [1, 2, 1, 1], [1, 2, 5, 6]])
def test_sizes(sizes):
    check(values(1, 2, 5, 6), sizes=sizes)


@pytest.mark.parametrize(
    "shape, scales",
    [
        ((7,), [2.5]),
        ((5, 6), [2, 0.5]),
        ((3, 5, 6), [1, 1, 2]),
        ((3, 5, 6), [2, 2, 1]),
        ((2, 3, 2, 4, 5), [2, 1, 1.5, 2, 2]),  # leading axes gathered by numpy, then the loop
    ],
)
def test_ranks_and_leading_axes(shape, scales):
    check(values(*shape), scales, **DET)


@pytest.mark.parametrize("axes, scales", [([2], [2.0]), ([-1], [3.0]), ([3, 2], [0.5, 2.0])])
def test_axes(axes, scales):
    check(values(2, 3, 4, 6), scales, opset=18, axes=axes)


def test_crop_and_resize():
    x = values(1, 2, 6, 8)
    roi = [0, 0, 0.2, -0.1, 1, 1, 0.9, 1.3]
    check(
        x,
        sizes=[1, 2, 5, 7],
        roi=roi,
        coordinate_transformation_mode="tf_crop_and_resize",
        extrapolation_value=-7.0,
    )


@pytest.mark.parametrize("dtype", [np.float16, np.int8, np.uint8, np.int32])
def test_element_types(dtype):
    check(values(1, 3, 4, 5, dtype=dtype), [1, 1, 2, 1.5])


def ours(model, x: np.ndarray) -> list[np.ndarray]:
    return spawnml.InferenceSession(model.SerializeToString(), providers=["cpu"]).run(None, {"x": x})


@pytest.mark.parametrize("dtype", [np.float64, np.int64, np.uint16])
def test_element_types_onnxruntime_refuses(dtype):
    x = values(1, 3, 4, 5, dtype=dtype)
    model = resize_model(x, [1, 1, 2, 1.5])
    assert_close(ours(model, x), ReferenceEvaluator(model).run(None, {"x": x}), **EXACT)


def test_bool_as_onnxruntime_resizes_the_same_bytes():
    """Neither onnxruntime nor onnx's reference evaluator resizes bool: the same values as uint8 do."""
    x = values(1, 3, 4, 5, dtype=np.bool_)
    (got,) = ours(resize_model(x, [1, 1, 2, 1.5]), x)
    as_bytes = x.astype(np.uint8)
    _, (want,) = run_both(resize_model(as_bytes, [1, 1, 2, 1.5]), {"x": as_bytes})
    assert got.dtype == np.bool_
    np.testing.assert_array_equal(got.astype(np.uint8), want)


def test_empty_planes():
    check(np.zeros((1, 0, 4, 4), np.float32), [1, 1, 2, 2], **DET)


def test_upsample_9():
    x = values(1, 2, 3, 4)
    model = make_model(
        "Upsample", {"x": x}, initializers={"scales": np.array([1, 1, 2, 3], np.float32)}, opset=9
    )
    ours, reference = run_both(model, {"x": x})
    assert_close(ours, reference, **EXACT)
