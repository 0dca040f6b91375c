"""Tensor and shape-movement operators, against onnxruntime (and by value where it has no kernel)."""

from __future__ import annotations

import math

import numpy as np
import onnx
import pytest
import spawnml
from onnx import helper, numpy_helper

from tests.ops.conftest import make_model

INT64_MAX = np.iinfo(np.int64).max
INT64_MIN = np.iinfo(np.int64).min


def sample(shape: tuple[int, ...], dtype=np.float32, seed: int = 0) -> np.ndarray:
    """Deterministic test data of any dtype, strings included."""
    rng = np.random.default_rng(seed)
    if dtype is object:
        return np.array([f"s{i % 7}" for i in range(math.prod(shape))], dtype=object).reshape(shape)
    if dtype is bool:
        return np.asarray(rng.random(shape) > 0.5)
    return np.asarray(rng.standard_normal(shape) * 8, dtype=dtype)


def ints(*values: int) -> np.ndarray:
    return np.array(values, dtype=np.int64)


def run(check, op: str, inputs: dict, initializers=None, outputs=1, opset: int = 17, **attrs):
    """Build a one-node model and compare SpawnML with onnxruntime on it."""
    model = make_model(op, inputs, outputs=outputs, opset=opset, initializers=initializers, **attrs)
    return check(model, inputs)


def run_spawnml(model: onnx.ModelProto, feeds: dict) -> list[np.ndarray]:
    """Run on SpawnML alone, for versions onnxruntime no longer implements."""
    return spawnml.InferenceSession(model.SerializeToString(), providers=["cpu"]).run(None, feeds)


def omit_input(model: onnx.ModelProto, position: int) -> onnx.ModelProto:
    """Mark an optional input of the one node as omitted (an empty name) at ``position``."""
    model.graph.node[0].input.insert(position, "")
    return model


MOVE_DTYPES = [np.float32, np.float16, np.int64, np.int8, np.uint16, bool, object]


# ---------------------------------------------------------------------------- reshaping


@pytest.mark.parametrize("dtype", MOVE_DTYPES)
@pytest.mark.parametrize(
    ("shape", "target"),
    [
        ((2, 3, 4), [4, -1]),
        ((2, 3, 4), [0, -1]),
        ((2, 3, 4), [-1]),
        ((2, 3, 4), [2, 0, 2, 2]),
        ((1,), []),
        ((), [1, 1]),
        ((0, 3), [-1, 3]),
        ((0, 3), [0, 1, 3]),
    ],
)
def test_reshape(check, shape, target, dtype):
    run(check, "Reshape", {"x": sample(shape, dtype)}, {"shape": ints(*target)}, opset=13)


@pytest.mark.parametrize("opset", [5, 14, 21])
@pytest.mark.parametrize(
    ("shape", "target", "allowzero"),
    [((2, 3, 4), [3, -1], 0), ((0, 3), [3, 0], 1), ((2, 0), [0, -1], 0), ((4, 0), [0, 4], 1)],
)
def test_reshape_versions(check, opset, shape, target, allowzero):
    if allowzero and opset < 14:
        pytest.skip("allowzero arrived in opset 14")
    attrs = {"allowzero": allowzero} if opset >= 14 else {}
    run(check, "Reshape", {"x": sample(shape)}, {"shape": ints(*target)}, opset=opset, **attrs)


def test_reshape_opset1_attribute(check):
    run(check, "Reshape", {"x": sample((2, 6))}, opset=1, shape=[3, -1])


@pytest.mark.parametrize("dtype", MOVE_DTYPES)
@pytest.mark.parametrize(
    ("shape", "perm"),
    [
        ((2, 3, 4), None),
        ((2, 3, 4), [1, 0, 2]),
        ((2, 3, 4), [2, 0, 1]),
        ((5,), None),
        ((), None),
        ((0, 3), [1, 0]),
    ],
)
def test_transpose(check, shape, perm, dtype):
    attrs = {} if perm is None else {"perm": perm}
    run(check, "Transpose", {"x": sample(shape, dtype)}, **attrs)


@pytest.mark.parametrize("opset", [9, 11, 13, 21])
@pytest.mark.parametrize("axis", [0, 1, 2, 3, -1, -3])
def test_flatten(check, axis, opset):
    if axis < 0 and opset < 11:
        pytest.skip("negative axes arrived in opset 11")
    run(check, "Flatten", {"x": sample((2, 3, 4))}, opset=opset, axis=axis)


@pytest.mark.parametrize("dtype", [np.int32, bool, object])
def test_flatten_dtypes_and_empty(check, dtype):
    run(check, "Flatten", {"x": sample((2, 0, 4), dtype)}, axis=2)


@pytest.mark.parametrize(
    ("shape", "axes"), [((3, 4), [0]), ((3, 4), [-1]), ((3, 4), [3, 0]), ((), [0]), ((0,), [1, -1])]
)
@pytest.mark.parametrize("opset", [11, 13])
def test_unsqueeze(check, shape, axes, opset):
    x = sample(shape)
    if opset < 13:
        run(check, "Unsqueeze", {"x": x}, opset=opset, axes=axes)
    else:
        run(check, "Unsqueeze", {"x": x}, {"axes": ints(*axes)}, opset=opset)


@pytest.mark.parametrize(
    ("shape", "axes"),
    [((1, 3, 1), None), ((1, 3, 1), [0]), ((1, 3, 1), [-1, 0]), ((1,), None), ((0, 1), [1])],
)
@pytest.mark.parametrize("opset", [11, 13])
def test_squeeze(check, shape, axes, opset):
    x = sample(shape, np.int64)
    if axes is None:
        run(check, "Squeeze", {"x": x}, opset=opset)
    elif opset < 13:
        run(check, "Squeeze", {"x": x}, opset=opset, axes=axes)
    else:
        run(check, "Squeeze", {"x": x}, {"axes": ints(*axes)}, opset=opset)


