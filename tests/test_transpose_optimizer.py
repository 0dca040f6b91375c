"""Transpose optimization: models in tf2onnx's NHWC pattern lose their Transposes, keep results.

Every graph is run optimized (level ``extended`` or ``all``) and unoptimized on the CPU backend
and against onnxruntime with its optimizations disabled. Moving a Transpose only reorders data,
but a reduction or a convolution may then add in another order: float32 results agree within
``rtol=1e-5, atol=1e-5``.
"""

from __future__ import annotations

import itertools

import numpy as np
import onnx
import onnxruntime
import pytest
import spawnml
from onnx import TensorProto, helper, numpy_helper
from spawnml.session import SessionOptions

RTOL = ATOL = 1e-5
FLOAT = TensorProto.FLOAT
RNG = np.random.default_rng(13)
TO_NCHW, TO_NHWC = [0, 3, 1, 2], [0, 2, 3, 1]


def const(name: str, array: np.ndarray) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(array), name)


def weight(name: str, *shape: int) -> onnx.TensorProto:
    return const(name, RNG.uniform(-1, 1, shape).astype(np.float32))


def tensor(name: str, shape, elem: int = FLOAT) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, elem, None if shape is None else list(shape))


def model(nodes, inputs, outputs, initializers=(), opset: int = 17) -> bytes:
    graph = helper.make_graph(nodes, "nhwc", inputs, outputs, list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]).SerializeToString()


def transposes(data: bytes, level: str = "all") -> int:
    options = SessionOptions(graph_optimization_level=level)
    graph = spawnml.InferenceSession(data, options, providers=["cpu"]).graph
    return sum(node.op_type == "Transpose" for node in graph.nodes)


def assert_same_results(data: bytes, feeds: dict[str, np.ndarray], level: str = "all") -> None:
    """The optimized session agrees with the unoptimized one and with onnxruntime unoptimized."""
    plain = spawnml.InferenceSession(data, SessionOptions(graph_optimization_level="disable"))
    fast = spawnml.InferenceSession(data, SessionOptions(graph_optimization_level=level))
    options = onnxruntime.SessionOptions()
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
    reference = onnxruntime.InferenceSession(data, options, providers=["CPUExecutionProvider"])
    want = reference.run(None, feeds)
    for got in (fast.run(None, feeds), plain.run(None, feeds)):
        for ours, theirs in zip(got, want, strict=True):
            assert ours.dtype == theirs.dtype and ours.shape == theirs.shape
            np.testing.assert_allclose(ours, theirs, rtol=RTOL, atol=ATOL)


# tf2onnx's pattern -----------------------------------------------------------------------------


def conv_block(x: str, out: str, channels: int, prefix: str) -> tuple[list, list]:
    """``x`` (NHWC) -> Transpose -> Conv 3x3 -> Transpose -> ``out`` (NHWC), as tf2onnx writes it."""
    nodes = [
        helper.make_node("Transpose", [x], [f"{prefix}_nchw"], perm=TO_NCHW),
        helper.make_node(
            "Conv", [f"{prefix}_nchw", f"{prefix}_w", f"{prefix}_b"], [f"{prefix}_c"], pads=[1] * 4
        ),
        helper.make_node("Transpose", [f"{prefix}_c"], [out], perm=TO_NHWC),
    ]
    return nodes, [weight(f"{prefix}_w", channels, channels, 3, 3), weight(f"{prefix}_b", channels)]


def residual_body(channels: int = 4) -> tuple[list, list]:
    """Two residual blocks: Conv -> Relu -> Conv -> Add(residual) -> Relu, all between Transposes;
    ends in ``r2`` (NHWC)."""
    nodes, inits = [], []
    source = "x"
    for block in (1, 2):
        first, w1 = conv_block(source, f"a{block}", channels, f"conv{block}a")
        second, w2 = conv_block(f"relu{block}", f"c{block}", channels, f"conv{block}b")
        nodes += [*first, helper.make_node("Relu", [f"a{block}"], [f"relu{block}"]), *second]
        nodes += [
            helper.make_node("Add", [f"c{block}", source], [f"sum{block}"]),
            helper.make_node("Relu", [f"sum{block}"], [f"r{block}"]),
        ]
        inits += w1 + w2
        source = f"r{block}"
    return nodes, inits


