"""Vision operators against the ONNX node tests, onnxruntime and onnx's reference evaluator:
GridSample, AffineGrid, DeformConv, RoiAlign, NonMaxSuppression, Col2Im, MaxUnpool,
CenterCropPad and ImageDecoder."""

from __future__ import annotations

import importlib.util
import io

import numpy as np
import pytest
from onnx.reference import ReferenceEvaluator
from spawnml.ir import Node
from spawnml.ops.defs.vision import SCHEMAS
from spawnml.ops.registry import OperatorRegistry
from spawnml.ops.schema import InferenceContext, TensorType

from tests.ops.conftest import assert_close
from tests.ops.test_misc import (
    assert_node_cases,
    check_reference,
    one_node,
    randn,
    refused,
    rng,
    run,
    run_spawnml,
)

#: float32 interpolation against onnxruntime (same formulas, different evaluation order).
SAMPLING = {"rtol": 1e-4, "atol": 1e-5}
#: float16 inputs, which SpawnML samples in float32.
HALF = {"rtol": 2e-3, "atol": 2e-3}


@pytest.mark.parametrize(
    "op_type",
    [
        "GridSample",
        "AffineGrid",
        "DeformConv",
        "RoiAlign",
        "NonMaxSuppression",
        "Col2Im",
        "MaxUnpool",
        "CenterCropPad",
    ],
)
def test_node_cases(op_type):
    assert_node_cases(op_type)


def test_image_decoder_node_cases():
    assert_node_cases("ImageDecoder")


# ---------------------------------------------------------------------------- GridSample


def _grid(*shape: int, reach: float = 1.3) -> np.ndarray:
    """Normalized sampling points, some outside ``[-1, 1]`` to exercise the padding modes."""
    return rng.uniform(-reach, reach, shape).astype(np.float32)


def _grid_sample(check, inputs: dict, opset: int, **attrs) -> None:
    """Against onnxruntime, except cubic sampling with border padding: there onnxruntime
    clamps both coordinates when either leaves the image, ONNX's reference (followed here)
    clamps each coordinate on its own. The reference knows only the opset-20 mode names."""
    model, feeds = one_node("GridSample", inputs, opset=opset, **attrs)
    if attrs["mode"] not in ("cubic", "bicubic") or attrs["padding_mode"] != "border":
        check(model, feeds, **SAMPLING)
        return
    reference, _ = one_node("GridSample", inputs, opset=20, **(attrs | {"mode": "cubic"}))
    assert_close(run_spawnml(model, feeds), ReferenceEvaluator(reference).run(None, feeds), **SAMPLING)


@pytest.mark.parametrize("mode", ["bilinear", "nearest", "bicubic"])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align_corners", [0, 1])
def test_grid_sample_16(check, mode, padding_mode, align_corners):
    inputs = {"x": randn(2, 3, 5, 6), "grid": _grid(2, 4, 7, 2)}
    _grid_sample(check, inputs, 16, mode=mode, padding_mode=padding_mode, align_corners=align_corners)


@pytest.mark.parametrize("mode", ["linear", "nearest", "cubic"])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align_corners", [0, 1])
@pytest.mark.parametrize("reach", [1.0, 3.5])  # far outside: reflections fold several times
def test_grid_sample_20(check, mode, padding_mode, align_corners, reach):
    inputs = {"x": randn(1, 2, 4, 3), "grid": _grid(1, 5, 6, 2, reach=reach)}
    _grid_sample(check, inputs, 20, mode=mode, padding_mode=padding_mode, align_corners=align_corners)


@pytest.mark.parametrize("mode", ["linear", "nearest"])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align_corners", [0, 1])
def test_grid_sample_volumetric(check, mode, padding_mode, align_corners):
    inputs = {"x": randn(2, 2, 3, 4, 5), "grid": _grid(2, 3, 2, 4, 3)}
    attrs = {"mode": mode, "padding_mode": padding_mode, "align_corners": align_corners}
    run(check, "GridSample", inputs, opset=20, tolerance=SAMPLING, **attrs)