def test_squeeze_empty_axes_squeezes_all(check):
    run(check, "Squeeze", {"x": sample((1, 3, 1))}, {"axes": ints()}, opset=13)


@pytest.mark.parametrize("dtype", MOVE_DTYPES)
@pytest.mark.parametrize("opset", [1, 13, 16, 21])
def test_identity(check, dtype, opset):
    run(check, "Identity", {"x": sample((2, 3), dtype)}, opset=opset)


@pytest.mark.parametrize(("mode", "opset"), [("DCR", 13), ("CRD", 13), ("DCR", 1), ("CRD", 11)])
@pytest.mark.parametrize("shape", [(1, 8, 2, 3), (2, 4, 1, 1), (0, 4, 2, 2)])
def test_depth_to_space(check, mode, opset, shape):
    attrs = {"mode": mode} if opset >= 11 else {}
    run(check, "DepthToSpace", {"x": sample(shape)}, opset=opset, blocksize=2, **attrs)


@pytest.mark.parametrize("opset", [1, 13, 28])
@pytest.mark.parametrize("shape", [(1, 2, 4, 6), (2, 3, 2, 2), (0, 1, 2, 2)])
@pytest.mark.parametrize("dtype", [np.float32, np.uint8])
def test_space_to_depth(check, opset, shape, dtype):
    run(check, "SpaceToDepth", {"x": sample(shape, dtype)}, opset=opset, blocksize=2)


@pytest.mark.parametrize("shape", [(1, 2, 4, 6), (2, 3, 2, 2)])
def test_space_to_depth_crd_undoes_depth_to_space(shape):
    x = sample(shape)
    model = make_model("SpaceToDepth", {"x": x}, opset=28, blocksize=2, mode="CRD")
    (packed,) = run_spawnml(model, {"x": x})
    back = make_model("DepthToSpace", {"x": packed}, opset=13, blocksize=2, mode="CRD")
    np.testing.assert_array_equal(run_spawnml(back, {"x": packed})[0], x)


# ---------------------------------------------------------------------------- slicing and joining

SLICES = [
    ((5, 6), [1], [4], None, None),
    ((5, 6), [-3], [INT64_MAX], [1], None),
    ((5, 6), [4, -1], [0, -INT64_MAX], [0, 1], [-1, -2]),
    ((5, 6), [INT64_MAX], [INT64_MIN], [0], [-1]),
    ((5, 6), [0], [0], [0], None),
    ((5, 6), [10], [20], [0], [1]),
    ((5, 6), [-100], [100], [-1], [3]),
    ((5, 6), [1, 1], [-1, 5], [-1, -2], [2, 1]),
    ((2, 3, 4), [0, 1, 1], [2, 3, 4], None, [1, 1, 2]),
    ((0, 4), [0], [1], [1], None),
]


@pytest.mark.parametrize("opset", [10, 13])
@pytest.mark.parametrize(("shape", "starts", "ends", "axes", "steps"), SLICES)
def test_slice(check, opset, shape, starts, ends, axes, steps):
    constants = {"starts": ints(*starts), "ends": ints(*ends)}
    if axes is not None or steps is not None:
        constants["axes"] = ints(*(range(len(starts)) if axes is None else axes))
    if steps is not None:
        constants["steps"] = ints(*steps)
    run(check, "Slice", {"x": sample(shape)}, constants, opset=opset)


@pytest.mark.parametrize("dtype", MOVE_DTYPES)
def test_slice_dtypes(check, dtype):
    run(check, "Slice", {"x": sample((4, 5), dtype)}, {"s": ints(1), "e": ints(-1), "a": ints(1)})


def test_slice_steps_without_axes(check):
    x = sample((6, 5))
    model = make_model("Slice", {"x": x}, initializers={"s": ints(5, 0), "e": ints(0, 5), "st": ints(-2, 2)})
    check(omit_input(model, 3), {"x": x})


def test_slice_int32_indices(check):
    constants = {"s": np.array([1], np.int32), "e": np.array([3], np.int32), "a": np.array([0], np.int32)}
    run(check, "Slice", {"x": sample((4, 4))}, constants)


@pytest.mark.parametrize(("axes", "starts", "ends"), [(None, [1, 0], [3, 2]), ([1], [-2], [INT64_MAX])])
def test_slice_opset1_attributes(check, axes, starts, ends):
    attrs = {"starts": starts, "ends": ends} | ({} if axes is None else {"axes": axes})
    run(check, "Slice", {"x": sample((4, 5))}, opset=1, **attrs)


@pytest.mark.parametrize("dtype", MOVE_DTYPES)
@pytest.mark.parametrize(
    ("shapes", "axis"),
    [
        ([(2, 3), (2, 4)], 1),
        ([(2, 3), (1, 3), (4, 3)], 0),
        ([(2, 3), (2, 0)], -1),
        ([(5,)], 0),
        ([(0, 2), (0, 2)], 0),
    ],
)
def test_concat(check, shapes, axis, dtype):
    inputs = {f"x{i}": sample(shape, dtype, seed=i) for i, shape in enumerate(shapes)}
    run(check, "Concat", inputs, axis=axis)


@pytest.mark.parametrize("opset", [4, 11, 13])
def test_concat_versions(check, opset):
    inputs = {"a": sample((2, 2)), "b": sample((2, 1))}
    run(check, "Concat", inputs, opset=opset, axis=1 if opset < 11 else -1)


def test_concat_opset1_defaults_to_axis_1():
    a, b = sample((2, 2)), sample((2, 3))
    (got,) = run_spawnml(make_model("Concat", {"a": a, "b": b}, opset=1), {"a": a, "b": b})
    np.testing.assert_array_equal(got, np.concatenate([a, b], axis=1))