def nhwc_input(*shape: int) -> dict[str, np.ndarray]:
    return {"x": RNG.normal(size=shape).astype(np.float32)}


@pytest.mark.parametrize("level", ["extended", "all"])
def test_residual_blocks_then_global_mean_keep_one_transpose(level):
    """The graph input's Transpose stays; ReduceMean over H and W leaves N, C in either layout."""
    nodes, inits = residual_body()
    nodes.append(helper.make_node("ReduceMean", ["r2"], ["y"], axes=[1, 2], keepdims=0))
    data = model(nodes, [tensor("x", [1, 6, 6, 4])], [tensor("y", [1, 4])], inits)
    assert transposes(data, "disable") == 8
    assert transposes(data, level) == 1
    assert_same_results(data, nhwc_input(1, 6, 6, 4), level)


def test_conv_activation_fuses_once_the_transpose_between_them_moves():
    nodes, inits = residual_body()
    nodes.append(helper.make_node("ReduceMean", ["r2"], ["y"], axes=[1, 2], keepdims=1))
    data = model(nodes, [tensor("x", [1, 6, 6, 4])], [tensor("y", [1, 1, 1, 4])], inits)
    graph = spawnml.InferenceSession(data, SessionOptions(graph_optimization_level="extended")).graph
    ops = [node.op_type for node in graph.nodes]
    assert ops.count("Transpose") == 2 and "Conv" not in ops and "Relu" not in ops
    assert_same_results(data, nhwc_input(1, 6, 6, 4), "extended")


TAILS = {
    # name: (nodes after r2, extra initializers, output shape, Transposes left: input's + output's)
    "concat": (
        [helper.make_node("Concat", ["r2", "r1"], ["y"], axis=-1)],
        [],
        [1, 6, 6, 8],
        2,
    ),
    "pad": (
        [helper.make_node("Pad", ["r2", "pads"], ["y"], mode="reflect")],
        [const("pads", np.array([0, 1, 2, 0, 0, 2, 1, 0], np.int64))],
        [1, 9, 9, 4],
        2,
    ),
    "slice": (
        [helper.make_node("Slice", ["r2", "starts", "ends", "axes", "steps"], ["y"])],
        [
            const("starts", np.array([1, 0, 5], np.int64)),
            const("ends", np.array([3, 6, 0], np.int64)),
            const("axes", np.array([-1, 2, 1], np.int64)),
            const("steps", np.array([1, 2, -2], np.int64)),
        ],
        [1, 3, 3, 2],
        2,
    ),
    "resize": (
        [helper.make_node("Resize", ["r2", "", "scales"], ["y"], mode="linear")],
        [const("scales", np.array([1, 2, 1.5, 1], np.float32))],
        [1, 12, 9, 4],
        2,
    ),
    "resize_sizes": (
        [helper.make_node("Resize", ["r2", "", "", "sizes"], ["y"], mode="nearest")],
        [const("sizes", np.array([1, 12, 9, 4], np.int64))],
        [1, 12, 9, 4],
        2,
    ),
    "resize_of_channels_stays": (
        [helper.make_node("Resize", ["r2", "", "scales"], ["y"], mode="nearest")],
        [const("scales", np.array([1, 1, 2, 2], np.float32))],
        [1, 6, 12, 8],
        2,  # the Transpose stays before it
    ),
    "mean_of_concat_of_mul": (
        [
            helper.make_node("Mul", ["r2", "gain"], ["g"]),
            helper.make_node("Concat", ["g", "r1"], ["cat"], axis=3),
            helper.make_node("ReduceMean", ["cat"], ["y"], axes=[1, 2], keepdims=0),
        ],
        [weight("gain", 4)],
        [1, 8],
        1,
    ),
    "split_squeeze": (
        [
            helper.make_node("Split", ["r2"], ["s1", "s2"], axis=1),
            helper.make_node("Sub", ["s1", "s2"], ["d"]),
            helper.make_node("ReduceMax", ["d"], ["m"], axes=[1], keepdims=1),
            helper.make_node("Squeeze", ["m", "one"], ["y"]),
        ],
        [const("one", np.array([1], np.int64))],
        [1, 6, 4],
        2,
    ),
}


