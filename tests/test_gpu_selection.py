"""NonZero, Unique and NonMaxSuppression on every GPU backend against onnxruntime, at sizes past the
conformance cases: several counting blocks, repeated slices, hundreds of overlapping boxes.

Each case is a one-node ONNX model run whole on the GPU provider (its placement is checked) and
on onnxruntime's CPU provider with the same inputs; every output must be equal exactly (they are
indices, counts and copied elements). The output size is read back once per node: the check on
the traffic counts that read.
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

rng = np.random.default_rng(7)


@pytest.fixture(params=GPU_BACKENDS, scope="module")
def provider(request) -> str:
    backend_or_skip(request.param)
    return request.param


def model(op: str, inputs: dict, outputs: list[str], constants: dict | None = None, **attrs) -> bytes:
    """A one-node opset-13 model: ``inputs`` fed, ``constants`` as initializers, ``outputs`` named."""
    constants = constants or {}
    node = helper.make_node(op, [*inputs, *constants], outputs, **attrs)
    graph = helper.make_graph(
        [node],
        op,
        [
            helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
            for n, v in inputs.items()
        ],
        [helper.make_empty_tensor_value_info(n) for n in outputs],
        [numpy_helper.from_array(v, n) for n, v in constants.items()],
    )
    return helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8
    ).SerializeToString()


def compare(provider: str, onnx_model: bytes, feeds: dict) -> None:
    """Every output equal to onnxruntime's, in value, type and shape."""
    session = spawnml.InferenceSession(onnx_model, providers=[provider])
    assert {p for _, _, p in session.placement()} == {provider}
    got = session.run(None, feeds)
    want = onnxruntime.InferenceSession(onnx_model, providers=["CPUExecutionProvider"]).run(None, feeds)
    for have, expected in zip(got, want, strict=True):
        assert (have.dtype, have.shape) == (expected.dtype, expected.shape)
        np.testing.assert_array_equal(have, expected)


@pytest.mark.parametrize(
    "x",
    [
        rng.integers(-1, 2, (3, 7, 50)).astype(np.int32),  # 1050 elements: five counting blocks
        np.where(rng.random((600,)) < 0.1, rng.standard_normal(600), 0).astype(np.float32),
        np.zeros((4, 5), np.float32),
        np.array(2.5, np.float32),
    ],
    ids=["int32-3d", "float32-sparse", "all-zero", "scalar"],
)
def test_nonzero(provider: str, x: np.ndarray) -> None:
    compare(provider, model("NonZero", {"x": x}, ["y"]), {"x": x})


def test_nonzero_float64(provider: str) -> None:
    """onnxruntime's NonZero takes no float64: checked against ONNX's reference."""
    x = np.where(rng.random((7, 100)) < 0.2, rng.standard_normal((7, 100)), 0)
    onnx_model = model("NonZero", {"x": x}, ["y"])
    (got,) = spawnml.InferenceSession(onnx_model, providers=[provider]).run(None, {"x": x})
    (want,) = ReferenceEvaluator(onnx.load_from_string(onnx_model)).run(None, {"x": x})
    np.testing.assert_array_equal(got, want)


def test_nonzero_reads_back_only_the_count(provider: str) -> None:
    """The node reads four bytes from the device (the count); its output stays there."""
    x = rng.integers(0, 2, (40, 40)).astype(np.int32)
    session = spawnml.InferenceSession(model("NonZero", {"x": x}, ["y"]), providers=[provider])
    backend = spawnml.plugins.backends()[provider]
    feeds = {"x": spawnml.Tensor.from_numpy(x, device=provider)}
    before = backend.traffic().bytes_from_device
    (y,) = session.run_with_tensors(None, feeds)
    assert backend.traffic().bytes_from_device - before == 4
    np.testing.assert_array_equal(y.numpy(), np.array(np.nonzero(x)))


#: Inputs of the types onnxruntime's Unique takes (int64 is held as int32 on the GPU).
UNIQUE = [
    (rng.integers(0, 40, 500).astype(np.int64), {}),
    (rng.integers(0, 40, 500).astype(np.int64), {"sorted": 0}),
    (rng.integers(-3, 3, (6, 30)).astype(np.float32).round(), {}),
    (rng.integers(0, 3, (5, 4, 2)).astype(np.int64), {"axis": 1}),
    (rng.integers(0, 2, (3, 40)).astype(np.int64), {"axis": -1, "sorted": 0}),
    (np.repeat(rng.standard_normal(20).astype(np.float32), 3)[rng.permutation(60)], {"sorted": 1}),
]


@pytest.mark.parametrize(("x", "attrs"), UNIQUE, ids=[str(i) for i in range(len(UNIQUE))])
def test_unique(provider: str, x: np.ndarray, attrs: dict) -> None:
    compare(provider, model("Unique", {"x": x}, ["y", "indices", "inverse", "counts"], **attrs), {"x": x})


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("ordered", [1, 0])
def test_unique_nan(provider: str, ordered: int, dtype: type) -> None:
    """NaNs are one value, sorted last, as in ONNX's reference (numpy's unique); onnxruntime's
    Unique keeps each NaN apart."""
    x = np.array([2.0, np.nan, -1.0, 2.0, np.inf, np.nan, -np.inf, -1.0, 0.1, np.nan], dtype)
    onnx_model = model("Unique", {"x": x}, ["y", "indices", "inverse", "counts"], sorted=ordered)
    got = spawnml.InferenceSession(onnx_model, providers=[provider]).run(None, {"x": x})
    want = ReferenceEvaluator(onnx.load_from_string(onnx_model)).run(None, {"x": x})
    for have, expected in zip(got, want, strict=True):
        np.testing.assert_array_equal(have, expected.astype(have.dtype))


def boxes(batches: int, count: int) -> np.ndarray:
    """Random boxes in a 10 x 10 field, many overlapping, as two corners in either order."""
    start = rng.uniform(0, 10, (batches, count, 2))
    end = start + rng.uniform(-3, 3, (batches, count, 2))
    return np.concatenate([start, end], axis=-1).astype(np.float32)


NMS = [
    (2, 3, 300, [50, 0.5, 0.0], 0),
    (1, 2, 200, [1000, 0.3, 0.4], 0),
    (2, 1, 150, [20, 0.6], 1),
    (1, 4, 64, [5, 0.0], 0),
    (1, 1, 30, [0, 0.5], 0),
]


@pytest.mark.parametrize(
    ("batches", "classes", "count", "limits", "center"), NMS, ids=[str(i) for i in range(len(NMS))]
)
def test_non_max_suppression(
    provider: str, batches: int, classes: int, count: int, limits: list[float], center: int
) -> None:
    corners = boxes(batches, count)
    if center:  # the same boxes as (x_center, y_center, width, height)
        y0, x0, y1, x1 = np.moveaxis(corners, -1, 0)
        corners = np.stack([(x0 + x1) / 2, (y0 + y1) / 2, np.abs(x1 - x0), np.abs(y1 - y0)], -1)
    scores = rng.random((batches, classes, count)).astype(np.float32).round(2)  # ties among scores
    names = ["max_output_boxes_per_class", "iou_threshold", "score_threshold"]
    constants = {
        name: np.array([value], np.int64 if name == names[0] else np.float32)
        for name, value in zip(names, limits, strict=False)
    }
    onnx_model = model(
        "NonMaxSuppression", {"boxes": corners, "scores": scores}, ["y"], constants, center_point_box=center
    )
    compare(provider, onnx_model, {"boxes": corners, "scores": scores})