@pytest.mark.parametrize("dtype", [np.float32, np.int64, bool, object])
@pytest.mark.parametrize(
    ("shape", "sizes", "axis", "outputs"),
    [
        ((6, 4), [2, 4], 0, 2),
        ((6, 4), [1, 1, 2], 1, 3),
        ((6, 4), None, 0, 3),
        ((6, 4), None, -1, 2),
        ((5, 2), [5, 0], 0, 2),
        ((0, 2), None, 0, 2),
    ],
)
@pytest.mark.parametrize("opset", [11, 13])
def test_split(check, shape, sizes, axis, outputs, opset, dtype):
    x = sample(shape, dtype)
    if sizes is None:
        run(check, "Split", {"x": x}, outputs=outputs, opset=opset, axis=axis)
    elif opset < 13:
        run(check, "Split", {"x": x}, outputs=outputs, opset=opset, axis=axis, split=sizes)
    else:
        run(check, "Split", {"x": x}, {"split": ints(*sizes)}, outputs=outputs, opset=opset, axis=axis)


@pytest.mark.parametrize(("size", "parts"), [(7, 3), (6, 3), (4, 4), (9, 2)])
def test_split_num_outputs(check, size, parts):
    run(check, "Split", {"x": sample((2, size))}, outputs=parts, opset=18, axis=1, num_outputs=parts)


def test_split_opset2_attribute(check):
    run(check, "Split", {"x": sample((4, 3))}, outputs=2, opset=2, split=[1, 3])


def test_split_opset1_input_sizes():
    x = sample((5, 2))
    model = make_model(
        "Split", {"x": x}, outputs=2, opset=1, initializers={"s": np.array([2, 3], np.float32)}
    )
    got = run_spawnml(model, {"x": x})
    np.testing.assert_array_equal(got[1], x[2:])


PADS = [
    ((3, 4), [0, 1, 2, 0]),
    ((3, 4), [1, 1, 1, 1]),
    ((2, 3, 4), [0, 0, 2, 0, 0, 3]),
    ((3, 4), [0, 0, 0, 0]),
]


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge", "wrap"])
@pytest.mark.parametrize(("shape", "pads"), PADS)
@pytest.mark.parametrize("opset", [11, 13, 19, 21])
def test_pad_modes(check, mode, shape, pads, opset):
    if mode == "wrap" and opset < 19:
        pytest.skip("wrap arrived in opset 19")
    run(check, "Pad", {"x": sample(shape)}, {"pads": ints(*pads)}, opset=opset, mode=mode)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64, np.uint8, bool])
def test_pad_constant_value(check, dtype):
    value = np.array(1 if dtype is bool else 7, dtype=dtype)
    run(check, "Pad", {"x": sample((2, 3), dtype)}, {"pads": ints(1, 0, 0, 2), "v": value})


@pytest.mark.parametrize("pads", [[-1, 1, 0, -2], [0, -1, -1, 0], [0, -1, 0, 2]])
@pytest.mark.parametrize("mode", ["constant", "edge", "wrap"])
def test_pad_negative_crops(check, pads, mode):
    run(check, "Pad", {"x": sample((3, 4))}, {"pads": ints(*pads)}, opset=19, mode=mode)


def test_pad_wrap_wider_than_the_data(check):
    run(check, "Pad", {"x": sample((2, 3))}, {"pads": ints(0, 4, 0, 5)}, opset=19, mode="wrap")


@pytest.mark.parametrize(("axes", "pads"), [([1], [2, 1]), ([-1, 0], [1, 0, 0, 2])])
@pytest.mark.parametrize("mode", ["constant", "edge"])
def test_pad_axes(check, axes, pads, mode):
    constants = {"pads": ints(*pads), "value": np.array(-5.0, np.float32), "axes": ints(*axes)}
    run(check, "Pad", {"x": sample((2, 3, 2))}, constants, opset=18, mode=mode)


def test_pad_axes_without_constant_value(check):
    x = sample((2, 3))
    model = make_model("Pad", {"x": x}, opset=18, initializers={"pads": ints(1, 1), "axes": ints(0)})
    check(omit_input(model, 2), {"x": x})


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge"])
def test_pad_opset2_attributes(check, mode):
    run(check, "Pad", {"x": sample((3, 4))}, opset=2, pads=[1, 0, 0, 2], mode=mode, value=1.5)


def test_pad_opset1_paddings():
    x = sample((2, 2))
    model = make_model("Pad", {"x": x}, opset=1, paddings=[1, 0, 0, 1], value=3.0)
    (got,) = run_spawnml(model, {"x": x})
    np.testing.assert_array_equal(got, np.pad(x, [(1, 0), (0, 1)], constant_values=3.0))


@pytest.mark.parametrize("dtype", [np.float32, np.int64, bool, object])
@pytest.mark.parametrize(
    ("shape", "target"), [((3, 1), [2, 1, 6]), ((1,), []), ((2, 3), [1, 1]), ((0, 1), [0, 4])]
)
@pytest.mark.parametrize("opset", [8, 13])
def test_expand(check, shape, target, dtype, opset):
    run(check, "Expand", {"x": sample(shape, dtype)}, {"shape": ints(*target)}, opset=opset)


@pytest.mark.parametrize("dtype", [np.float32, np.int64, bool, object])
@pytest.mark.parametrize(
    ("shape", "repeats"), [((2, 3), [1, 2]), ((2, 3), [3, 0]), ((4,), [2]), ((0, 2), [2, 2])]
)
@pytest.mark.parametrize("opset", [6, 13])
def test_tile(check, shape, repeats, dtype, opset):
    run(check, "Tile", {"x": sample(shape, dtype)}, {"repeats": ints(*repeats)}, opset=opset)