@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
def test_grid_sample_volumetric_cubic(padding_mode):
    """onnxruntime samples cubically in 2-D only; onnx's reference in any rank."""
    inputs = {"x": randn(1, 1, 3, 4, 4), "grid": _grid(1, 2, 2, 3, 3)}
    model, feeds = one_node("GridSample", inputs, opset=20, mode="cubic", padding_mode=padding_mode)
    check_reference(model, feeds, **SAMPLING)


@pytest.mark.parametrize("dtype", [np.float16, np.float64])
def test_grid_sample_dtypes(check, dtype):
    inputs = {"x": randn(1, 2, 4, 4, dtype=dtype), "grid": _grid(1, 3, 3, 2).astype(dtype)}
    tolerance = HALF if dtype == np.float16 else SAMPLING
    run(check, "GridSample", inputs, opset=20, tolerance=tolerance, padding_mode="reflection")


@pytest.mark.parametrize(
    ("opset", "attrs", "match"),
    [
        (16, {"mode": "linear"}, "mode 'linear'"),
        (20, {"mode": "bilinear"}, "mode 'bilinear'"),
        (20, {"padding_mode": "mirror"}, "padding_mode"),
    ],
)
def test_grid_sample_refusals(opset, attrs, match):
    refused(
        one_node("GridSample", {"x": randn(1, 1, 2, 2), "g": _grid(1, 1, 1, 2)}, opset=opset, **attrs)[0],
        match,
    )


# ---------------------------------------------------------------------------- AffineGrid


@pytest.mark.parametrize("size", [(2, 3, 4, 5), (1, 1, 1, 3), (2, 1, 3, 4, 5)])
@pytest.mark.parametrize("align_corners", [0, 1])
def test_affine_grid(check, size, align_corners):
    """One pixel with aligned corners sits at -1 in ONNX's reference and function (compared
    there), at +1 in onnxruntime."""
    rank = len(size) - 2
    inputs = {"theta": randn(size[0], rank, rank + 1), "size": np.array(size, np.int64)}
    model, feeds = one_node("AffineGrid", inputs, constants=("size",), opset=20, align_corners=align_corners)
    if align_corners and 1 in size[2:]:
        check_reference(model, feeds, **SAMPLING)
    else:
        check(model, feeds, **SAMPLING)


# ---------------------------------------------------------------------------- DeformConv


def _windows(sizes: tuple[int, ...], kernel: tuple[int, ...], attrs: dict) -> list[int]:
    """How many windows of ``kernel`` fit each axis, with the strides, dilations and pads."""
    rank = len(sizes)
    strides, dilations = attrs.get("strides", [1] * rank), attrs.get("dilations", [1] * rank)
    pads = attrs.get("pads", [0] * 2 * rank)
    return [
        (sizes[a] + pads[a] + pads[a + rank] - (kernel[a] - 1) * dilations[a] - 1) // strides[a] + 1
        for a in range(rank)
    ]


@pytest.mark.parametrize(
    ("x_shape", "w_shape", "attrs"),
    [
        ((1, 2, 5, 5), (3, 2, 3, 3), {}),
        ((2, 4, 6, 5), (4, 2, 3, 2), {"group": 2, "offset_group": 2, "pads": [1, 0, 1, 1]}),
        ((1, 3, 7, 7), (2, 3, 2, 2), {"strides": [2, 2], "dilations": [2, 1], "pads": [1, 1, 1, 1]}),
        ((1, 4, 4, 4), (4, 1, 3, 3), {"group": 4, "offset_group": 4, "pads": [1, 1, 1, 1]}),
    ],
)
@pytest.mark.parametrize("mask", [False, True])
@pytest.mark.parametrize("bias", [False, True])
def test_deform_conv(check, x_shape, w_shape, attrs, mask, bias):
    out = _windows(x_shape[2:], w_shape[2:], attrs)
    taps = w_shape[2] * w_shape[3] * attrs.get("offset_group", 1)
    inputs = {
        "x": randn(*x_shape),
        "w": randn(*w_shape),
        "offset": randn(x_shape[0], 2 * taps, *out) * 2,
        "b": randn(w_shape[0]) if bias else None,
        "mask": rng.uniform(0, 1, (x_shape[0], taps, *out)).astype(np.float32) if mask else None,
    }
    run(check, "DeformConv", inputs, opset=19, tolerance=SAMPLING, **attrs)


