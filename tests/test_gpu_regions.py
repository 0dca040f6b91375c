"""RoiAlign and DeformConv on every GPU backend against a reference, past the conformance cases:
regions partly outside the image, adaptive and fixed sampling, both modes and coordinate
transformations; groups, offset groups, strides, dilations, padding, masks and bias.

RoiAlign is compared with onnxruntime, DeformConv with ONNX's reference evaluator (onnxruntime
has no DeformConv kernel), on the same random inputs. Tolerance: 1e-5 relative plus 1e-5
absolute per summed product (the sample positions and sums are float32 on the GPU, float64 in
the references).
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime
import pytest
import spawnml
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


@pytest.mark.parametrize(("attrs", "opset"), ROI_ALIGN, ids=[str(i) for i in range(len(ROI_ALIGN))])
def test_roi_align(provider: str, attrs: dict, opset: int) -> None:
    x = rng.standard_normal((2, 3, 12, 15)).astype(np.float32)
    start = rng.uniform(-3, 14, (9, 2))
    rois = np.concatenate([start, start + rng.uniform(0.5, 9, (9, 2))], axis=1).astype(np.float32)
    batch = rng.integers(0, 2, 9).astype(np.int64)
    onnx_model = one_node(
        "RoiAlign", {"x": x, "rois": rois}, {"batch": batch}, opset, output_height=3, output_width=4, **attrs
    )
    got = on_gpu(provider, onnx_model, {"x": x, "rois": rois})
    (want,) = onnxruntime.InferenceSession(onnx_model, providers=["CPUExecutionProvider"]).run(
        None, {"x": x, "rois": rois}
    )
    assert got.shape == want.shape == (9, 3, 3, 4)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * 16)


# (x shape, w shape, offset groups, attributes, mask, bias)
DEFORM = [
    ((1, 2, 7, 8), (3, 2, 3, 3), 1, {"pads": [1, 1, 1, 1]}, False, True),
    ((2, 4, 9, 9), (6, 2, 3, 2), 2, {"group": 2, "strides": [2, 1], "dilations": [1, 2]}, True, True),
    ((1, 6, 6, 7), (4, 6, 2, 2), 3, {"pads": [0, 1, 2, 0]}, True, False),
]


@pytest.mark.parametrize(
    ("x_shape", "w_shape", "offset_groups", "attrs", "masked", "biased"),
    DEFORM,
    ids=[str(i) for i in range(len(DEFORM))],
)
def test_deform_conv(
    provider: str, x_shape: tuple, w_shape: tuple, offset_groups: int, attrs: dict, masked: bool, biased: bool
) -> None:
    x = rng.standard_normal(x_shape).astype(np.float32)
    w = rng.standard_normal(w_shape).astype(np.float32)
    strides = attrs.get("strides", [1, 1])
    dilations = attrs.get("dilations", [1, 1])
    pads = attrs.get("pads", [0, 0, 0, 0])
    out = [
        (x_shape[2 + a] + pads[a] + pads[a + 2] - dilations[a] * (w_shape[2 + a] - 1) - 1) // strides[a] + 1
        for a in range(2)
    ]
    taps = w_shape[2] * w_shape[3]
    offset = rng.uniform(-2.5, 2.5, (x_shape[0], offset_groups * taps * 2, *out)).astype(np.float32)
    constants = {
        "w": w,
        "offset": offset,
        "b": rng.standard_normal(w_shape[0]).astype(np.float32) if biased else None,
        "mask": rng.uniform(0, 1, (x_shape[0], offset_groups * taps, *out)).astype(np.float32)
        if masked
        else None,
    }
    onnx_model = one_node("DeformConv", {"x": x}, constants, 22, offset_group=offset_groups, **attrs)
    got = on_gpu(provider, onnx_model, {"x": x})
    (want,) = ReferenceEvaluator(onnx.load_from_string(onnx_model)).run(None, {"x": x})
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * w_shape[1] * taps)