def test_tile_opset1_axis():
    x = sample((2, 3))
    constants = {"tiles": np.array(3, np.float32), "axis": np.array(1, np.float32)}
    (got,) = run_spawnml(make_model("Tile", {"x": x}, opset=1, initializers=constants), {"x": x})
    np.testing.assert_array_equal(got, np.tile(x, (1, 3)))


# ---------------------------------------------------------------------------- shape queries


@pytest.mark.parametrize("shape", [(2, 3, 4), (), (0, 5)])
@pytest.mark.parametrize("opset", [1, 13, 15, 21])
def test_shape(check, shape, opset):
    run(check, "Shape", {"x": sample(shape)}, opset=opset)


@pytest.mark.parametrize(
    ("start", "end"), [(1, None), (-1, None), (0, -1), (-10, 10), (2, 1), (5, None), (None, 2), (1, 2)]
)
def test_shape_start_end(check, start, end):
    attrs = {key: value for key, value in (("start", start), ("end", end)) if value is not None}
    run(check, "Shape", {"x": sample((2, 3, 4))}, opset=15, **attrs)


@pytest.mark.parametrize("dtype", [np.float32, bool, object])
@pytest.mark.parametrize("shape", [(2, 3, 4), (), (0, 5)])
def test_size(check, shape, dtype):
    run(check, "Size", {"x": sample(shape, dtype)})


# ---------------------------------------------------------------------------- indexing


@pytest.mark.parametrize("dtype", [np.float32, np.int64, bool])
@pytest.mark.parametrize("index_dtype", [np.int64, np.int32])
@pytest.mark.parametrize(
    ("shape", "indices", "axis"),
    [
        ((5, 4), [0, 4, -1], 0),
        ((5, 4), [[1, 2], [-4, 3]], 1),
        ((5, 4), 2, 0),
        ((2, 3, 4), [[0], [-1]], -1),
        ((5, 4), np.zeros((0,), int), 0),
    ],
)
def test_gather(check, shape, indices, axis, dtype, index_dtype):
    constants = {"indices": np.array(indices, dtype=index_dtype)}
    run(check, "Gather", {"x": sample(shape, dtype)}, constants, axis=axis)


def test_gather_strings(check):
    # onnxruntime copies only the first string of each row it gathers on axis 0, so axis 1 it is
    run(check, "Gather", {"x": sample((3, 4), object)}, {"i": ints(-1, 0, 2)}, axis=1)


@pytest.mark.parametrize("opset", [1, 11, 13])
def test_gather_versions(check, opset):
    run(check, "Gather", {"x": sample((3, 4))}, {"i": ints(2, 0)}, opset=opset, axis=1)


@pytest.mark.parametrize(
    ("shape", "indices", "axis"),
    [
        ((3, 3), [[1, 2, 0], [2, 0, 0]], 0),
        ((3, 3), [[0, -1], [1, 0], [2, 2]], 1),
        ((2, 3, 4), [[[3, 0], [1, 1]], [[2, 2], [0, -4]]], -1),
        ((3, 3), np.zeros((0, 3), int), 0),
    ],
)
@pytest.mark.parametrize("dtype", [np.float32, np.int32, bool])
def test_gather_elements(check, shape, indices, axis, dtype):
    run(check, "GatherElements", {"x": sample(shape, dtype)}, {"i": np.array(indices, np.int64)}, axis=axis)


@pytest.mark.parametrize(
    ("shape", "indices", "batch_dims"),
    [
        ((2, 2), [[0, 0], [1, 1]], 0),
        ((2, 2), [[1], [0]], 0),
        ((2, 2, 2), [[[0, 1]], [[1, 0]]], 0),
        ((2, 2, 2), [[1], [0]], 1),
        ((2, 2, 2), [[[1]], [[0]]], 1),
        ((2, 3, 4), [[[-1, 0], [0, -2]], [[1, 3], [2, 2]]], 1),
        ((2, 3), np.zeros((0, 2), int), 0),
    ],
)
@pytest.mark.parametrize("opset", [12, 13])
def test_gather_nd(check, shape, indices, batch_dims, opset):
    run(
        check,
        "GatherND",
        {"x": sample(shape)},
        {"i": np.array(indices, np.int64)},
        opset=opset,
        batch_dims=batch_dims,
    )


def test_gather_nd_opset11(check):
    run(check, "GatherND", {"x": sample((3, 4), np.int64)}, {"i": ints(2, -1, 0).reshape(3, 1)}, opset=11)


SCATTER_ND = [
    ((8,), [[4], [3], [1], [7]], (4,)),
    ((4, 3), [[0], [2]], (2, 3)),
    ((2, 3, 2), [[0, 1], [-1, -1]], (2, 2)),
    ((3, 2), np.zeros((0, 1), int), (0, 2)),
]


@pytest.mark.parametrize(("shape", "indices", "updates"), SCATTER_ND)
@pytest.mark.parametrize("dtype", [np.float32, np.int64, bool])
@pytest.mark.parametrize("opset", [11, 13, 16, 18])
def test_scatter_nd(check, shape, indices, updates, dtype, opset):
    constants = {"i": np.array(indices, np.int64), "u": sample(updates, dtype, seed=1)}
    run(check, "ScatterND", {"x": sample(shape, dtype)}, constants, opset=opset)


@pytest.mark.parametrize(
    ("reduction", "opset"), [("add", 16), ("mul", 16), ("max", 18), ("min", 18), ("add", 18), ("none", 18)]
)
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_scatter_nd_reductions(check, reduction, opset, dtype):
    indices = [[0], [2], [0]] if reduction != "none" else [[0], [2], [1]]
    constants = {"i": np.array(indices, np.int64), "u": sample((3, 3), dtype, seed=1)}
    run(check, "ScatterND", {"x": sample((4, 3), dtype)}, constants, opset=opset, reduction=reduction)