@pytest.mark.parametrize(
    ("attrs", "match"),
    [({"kernel_shape": [3, 3], "strides": [1]}, "strides"), ({"offset_group": 0}, "positive")],
)
def test_deform_conv_refusals(attrs, match):
    inputs = {"x": randn(1, 1, 4, 4), "w": randn(1, 1, 3, 3), "o": randn(1, 18, 2, 2)}
    refused(one_node("DeformConv", inputs, opset=19, **attrs)[0], match)


# ---------------------------------------------------------------------------- RoiAlign


def _rois(count: int, height: int, width: int) -> np.ndarray:
    """Regions ``(x1, y1, x2, y2)``, some partly outside the image and some degenerate."""
    x1, y1 = rng.uniform(-2, width, count), rng.uniform(-2, height, count)
    w, h = rng.uniform(0, width, count), rng.uniform(0, height, count)
    rois = np.stack([x1, y1, x1 + w, y1 + h], axis=1).astype(np.float32)
    rois[0] = [1, 1, 1, 1]
    return rois


@pytest.mark.parametrize(
    ("opset", "transform"), [(10, None), (16, None), (16, "half_pixel"), (16, "output_half_pixel")]
)
@pytest.mark.parametrize("mode", ["avg", "max"])
@pytest.mark.parametrize("sampling_ratio", [0, 2])
def test_roi_align(check, opset, transform, mode, sampling_ratio):
    inputs = {
        "x": randn(2, 3, 10, 12),
        "rois": _rois(5, 10, 12),
        "batch": np.array([0, 1, 1, 0, 1], np.int64),
    }
    attrs = {"mode": mode, "sampling_ratio": sampling_ratio, "output_height": 3, "output_width": 4}
    attrs |= {"spatial_scale": 0.5} if sampling_ratio else {}
    attrs |= {} if transform is None else {"coordinate_transformation_mode": transform}
    run(check, "RoiAlign", inputs, opset=opset, tolerance=SAMPLING, **attrs)


def test_roi_align_refuses_unknown_mode():
    inputs = {"x": randn(1, 1, 4, 4), "r": _rois(1, 4, 4), "b": np.zeros(1, np.int64)}
    refused(one_node("RoiAlign", inputs, opset=16, mode="median")[0], "mode")


# ---------------------------------------------------------------------------- NonMaxSuppression


def _boxes(batches: int, count: int, center: bool) -> np.ndarray:
    """Boxes clustered so that many overlap; corner boxes list their corners in any order."""
    centres = rng.uniform(0, 10, (batches, count, 2))
    sizes = rng.uniform(0.5, 4, (batches, count, 2))
    if center:
        return np.concatenate([centres, sizes], axis=-1).astype(np.float32)
    corners = np.concatenate([centres - sizes / 2, centres + sizes / 2], axis=-1)
    flip = rng.random((batches, count)) < 0.3
    corners[flip] = corners[flip][:, [2, 3, 0, 1]]
    return corners.astype(np.float32)


@pytest.mark.parametrize("center_point_box", [0, 1])
@pytest.mark.parametrize(
    ("limit", "iou", "score"),
    [(3, 0.5, None), (100, 0.3, 0.4), (0, 0.5, None), (2, 0.0, 0.9), (None, None, None)],
)
def test_non_max_suppression(check, center_point_box, limit, iou, score):
    scores = rng.random((2, 3, 30)).astype(np.float32)
    scores[0, 0, :5] = 0.5  # ties keep index order
    inputs = {
        "boxes": _boxes(2, 30, bool(center_point_box)),
        "scores": scores,
        "limit": None if limit is None else np.array([limit], np.int64),
        "iou": None if iou is None else np.array([iou], np.float32),
        "score": None if score is None else np.array([score], np.float32),
    }
    run(check, "NonMaxSuppression", inputs, opset=11, center_point_box=center_point_box)