@pytest.mark.parametrize("tail", sorted(TAILS))
def test_nhwc_tails(tail):
    after, extra, shape, left = TAILS[tail]
    nodes, inits = residual_body()
    data = model(nodes + after, [tensor("x", [1, 6, 6, 4])], [tensor("y", shape)], inits + extra)
    assert transposes(data) == left
    assert_same_results(data, nhwc_input(1, 6, 6, 4))


def test_graph_outputs_keep_their_names_and_layouts():
    """An NHWC value that is a graph output, and read on, keeps its Transpose."""
    nodes, inits = residual_body()
    nodes.append(helper.make_node("ReduceMean", ["r2"], ["y"], axes=[1, 2], keepdims=0))
    outputs = [tensor("y", [1, 4]), tensor("r1", [1, 6, 6, 4])]
    data = model(nodes, [tensor("x", [1, 6, 6, 4])], outputs, inits)
    session = spawnml.InferenceSession(data)
    assert [arg.name for arg in session.get_outputs()] == ["y", "r1"]
    assert transposes(data) == 2
    assert_same_results(data, nhwc_input(1, 6, 6, 4))


def test_a_transpose_read_by_an_operator_that_needs_its_layout_stays_put():
    """Reshape needs NHWC; moving the Transpose through the Relu beside it would add one."""
    nodes = [
        helper.make_node("Transpose", ["x"], ["t"], perm=TO_NHWC),
        helper.make_node("Relu", ["t"], ["y"]),
        helper.make_node("Reshape", ["t", "shape"], ["z"]),
    ]
    inits = [const("shape", np.array([1, -1], np.int64))]
    data = model(nodes, [tensor("x", [1, 4, 3, 3])], [tensor("y", [1, 3, 3, 4]), tensor("z", [1, 36])], inits)
    graph = spawnml.InferenceSession(data).graph
    assert [node.op_type for node in graph.nodes] == ["Transpose", "Relu", "Reshape"]
    assert_same_results(data, {"x": RNG.normal(size=(1, 4, 3, 3)).astype(np.float32)})


def test_a_non_constant_addend_of_lower_rank_is_unsqueezed_and_transposed():
    nodes = [
        helper.make_node("Transpose", ["x"], ["t"], perm=TO_NHWC),
        helper.make_node("Transpose", ["x2"], ["t2"], perm=TO_NHWC),
        helper.make_node("Add", ["t", "t2"], ["s"]),
        helper.make_node("Mul", ["s", "v"], ["m"]),
        helper.make_node("Transpose", ["m"], ["y"], perm=TO_NCHW),
    ]
    inputs = [tensor("x", [2, 4, 3, 5]), tensor("x2", [2, 4, 3, 5]), tensor("v", [5, 4])]
    data = model(nodes, inputs, [tensor("y", [2, 4, 3, 5])])
    assert transposes(data) == 1  # v's, once it is unsqueezed
    feeds = {
        name: RNG.normal(size=shape).astype(np.float32)
        for name, shape in (("x", (2, 4, 3, 5)), ("x2", (2, 4, 3, 5)), ("v", (5, 4)))
    }
    assert_same_results(data, feeds)


def test_quantize_dequantize_per_tensor_and_per_axis():
    nodes = [
        helper.make_node("Transpose", ["x"], ["t"], perm=TO_NHWC),
        helper.make_node("QuantizeLinear", ["t", "scale", "zero"], ["q"]),
        helper.make_node("DequantizeLinear", ["q", "scales", "zeros"], ["d"], axis=3),
        helper.make_node("Transpose", ["d"], ["y"], perm=TO_NCHW),
    ]
    inits = [const("scale", np.float32(0.05)), const("zero", np.uint8(128))]
    inits += [
        const("scales", np.array([0.05, 0.1, 0.02], np.float32)),
        const("zeros", np.full(3, 120, np.uint8)),
    ]
    data = model(nodes, [tensor("x", [1, 3, 4, 4])], [tensor("y", [1, 3, 4, 4])], inits)
    assert transposes(data) == 0
    assert_same_results(data, {"x": RNG.normal(size=(1, 3, 4, 4)).astype(np.float32)})