SCATTER_ELEMENTS = [
    ((3, 3), [[1, 0, 2], [0, 2, 1]], 0),
    ((1, 5), [[1, 3]], 1),
    ((2, 3, 2), [[[0, 1]], [[-1, 0]]], -1),
    ((3, 3), np.zeros((0, 3), int), 0),
]


@pytest.mark.parametrize(("shape", "indices", "axis"), SCATTER_ELEMENTS)
@pytest.mark.parametrize("dtype", [np.float32, np.int64, bool])
@pytest.mark.parametrize("opset", [11, 13, 16, 18])
def test_scatter_elements(check, shape, indices, axis, dtype, opset):
    indices = np.array(indices, np.int64)
    constants = {"i": indices, "u": sample(indices.shape, dtype, seed=1)}
    run(check, "ScatterElements", {"x": sample(shape, dtype)}, constants, opset=opset, axis=axis)


@pytest.mark.parametrize(
    ("reduction", "opset"), [("add", 16), ("mul", 16), ("max", 18), ("min", 18), ("mul", 18)]
)
def test_scatter_elements_reductions(check, reduction, opset):
    constants = {"i": np.array([[1, 1, 0], [1, 1, 1]], np.int64), "u": sample((2, 3), seed=1)}
    run(check, "ScatterElements", {"x": sample((2, 3))}, constants, opset=opset, axis=1, reduction=reduction)


@pytest.mark.parametrize("dtype", [np.float32, np.int64, object])
@pytest.mark.parametrize(
    ("shape", "condition", "axis"),
    [
        ((3, 2), [0, 1, 1], 0),
        ((3, 2), [True, False], 1),
        ((3, 2), [False, True, True, False, True], None),
        ((3, 2), [1], -2),
        ((3, 2), [0, 0, 0], 0),
        ((0, 2), [], 0),
    ],
)
@pytest.mark.parametrize("opset", [9, 11])
def test_compress(check, shape, condition, axis, dtype, opset):
    attrs = {} if axis is None else {"axis": axis}
    if axis is not None and axis < 0 and opset < 11:
        pytest.skip("negative axes arrived in opset 11")
    constants = {"c": np.array(condition, dtype=bool)}
    run(check, "Compress", {"x": sample(shape, dtype)}, constants, opset=opset, **attrs)


@pytest.mark.parametrize("dtype", [np.float32, np.int32, bool])
@pytest.mark.parametrize("shape", [(6,), (3, 4), (2, 2, 3), (0, 3)])
def test_non_zero(check, shape, dtype):
    x = sample(shape, dtype)
    if dtype is not bool:
        x[x > 2] = 0
    run(check, "NonZero", {"x": x})


@pytest.mark.parametrize(
    "x", [np.zeros((2, 3), np.float32), np.array(3.0, np.float32), np.array(0, np.int64)]
)
def test_non_zero_all_zero_and_scalars(check, x):
    run(check, "NonZero", {"x": x})


TOPK = [
    ((3, 4), 2, -1),
    ((3, 4), 3, 0),
    ((3, 4), 4, 1),
    ((3, 4), 0, 1),
    ((2, 3, 4), 1, 1),
]


@pytest.mark.parametrize(("shape", "k", "axis"), TOPK)
@pytest.mark.parametrize("largest", [1, 0])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.int32, np.uint8])
def test_top_k(check, shape, k, axis, largest, dtype):
    constants = {"k": ints(k)}
    run(
        check, "TopK", {"x": sample(shape, dtype)}, constants, outputs=2, opset=11, axis=axis, largest=largest
    )


@pytest.mark.parametrize("largest", [1, 0])
def test_top_k_ties_keep_index_order(check, largest):
    x = np.array([[1, 3, 3, 2, 3, 1], [5, 5, 5, 5, 5, 5]], np.float32)
    run(check, "TopK", {"x": x}, {"k": ints(4)}, outputs=2, opset=11, largest=largest)


@pytest.mark.parametrize("largest", [1, 0])
def test_top_k_nan_sorts_as_largest(check, largest):
    x = np.array([1, np.nan, 3, np.nan, 2], np.float32)
    run(check, "TopK", {"x": x}, {"k": ints(4)}, outputs=2, opset=11, largest=largest)


def test_top_k_opset1_attribute(check):
    run(check, "TopK", {"x": sample((3, 5))}, outputs=2, opset=1, k=2, axis=0)


def test_top_k_opset10_input(check):
    run(check, "TopK", {"x": sample((3, 5))}, {"k": ints(3)}, outputs=2, opset=10)


@pytest.mark.parametrize("dtype", [np.float32, np.int64])
@pytest.mark.parametrize(
    ("data", "axis"),
    [
        ([2, 1, 1, 3, 4, 3], None),
        ([[1, 3], [1, 3], [2, 0]], 0),
        ([[1, 1, 0], [1, 1, 0]], 1),
        ([[1, 1, 0], [1, 1, 0]], -1),
        ([[5, 1], [2, 5]], None),
        (np.zeros((0,)), None),
    ],
)
@pytest.mark.parametrize("sorted_", [1, 0])
def test_unique(check, data, axis, dtype, sorted_):
    attrs = {"sorted": sorted_} | ({} if axis is None else {"axis": axis})
    run(check, "Unique", {"x": np.array(data, dtype=dtype)}, outputs=4, opset=11, **attrs)


def test_unique_values_only(check):
    run(check, "Unique", {"x": np.array([3, 1, 3], np.int64)}, outputs=1, opset=11)


#: (indices, values, depth) dtypes onnxruntime has OneHot kernels for.
ONE_HOT_TYPES = [
    (np.int64, np.int64, np.int64),
    (np.int64, np.float32, np.int32),
    (np.int64, np.int32, np.float32),
    (np.int32, np.float32, np.float32),
    (np.float32, np.float32, np.float32),
    (np.float32, np.int64, np.int64),
    (np.int64, object, np.int64),
]