def test_non_max_suppression_refuses_box_format():
    inputs = {"b": _boxes(1, 3, False), "s": randn(1, 1, 3)}
    refused(one_node("NonMaxSuppression", inputs, opset=11, center_point_box=2)[0], "center_point_box")


# ---------------------------------------------------------------------------- Col2Im and MaxUnpool


@pytest.mark.parametrize(
    ("image", "block", "attrs"),
    [
        ((5, 5), (2, 2), {}),
        ((6, 7), (3, 2), {"strides": [2, 1], "pads": [1, 0, 1, 2]}),
        ((8, 6), (2, 3), {"dilations": [2, 2], "pads": [1, 1, 0, 0]}),
        ((4, 5, 3), (2, 2, 2), {"strides": [1, 2, 1]}),
    ],
)
@pytest.mark.parametrize("channels", [1, 3])
def test_col2im(check, image, block, attrs, channels):
    counts = _windows(image, block, attrs)
    inputs = {
        "x": randn(2, channels * int(np.prod(block)), int(np.prod(counts))),
        "image": np.array(image, np.int64),
        "block": np.array(block, np.int64),
    }
    run(check, "Col2Im", inputs, constants=("image", "block"), opset=18, tolerance=SAMPLING, **attrs)


def _pooled(shape: tuple[int, ...], **attrs) -> tuple[np.ndarray, ...]:
    """The values and flat indices SpawnML's MaxPool gives for a random input."""
    return tuple(run_spawnml(*one_node("MaxPool", {"x": randn(*shape)}, outputs=2, opset=12, **attrs)))


@pytest.mark.parametrize(
    ("shape", "kernel", "strides", "pads"),
    [
        ((1, 2, 4, 4), [2, 2], [2, 2], None),
        ((2, 1, 5, 5), [3, 2], [2, 2], [1, 0, 1, 1]),
        ((1, 1, 4, 4, 4), [2, 2, 2], [2, 2, 2], None),
        ((2, 3, 7), [3], [2], None),
    ],
)
def test_max_unpool(check, shape, kernel, strides, pads):
    attrs = {"kernel_shape": kernel, "strides": strides} | ({} if pads is None else {"pads": pads})
    values, indices = _pooled(shape, **attrs)
    run(check, "MaxUnpool", {"x": values, "i": indices}, opset=11, **attrs)


def test_max_unpool_refuses_mismatched_pads():
    inputs = {"x": randn(1, 1, 2, 2), "i": np.zeros((1, 1, 2, 2), np.int64)}
    refused(one_node("MaxUnpool", inputs, opset=11, kernel_shape=[2, 2], pads=[0, 0])[0], "pads")


def test_max_unpool_output_shape():
    """With an output shape, the unpooled tensor is padded at the end of each axis, as in
    ONNX's reference and node test (onnxruntime instead scatters into the larger shape)."""
    values, indices = _pooled((1, 2, 4, 4), kernel_shape=[2, 2], strides=[2, 2])
    inputs = {"x": values, "i": indices, "shape": np.array([1, 2, 5, 5], np.int64)}
    check_reference(
        *one_node("MaxUnpool", inputs, constants=("shape",), opset=11, kernel_shape=[2, 2], strides=[2, 2])
    )


# ---------------------------------------------------------------------------- CenterCropPad


@pytest.mark.parametrize(
    ("shape", "target", "axes"),
    [
        ((4, 6), (2, 9), None),
        ((5, 7, 3), (3, 10), [0, 1]),
        ((5, 7, 3), (8, 2), [-2, 0]),
        ((3, 4, 2), (3, 4, 2), None),
        ((6,), (1,), None),
    ],
)
@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.bool_])
def test_center_crop_pad(check, shape, target, axes, dtype):
    inputs = {
        "x": (randn(*shape) > 0).astype(dtype) if dtype is np.bool_ else (randn(*shape) * 9).astype(dtype)
    }
    inputs["shape"] = np.array(target, np.int64)
    attrs = {} if axes is None else {"axes": axes}
    run(check, "CenterCropPad", inputs, constants=("shape",), opset=18, **attrs)