# Property-style: random permutations and axes for each operator ----------------------------------

SHAPE = (2, 3, 4, 5)


def random_case(op: str, rng: np.random.Generator) -> tuple[list, list, list[int], list]:
    """``Transpose(x, perm) -> op -> Transpose(inverse)`` with random axes; the nodes between the
    Transposes, their initializers, and the shape after ``op`` (in the transposed layout)."""
    perm = [int(axis) for axis in rng.permutation(4)]
    shape = [SHAPE[axis] for axis in perm]
    axes = sorted(int(axis) for axis in rng.choice(4, size=int(rng.integers(1, 3)), replace=False))
    signed = [axis - 4 if rng.random() < 0.5 else axis for axis in axes]
    keep = int(rng.integers(0, 2))
    inits: list = []
    if op in ("Add", "Mul", "Div", "Max", "Where"):
        rank = int(rng.integers(0, 5))
        other = [shape[4 - rank + i] if rng.random() < 0.7 else 1 for i in range(rank)]
        inits.append(const("k", RNG.uniform(0.5, 1.5, other).astype(np.float32)))
        if op == "Where":
            inits.append(const("cond", RNG.random(other) < 0.5))
            node = helper.make_node("Where", ["cond", "t", "k"], ["o"])
        else:
            node = helper.make_node(op, ["t", "k"], ["o"])
        out = shape
    elif op in ("Relu", "Sigmoid", "Exp", "Neg"):
        node, out = helper.make_node(op, ["t"], ["o"]), shape
    elif op == "Clip":
        inits += [const("lo", np.float32(-0.3)), const("hi", np.float32(0.4))]
        node, out = helper.make_node("Clip", ["t", "lo", "hi"], ["o"]), shape
    elif op in ("ReduceMean", "ReduceSum", "ReduceMax", "ReduceL2"):
        inits.append(const("axes", np.array(signed, np.int64)))
        node = helper.make_node(op, ["t", "axes"], ["o"], keepdims=keep)
        out = [1 if axis in axes else size for axis, size in enumerate(shape)]
        out = out if keep else [size for axis, size in enumerate(shape) if axis not in axes]
    elif op == "ArgMax":
        node = helper.make_node("ArgMax", ["t"], ["o"], axis=signed[0], keepdims=keep)
        out = [1 if axis == axes[0] else size for axis, size in enumerate(shape)]
        out = out if keep else [size for axis, size in enumerate(shape) if axis != axes[0]]
    elif op == "Softmax":
        node, out = helper.make_node("Softmax", ["t"], ["o"], axis=signed[0]), shape
    elif op == "Concat":
        node = helper.make_node("Concat", ["t", "t"], ["o"], axis=signed[0])
        out = [size * 2 if axis == axes[0] else size for axis, size in enumerate(shape)]
    elif op == "Split":
        node = helper.make_node("Split", ["t"], ["o", "o2"], axis=signed[0], num_outputs=2)
        out = [(size + 1) // 2 if axis == axes[0] else size for axis, size in enumerate(shape)]
    elif op == "Pad":
        pads = [int(p) for p in rng.integers(0, 3, 8)]
        inits.append(const("pads", np.array(pads, np.int64)))
        node = helper.make_node("Pad", ["t", "pads"], ["o"], mode=str(rng.choice(["constant", "edge"])))
        out = [size + pads[axis] + pads[axis + 4] for axis, size in enumerate(shape)]
    elif op == "Slice":
        inits += [
            const("starts", np.ones(len(axes), np.int64)),
            const("ends", np.full(len(axes), -1, np.int64)),
        ]
        inits.append(const("axes", np.array(signed, np.int64)))
        node = helper.make_node("Slice", ["t", "starts", "ends", "axes"], ["o"])
        out = [size - 2 if axis in axes else size for axis, size in enumerate(shape)]
    elif op == "Unsqueeze":  # (axes counted in the output's rank: negative ones could repeat)
        inits.append(const("axes", np.array(axes, np.int64)))
        node = helper.make_node("Unsqueeze", ["t", "axes"], ["o"])
        rest = iter(shape)
        out = [1 if axis in axes else next(rest) for axis in range(4 + len(axes))]
    elif op == "Resize":
        scales = [1.0] * 4
        for axis in axes:
            scales[axis] = 2.0
        inits.append(const("scales", np.array(scales, np.float32)))
        node = helper.make_node(
            "Resize", ["t", "", "scales"], ["o"], mode=str(rng.choice(["nearest", "linear"]))
        )
        out = [int(size * scale) for size, scale in zip(shape, scales, strict=True)]
    else:
        raise AssertionError(op)
    return [helper.make_node("Transpose", ["x"], ["t"], perm=perm), node], inits, out, perm


PROPERTY_OPS = (
    "Add Mul Div Max Where Relu Sigmoid Exp Neg Clip ReduceMean ReduceSum ReduceMax ReduceL2 ArgMax Softmax "
    "Concat Split Pad Slice Unsqueeze Resize"
)


@pytest.mark.parametrize("op", PROPERTY_OPS.split())
def test_random_permutations_and_axes_keep_results(op):
    """For each operator, random permutations, axes, broadcast shapes: the optimized graph gives the
    original's results, and the Transpose after it cancels the inverse one that follows."""
    rng = np.random.default_rng(sum(map(ord, op)))
    for _ in range(6):
        nodes, inits, out, perm = random_case(op, rng)
        elem = TensorProto.INT64 if op == "ArgMax" else FLOAT
        if len(out) != 4:  # a reduction or Unsqueeze changed the rank: its output goes out as is
            outputs = [tensor("o", out, elem)]
        else:
            back = [perm.index(axis) for axis in range(4)]
            nodes.append(helper.make_node("Transpose", ["o"], ["y"], perm=back))
            outputs = [tensor("y", [out[axis] for axis in back], elem)]
        if op == "Split":
            outputs.append(tensor("o2", None))
        data = model(nodes, [tensor("x", SHAPE)], outputs, inits, 18)
        feeds = {"x": RNG.normal(size=SHAPE).astype(np.float32)}
        assert_same_results(data, feeds, "extended")
        if len(out) == 4 and op != "Split" and (op != "Resize" or spatial_only(inits[0], perm)):
            assert transposes(data, "extended") == 0, (op, perm)


def spatial_only(scales: onnx.TensorProto, perm: list[int]) -> bool:
    """Whether a Resize of ``Transpose(x, perm)`` resizes no batch or channel axis of ``x``: only
    there does the optimizer move the Transpose past it."""
    values = numpy_helper.to_array(scales)
    return all(values[perm.index(axis)] == 1 for axis in (0, 1))


def test_every_permutation_pair_composes_or_cancels():
    nodes = [
        helper.make_node("Transpose", ["x"], ["t"], perm=[2, 0, 1]),
        helper.make_node("Relu", ["t"], ["r"]),
        helper.make_node("Transpose", ["r"], ["y"], perm=[1, 0, 2]),
    ]
    data = model(nodes, [tensor("x", [2, 3, 4])], [tensor("y", [2, 4, 3])])
    graph = spawnml.InferenceSession(data).graph
    assert [node.op_type for node in graph.nodes] == ["Relu", "Transpose"]
    assert_same_results(data, {"x": RNG.normal(size=(2, 3, 4)).astype(np.float32)})
    for first, second in itertools.product(itertools.permutations(range(3)), repeat=2):
        nodes[0] = helper.make_node("Transpose", ["x"], ["t"], perm=list(first))
        nodes[2] = helper.make_node("Transpose", ["r"], ["y"], perm=list(second))
        shape = [[2, 3, 4][first[axis]] for axis in second]
        data = model(nodes, [tensor("x", [2, 3, 4])], [tensor("y", shape)])
        assert transposes(data, "extended") == (0 if [first[axis] for axis in second] == [0, 1, 2] else 1)