@pytest.mark.parametrize(
    ("indices", "axis"),
    [([0, 2, 1], -1), ([[1, -1], [0, 3]], 0), ([[1, -1], [0, 3]], 1), ([[1, 4], [-4, 9]], -1), ([3], 0)],
)
@pytest.mark.parametrize(("index_dtype", "value_dtype", "depth_dtype"), ONE_HOT_TYPES)
@pytest.mark.parametrize("opset", [9, 11])
def test_one_hot(check, indices, axis, index_dtype, value_dtype, depth_dtype, opset):
    if opset < 11 and np.min(indices) < 0:
        pytest.skip("negative indices arrived in opset 11")
    values = np.array(["off", "on"] if value_dtype is object else [2, 5], dtype=value_dtype)
    constants = {"depth": np.array(4, depth_dtype), "values": values}
    run(check, "OneHot", {"i": np.array(indices, index_dtype)}, constants, opset=opset, axis=axis)


@pytest.mark.parametrize(
    ("shape", "lengths", "batch_axis", "time_axis"),
    [
        ((4, 3), [4, 2, 1], 1, 0),
        ((3, 4), [1, 2, 3], 0, 1),
        ((4, 2, 3), [3, 0], 1, 0),
        ((2, 5, 2), [5, 1], 0, 1),
    ],
)
@pytest.mark.parametrize("dtype", [np.float32, np.int64, object])
def test_reverse_sequence(check, shape, lengths, batch_axis, time_axis, dtype):
    run(
        check,
        "ReverseSequence",
        {"x": sample(shape, dtype)},
        {"lens": ints(*lengths)},
        batch_axis=batch_axis,
        time_axis=time_axis,
    )


@pytest.mark.parametrize("k", [None, -1, 0, 2, 7])
@pytest.mark.parametrize("upper", [1, 0])
@pytest.mark.parametrize(("shape", "dtype"), [((4, 4), np.float32), ((2, 3, 5), np.int64), ((5, 2), bool)])
def test_trilu(check, k, upper, shape, dtype):
    constants = None if k is None else {"k": ints(k)}
    run(check, "Trilu", {"x": sample(shape, dtype)}, constants, opset=14, upper=upper)


def test_trilu_empty(check):
    run(check, "Trilu", {"x": sample((0, 3))}, {"k": ints(1)}, opset=14)


# ---------------------------------------------------------------------------- generators


@pytest.mark.parametrize(
    ("attr", "value"),
    [
        ("value", numpy_helper.from_array(sample((2, 3)), "v")),
        ("value", numpy_helper.from_array(np.array(["a", "bc"], dtype=object), "v")),
        ("value_float", 2.5),
        ("value_floats", [1.0, -2.0]),
        ("value_int", 7),
        ("value_ints", [1, 2, 3]),
        ("value_string", "hello"),
        ("value_strings", ["x", "yz"]),
    ],
)
def test_constant(check, attr, value):
    check(make_model("Constant", {}, opset=13, **{attr: value}), {})


@pytest.mark.parametrize("opset", [1, 9, 11])
def test_constant_versions(check, opset):
    tensor = numpy_helper.from_array(ints(4, 5), "v")
    check(make_model("Constant", {}, opset=opset, value=tensor), {})


def test_constant_sparse_value():
    sparse = helper.make_sparse_tensor(
        numpy_helper.from_array(np.array([5.0, 6.0], np.float32), "values"),
        numpy_helper.from_array(ints(1, 4), "indices"),
        [2, 3],
    )
    (got,) = run_spawnml(make_model("Constant", {}, opset=13, sparse_value=sparse), {})
    np.testing.assert_array_equal(got, np.array([[0, 5, 0], [0, 6, 0]], np.float32))


@pytest.mark.parametrize(
    "value",
    [None, np.array([5], np.int64), np.array([1.5], np.float64), np.array([True]), np.array([3], np.int8)],
)
@pytest.mark.parametrize("target", [[2, 3], [], [0, 4]])
def test_constant_of_shape(check, value, target):
    attrs = {} if value is None else {"value": numpy_helper.from_array(value, "value")}
    check(make_model("ConstantOfShape", {}, initializers={"shape": ints(*target)}, **attrs), {})


def test_constant_of_shape_from_input(check):
    target = ints(3, 1, 2)
    check(make_model("ConstantOfShape", {"shape": target}), {"shape": target})


RANGES = [(0, 10, 3), (10, 4, -2), (1, 1, 1), (5, 0, 1), (-3, 3, 2)]


@pytest.mark.parametrize(("start", "limit", "delta"), [*RANGES, (0.5, 2.3, 0.25), (1.0, -1.0, -0.3)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int16, np.int32, np.int64])
@pytest.mark.parametrize("constant", [True, False])
def test_range(check, start, limit, delta, dtype, constant):
    if isinstance(delta, float) and np.issubdtype(dtype, np.integer):
        pytest.skip("fractional ranges need a float dtype")
    values = {
        "start": np.array(start, dtype),
        "limit": np.array(limit, dtype),
        "delta": np.array(delta, dtype),
    }
    if constant:
        check(make_model("Range", {}, initializers=values), {})
    else:
        run(check, "Range", values)


@pytest.mark.parametrize("opset", [11, 27])
def test_range_versions(check, opset):
    values = {"limit": np.array(20, np.float32), "delta": np.array(1.5, np.float32)}
    run(check, "Range", {"start": np.array(2, np.float32)}, values, opset=opset)


