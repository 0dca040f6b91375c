"""RoiAlign and DeformConv on every GPU backend against a reference, past the conformance cases:
regions partly outside the image, adaptive and fixed sampling, both modes and coordinate
transformations; groups, offset groups, strides, dilations, padding, masks and bias.

RoiAlign is compared with onnxruntime, DeformConv with ONNX's reference evaluator (onnxruntime
has no DeformConv kernel) in float32 and with its definition in PyTorch in float64 (ONNX's
reference loses precision there: it is off by about 1e-6), on the same random inputs. Tolerance: 1e-5
relative plus 1e-5 absolute per summed product for float32 (the sample positions and sums are
float32 on the GPU, float64 in the references), 1e-12 for float64 (summed in another order).
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime
import pytest
import spawnml
import torch
from onnx import helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from tests.backends import GPU_BACKENDS, backend_or_skip

rng = np.random.default_rng(23)


@pytest.fixture(params=GPU_BACKENDS, scope="module")
def provider(request) -> str:
    backend_or_skip(request.param)
    return request.param


def one_node(op: str, inputs: dict, constants: dict, opset: int, **attrs) -> bytes:
    """A one-node model: ``inputs`` fed, ``constants`` as initializers (None leaves one out)."""
    names = [*inputs, *(n if v is not None else "" for n, v in constants.items())]
    node = helper.make_node(op, names, ["y"], **attrs)
    graph = helper.make_graph(
        [node],
        op,
        [
            helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
            for n, v in inputs.items()
        ],
        [helper.make_empty_tensor_value_info("y")],
        [numpy_helper.from_array(v, n) for n, v in constants.items() if v is not None],
    )
    return helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=9
    ).SerializeToString()


def tolerance(dtype: type, products: int) -> dict[str, float]:
    """1e-5 relative plus 1e-5 absolute per summed product in float32; 1e-12 and 1e-12 in float64."""
    step = 1e-5 if dtype == np.float32 else 1e-12
    return {"rtol": step, "atol": step * products}


def on_gpu(provider: str, onnx_model: bytes, feeds: dict) -> np.ndarray:
    session = spawnml.InferenceSession(onnx_model, providers=[provider])
    assert {p for _, _, p in session.placement()} == {provider}
    return session.run(None, feeds)[0]


ROI_ALIGN = [
    ({"mode": "avg", "sampling_ratio": 2, "coordinate_transformation_mode": "half_pixel"}, 16),
    ({"mode": "avg", "sampling_ratio": 0, "spatial_scale": 0.5}, 16),
    ({"mode": "max", "sampling_ratio": 2, "coordinate_transformation_mode": "output_half_pixel"}, 16),
    ({"mode": "avg", "sampling_ratio": 0}, 10),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(("attrs", "opset"), ROI_ALIGN, ids=[str(i) for i in range(len(ROI_ALIGN))])
def test_roi_align(provider: str, attrs: dict, opset: int, dtype: type) -> None:
    x = rng.standard_normal((2, 3, 12, 15)).astype(dtype)
    start = rng.uniform(-3, 14, (9, 2))
    rois = np.concatenate([start, start + rng.uniform(0.5, 9, (9, 2))], axis=1).astype(dtype)
    batch = rng.integers(0, 2, 9).astype(np.int64)
    onnx_model = one_node(
        "RoiAlign", {"x": x, "rois": rois}, {"batch": batch}, opset, output_height=3, output_width=4, **attrs
    )
    got = on_gpu(provider, onnx_model, {"x": x, "rois": rois})
    (want,) = onnxruntime.InferenceSession(onnx_model, providers=["CPUExecutionProvider"]).run(
        None, {"x": x, "rois": rois}
    )
    assert got.shape == want.shape == (9, 3, 3, 4)
    np.testing.assert_allclose(got, want, **tolerance(dtype, 16))


# (x shape, w shape, offset groups, attributes, mask, bias)
DEFORM = [
    ((1, 2, 7, 8), (3, 2, 3, 3), 1, {"pads": [1, 1, 1, 1]}, False, True),
    ((2, 4, 9, 9), (6, 2, 3, 2), 2, {"group": 2, "strides": [2, 1], "dilations": [1, 2]}, True, True),
    ((1, 6, 6, 7), (4, 6, 2, 2), 3, {"pads": [0, 1, 2, 0]}, True, False),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(
    ("x_shape", "w_shape", "offset_groups", "attrs", "masked", "biased"),
    DEFORM,
    ids=[str(i) for i in range(len(DEFORM))],
)
def test_deform_conv(
    provider: str,
    x_shape: tuple,
    w_shape: tuple,
    offset_groups: int,
    attrs: dict,
    masked: bool,
    biased: bool,
    dtype: type,
) -> None:
    x = rng.standard_normal(x_shape).astype(dtype)
    w = rng.standard_normal(w_shape).astype(dtype)
    strides = attrs.get("strides", [1, 1])
    dilations = attrs.get("dilations", [1, 1])
    pads = attrs.get("pads", [0, 0, 0, 0])
    out = [
        (x_shape[2 + a] + pads[a] + pads[a + 2] - dilations[a] * (w_shape[2 + a] - 1) - 1) // strides[a] + 1
        for a in range(2)
    ]
    taps = w_shape[2] * w_shape[3]
    offset = rng.uniform(-2.5, 2.5, (x_shape[0], offset_groups * taps * 2, *out)).astype(dtype)
    constants = {
        "w": w,
        "offset": offset,
        "b": rng.standard_normal(w_shape[0]).astype(dtype) if biased else None,
        "mask": rng.uniform(0, 1, (x_shape[0], offset_groups * taps, *out)).astype(dtype) if masked else None,
    }
    onnx_model = one_node("DeformConv", {"x": x}, constants, 22, offset_group=offset_groups, **attrs)
    got = on_gpu(provider, onnx_model, {"x": x})
    if dtype == np.float64:
        want = torch_deform_conv(x, constants, offset_groups, attrs)
    else:
        (want,) = ReferenceEvaluator(onnx.load_from_string(onnx_model)).run(None, {"x": x})
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, **tolerance(dtype, w_shape[1] * taps))


def torch_deform_conv(x: np.ndarray, constants: dict, offset_groups: int, attrs: dict) -> np.ndarray:
    """DeformConv by its definition in PyTorch's float64: each tap sampled with ``grid_sample``
    (bilinear, zeros outside, pixel centres at the corners), masked, then contracted with the
    weights group by group."""
    w, offset = torch.from_numpy(constants["w"]), torch.from_numpy(constants["offset"])
    image = torch.from_numpy(x)
    (n, channels, height, width), (out_channels, per_group, kh, kw) = image.shape, w.shape
    (oh, ow), taps = offset.shape[2:], kh * kw
    strides, dilations = attrs.get("strides", [1, 1]), attrs.get("dilations", [1, 1])
    pads, groups = attrs.get("pads", [0, 0, 0, 0]), attrs.get("group", 1)
    mask = constants["mask"]
    mask = (
        torch.ones(n, offset_groups * taps, oh, ow, dtype=torch.float64)
        if mask is None
        else torch.from_numpy(mask)
    )
    rows = torch.arange(oh, dtype=torch.float64)[:, None] * strides[0] - pads[0]
    columns = torch.arange(ow, dtype=torch.float64)[None, :] * strides[1] - pads[1]
    per_offset = channels // offset_groups
    sampled = torch.empty(n, channels, taps, oh, ow, dtype=torch.float64)
    for g in range(offset_groups):
        for k in range(taps):
            at = (g * taps + k) * 2
            y = rows + (k // kw) * dilations[0] + offset[:, at]
            x_ = columns + (k % kw) * dilations[1] + offset[:, at + 1]
            grid = torch.stack([x_ / (width - 1) * 2 - 1, y / (height - 1) * 2 - 1], dim=-1)
            part = image[:, g * per_offset : (g + 1) * per_offset]
            taken = torch.nn.functional.grid_sample(part, grid, align_corners=True, padding_mode="zeros")
            sampled[:, g * per_offset : (g + 1) * per_offset, k] = taken * mask[:, g * taps + k][:, None]
    sampled = sampled.reshape(n, groups, per_group * taps, oh, ow)
    filters = w.reshape(groups, out_channels // groups, per_group * taps)
    y = torch.einsum("gmk,ngkhw->ngmhw", filters, sampled).reshape(n, out_channels, oh, ow)
    if constants["b"] is not None:
        y = y + torch.from_numpy(constants["b"])[None, :, None, None]
    return y.numpy()