# ---------------------------------------------------------------------------- ImageDecoder


def test_image_decoder_refused_without_pillow(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *rest: None if name == "PIL" else real(name, *rest)
    )
    refused(one_node("ImageDecoder", {"x": np.zeros(8, np.uint8)}, opset=20)[0], "Pillow")


@pytest.mark.parametrize("pixel_format", ["RGB", "BGR", "Grayscale"])
def test_image_decoder_png_round_trip(pixel_format):
    from PIL import Image as image_module

    pixels = rng.integers(0, 256, (6, 5, 3), dtype=np.uint8)
    buffer = io.BytesIO()
    image_module.fromarray(pixels).save(buffer, format="PNG")
    encoded = np.frombuffer(buffer.getvalue(), np.uint8)
    (decoded,) = run_spawnml(*one_node("ImageDecoder", {"x": encoded}, opset=20, pixel_format=pixel_format))
    expected = {
        "RGB": pixels,
        "BGR": pixels[..., ::-1],
        "Grayscale": np.asarray(image_module.fromarray(pixels).convert("L"))[..., None],
    }[pixel_format]
    np.testing.assert_array_equal(decoded, expected)


def test_image_decoder_refuses_pixel_format():
    refused(
        one_node("ImageDecoder", {"x": np.zeros(8, np.uint8)}, opset=20, pixel_format="CMYK")[0],
        "pixel_format",
    )


# ---------------------------------------------------------------------------- shape inference


def _constant(*values: int) -> np.ndarray:
    return np.array(values, np.int64)


@pytest.mark.parametrize(
    ("op", "opset", "inputs", "attrs", "expected"),
    [
        ("GridSample", 20, [("n", 3, 8, 8), ("n", 4, 5, 2)], {}, ("n", 3, 4, 5)),
        ("AffineGrid", 20, [("n", 2, 3), _constant(2, 3, 7, 9)], {}, ("n", 7, 9, 2)),
        ("AffineGrid", 20, [(2, 3, 4), (5,)], {}, (2, None, None, None, 3)),
        ("DeformConv", 19, [("n", 4, 9, 9), (8, 4, 3, 3), ("n", 18, 7, 7)], {}, ("n", 8, 7, 7)),
        ("RoiAlign", 16, [(1, 16, 20, 20), ("r", 4), ("r",)], {"output_height": 7}, ("r", 16, 7, 1)),
        ("NonMaxSuppression", 11, [(1, 10, 4), (1, 2, 10)], {}, (None, 3)),
        ("Col2Im", 18, [(2, 12, 16), _constant(5, 5), _constant(2, 2)], {}, (2, 3, 5, 5)),
        (
            "MaxUnpool",
            11,
            [("n", 2, 3, 3), ("n", 2, 3, 3)],
            {"kernel_shape": [2, 2], "strides": [2, 2]},
            ("n", 2, 6, 6),
        ),
        (
            "MaxUnpool",
            11,
            [(1, 2, 3, 3), (1, 2, 3, 3), _constant(1, 2, 7, 7)],
            {"kernel_shape": [2, 2]},
            (1, 2, 7, 7),
        ),
        ("CenterCropPad", 18, [("h", "w", 3), _constant(10, 12)], {"axes": [0, 1]}, (10, 12, 3)),
        ("ImageDecoder", 20, [(100,)], {"pixel_format": "Grayscale"}, (None, None, 1)),
    ],
)
def test_symbolic_shapes(op, opset, inputs, attrs, expected):
    """Inputs are shapes or constants (arrays)."""
    schema = OperatorRegistry(SCHEMAS).lookup("", op, opset)
    node = Node(op, [f"i{i}" for i in range(len(inputs))], ["y"], attrs)
    types = [TensorType(np.dtype(np.float32), getattr(value, "shape", value)) for value in inputs]
    constants = [value if isinstance(value, np.ndarray) else None for value in inputs]
    ctx = InferenceContext(node, opset, schema.resolve_attrs(node), types, constants)
    assert schema.infer(ctx)[0].shape == expected