@pytest.mark.parametrize(
    "dtype_code", [None, onnx.TensorProto.INT32, onnx.TensorProto.INT64, onnx.TensorProto.DOUBLE]
)
@pytest.mark.parametrize("k", [0, 1, -2, 5])
@pytest.mark.parametrize("shape", [(3, 3), (2, 4), (4, 2), (0, 2)])
def test_eye_like(check, dtype_code, k, shape):
    attrs = {"k": k} | ({} if dtype_code is None else {"dtype": dtype_code})
    run(check, "EyeLike", {"x": sample(shape)}, **attrs)


@pytest.mark.parametrize(("opset", "outputs"), [(7, 1), (10, 1), (12, 1), (12, 2), (13, 2), (22, 2)])
def test_dropout_inference(check, opset, outputs):
    run(check, "Dropout", {"x": sample((3, 4))}, outputs=outputs, opset=opset)


@pytest.mark.parametrize(("opset", "mask_dtype"), [(7, np.float32), (10, bool)])
def test_dropout_mask_before_opset12(opset, mask_dtype):
    # onnxruntime fills this mask with zeros; ONNX's reference, like SpawnML, keeps every element
    x = sample((3, 2))
    out, mask = run_spawnml(make_model("Dropout", {"x": x}, outputs=2, opset=opset), {"x": x})
    np.testing.assert_array_equal(out, x)
    assert mask.dtype == mask_dtype and mask.all()


@pytest.mark.parametrize("training", [False, None])
def test_dropout_inputs_in_inference(check, training):
    constants = {"ratio": np.array(0.3, np.float32)}
    if training is not None:
        constants["training_mode"] = np.array(training)
    run(check, "Dropout", {"x": sample((2, 5))}, constants, outputs=2, opset=13)


@pytest.mark.parametrize("opset", [1, 6])
def test_dropout_old_versions_copy(opset):
    x = sample((3, 2))
    out, mask = run_spawnml(make_model("Dropout", {"x": x}, outputs=2, opset=opset, is_test=1), {"x": x})
    np.testing.assert_array_equal(out, x)
    np.testing.assert_array_equal(mask, np.ones_like(x))


def test_dropout_training_scales_kept_values():
    x = sample((200, 50)) + 100
    constants = {"ratio": np.array(0.25, np.float32), "training_mode": np.array(True)}
    model = make_model("Dropout", {"x": x}, outputs=2, opset=13, initializers=constants, seed=3)
    out, mask = run_spawnml(model, {"x": x})
    assert mask.dtype == bool and out.dtype == x.dtype
    np.testing.assert_allclose(out[mask], x[mask] / 0.75, rtol=1e-6)
    assert not out[~mask].any()
    assert 0.2 < 1 - mask.mean() < 0.3


# ---------------------------------------------------------------------------- einsum

EINSUMS = [
    ("ij,jk->ik", [(2, 3), (3, 4)]),
    ("bij,bjk->bik", [(2, 2, 3), (2, 3, 4)]),
    ("ii->i", [(3, 3)]),
    ("ii", [(3, 3)]),
    ("ij->ji", [(2, 3)]),
    ("ij", [(2, 3)]),
    ("ji", [(2, 3)]),
    ("...ij,...jk->...ik", [(2, 1, 2, 3), (1, 3, 3, 4)]),
    ("i,i", [(5,), (5,)]),
    ("i,j->ij", [(2,), (3,)]),
    ("ij,ij->ij", [(2, 3), (2, 3)]),
    ("bhid,bhjd->bhij", [(1, 2, 3, 4), (1, 2, 5, 4)]),
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 2)]),
    ("b...i->b...", [(2, 3, 4)]),
    ("ij, jk -> ik", [(2, 3), (3, 1)]),
    ("ij,jk->ik", [(0, 3), (3, 4)]),
]


@pytest.mark.parametrize(("equation", "shapes"), EINSUMS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64])
def test_einsum(check, equation, shapes, dtype):
    inputs = {f"x{i}": sample(shape, dtype, seed=i) for i, shape in enumerate(shapes)}
    model = make_model("Einsum", inputs, opset=12, equation=equation)
    check(model, inputs, rtol=1e-4, atol=1e-4)


# ---------------------------------------------------------------------------- shape inference


def _inferred(op: str, inputs: dict[str, tuple], constants=None, opset: int = 17, outputs=1, **attrs):
    """Output shapes SpawnML infers for a one-node model with symbolic input dims."""
    infos = [
        helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, shape) for name, shape in inputs.items()
    ]
    constants = constants or {}
    names = [f"y{i}" for i in range(outputs)]
    node = helper.make_node(op, [*inputs, *constants], names, **attrs)
    graph = helper.make_graph(
        [node],
        "g",
        infos,
        [helper.make_value_info(name, onnx.TypeProto()) for name in names],
        [numpy_helper.from_array(array, name) for name, array in constants.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)
    graph = spawnml.load(model.SerializeToString())
    types = spawnml.passes.infer_shapes(graph)
    return [types[name].shape for name in names]


@pytest.mark.parametrize(
    ("op", "inputs", "constants", "attrs", "expected"),
    [
        ("Reshape", {"x": ("N", 3, 4)}, {"s": ints(0, -1)}, {}, [("N", 12)]),
        ("Reshape", {"x": ("N", "T", 4)}, {"s": ints(-1, 4)}, {}, [(None, 4)]),
        ("Reshape", {"x": ("N", "T", 4)}, {"s": ints(0, 0, 2, 2)}, {}, [("N", "T", 2, 2)]),
        ("Reshape", {"x": (2, "T", 4)}, {"s": ints(8, -1)}, {}, [(8, "T")]),
        ("Transpose", {"x": ("N", 3, "C")}, {}, {"perm": [2, 0, 1]}, [("C", "N", 3)]),
        ("Slice", {"x": ("N", 6)}, {"s": ints(0, 1), "e": ints(INT64_MAX, 3)}, {}, [("N", 2)]),
        ("Slice", {"x": ("N", 6)}, {"s": ints(1), "e": ints(INT64_MAX)}, {}, [(None, 6)]),
        ("Concat", {"a": ("N", 2), "b": ("N", 3)}, {}, {"axis": 1}, [("N", 5)]),
        ("Concat", {"a": ("N", 2), "b": ("M", 2)}, {}, {"axis": 0}, [(None, 2)]),
        ("Shape", {"x": ("N", 3)}, {}, {}, [(2,)]),
        ("Unsqueeze", {"x": ("N", 3)}, {"a": ints(0, -1)}, {}, [(1, "N", 3, 1)]),
        ("Squeeze", {"x": ("N", 1)}, {"a": ints(1)}, {}, [("N",)]),
        ("Squeeze", {"x": ("N", 1)}, {}, {}, [None]),
        ("Flatten", {"x": ("N", 3, 4)}, {}, {"axis": 1}, [("N", 12)]),
        ("Flatten", {"x": ("N", 3, 4)}, {}, {"axis": 2}, [(None, 4)]),
        ("Gather", {"x": ("N", 5)}, {"i": ints(0, 1, 2)}, {"axis": 1}, [("N", 3)]),
        ("Expand", {"x": ("N", 1)}, {"s": ints(1, 4)}, {}, [("N", 4)]),
        ("Tile", {"x": ("N", 2)}, {"r": ints(1, 3)}, {}, [("N", 6)]),
        ("Pad", {"x": ("N", 2)}, {"p": ints(0, 1, 0, 1)}, {}, [("N", 4)]),
        ("Split", {"x": ("N", 6)}, {}, {"axis": 1, "num_outputs": 2}, [("N", 3), ("N", 3)]),
        ("TopK", {"x": ("N", 9)}, {"k": ints(2)}, {}, [("N", 2), ("N", 2)]),
        ("NonZero", {"x": ("N", 9)}, {}, {}, [(2, None)]),
        ("Einsum", {"a": ("B", 2, 3), "b": ("B", 3, 4)}, {}, {"equation": "bij,bjk->bik"}, [("B", 2, 4)]),
        ("Einsum", {"a": ("B", 2, 3)}, {}, {"equation": "...ij->...ji"}, [("B", 3, 2)]),
        ("OneHot", {"i": ("N",)}, {"d": ints(5), "v": ints(0, 1)}, {"axis": 0}, [(5, "N")]),
    ],
)
def test_symbolic_inference(op, inputs, constants, attrs, expected):
    opset = 18 if op == "Split" else 17
    assert _inferred(op, inputs, constants, opset=opset, outputs=len(expected), **attrs) == expected


def test_inference_without_constant_keeps_rank():
    graph_inputs = {"x": (2, 3, 4), "s": (2,)}
    assert _inferred("Reshape", graph_inputs) == [(None, None)]


@pytest.mark.parametrize(
    ("op", "inputs", "outputs"),
    [
        ("Reshape", {"x": sample((2, 6)), "s": ints(3, -1)}, 1),
        ("Slice", {"x": sample((4, 5)), "s": ints(1, 0), "e": ints(3, -1), "a": ints(0, 1)}, 1),
        ("Unsqueeze", {"x": sample((2, 3)), "a": ints(1)}, 1),
        ("Squeeze", {"x": sample((2, 1)), "a": ints(-1)}, 1),
        ("Expand", {"x": sample((3, 1)), "s": ints(2, 3, 4)}, 1),
        ("Tile", {"x": sample((2, 3)), "r": ints(2, 1)}, 1),
        ("Pad", {"x": sample((2, 3)), "p": ints(1, 0, 0, 2)}, 1),
        ("Split", {"x": sample((5, 2)), "s": ints(2, 3)}, 2),
        ("TopK", {"x": sample((3, 5)), "k": ints(2)}, 2),
        ("OneHot", {"i": ints(0, 3), "d": ints(4), "v": np.array([0, 1], np.float32)}, 1),
        ("ConstantOfShape", {"s": ints(2, 2)}, 1),
        (
            "Range",
            {"a": np.array(1, np.int32), "b": np.array(9, np.int32), "c": np.array(3, np.int32)},
            1,
        ),
        ("Trilu", {"x": sample((3, 3)), "k": ints(1)}, 1),
    ],
)
def test_value_inputs_fed_at_run_time(check, op, inputs, outputs):
    run(check, op, inputs, outputs=outputs)


# ---------------------------------------------------------------------------- refusals at load


@pytest.mark.parametrize(
    ("op", "opset", "attrs", "constants"),
    [
        ("Pad", 18, {"mode": "wrap"}, {"pads": ints(0, 1)}),
        ("Pad", 13, {"mode": "mirror"}, {"pads": ints(0, 1)}),
        ("ScatterND", 16, {"reduction": "max"}, {"i": ints(0).reshape(1, 1), "u": sample((1,))}),
        ("DepthToSpace", 13, {"mode": "XYZ", "blocksize": 1}, {}),
        ("Einsum", 12, {"equation": "i.j->ij"}, {}),
        ("Einsum", 12, {"equation": "i->j"}, {}),
        ("Einsum", 12, {"equation": "i->ii"}, {}),
    ],
)
def test_refused_at_load(op, opset, attrs, constants):
    x = sample((2,) if op != "DepthToSpace" else (1, 1, 1, 1))
    model = make_model(op, {"x": x}, opset=opset, initializers=constants, **attrs)
    with pytest.raises(spawnml.SpawnMLError):
        spawnml.InferenceSession(model.SerializeToString(), providers=["cpu"])


def test_constant_with_two_values_is_refused():
    model = make_model("Constant", {}, opset=13, value_int=1, value_float=2.0)
    with pytest.raises(spawnml.SpawnMLError):
        spawnml.InferenceSession(model.SerializeToString(), providers=["cpu"])
