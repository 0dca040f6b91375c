"""The shared GPU kernel table on WebGPU against numpy, op by op, and MiniLM against onnxruntime.

Tolerances: exact for data movement and comparisons, 1e-6 relative for single roundings,
1e-5 for reductions, matmuls and transcendental functions (WGSL's erf is A&S 7.1.26, error < 1.5e-7).
Skips with the availability reason where wgpu finds no adapter.
"""

from __future__ import annotations

import collections
import math

import numpy as np
import onnxruntime
import pytest
import spawnml
from spawnml.backend import KernelContext
from spawnml.ir import Node
from spawnml_models.assets import asset_file

from tests.backends import backend_or_skip
from tests.model_files import require

rng = np.random.default_rng(7)


@pytest.fixture(scope="module")
def gpu():
    return backend_or_skip("webgpu")


def run(gpu, op, *inputs, opset=17, **attrs):
    """The webgpu table's kernel for ``op`` on host inputs, read back."""
    spec = gpu.kernels.find("", op, opset)
    ctx = KernelContext(Node(op, [], []), opset, attrs, gpu)
    out = spec.fn(ctx, *[None if x is None else gpu.from_numpy(np.asarray(x)) for x in inputs])
    return gpu.to_numpy(out)


def f32(*shape):
    return rng.standard_normal(shape).astype(np.float32)


BROADCAST = [
    ((3, 4), (3, 4)),
    ((2, 3, 4), (4,)),
    ((2, 1, 4), (3, 1)),
    ((), (5, 2)),
    ((1, 5, 1, 3), (2, 1, 4, 1)),
]
BINARY = {
    "Add": np.add,
    "Sub": np.subtract,
    "Mul": np.multiply,
    "Div": np.divide,
    "Max": np.maximum,
    "Min": np.minimum,
}
COMPARE = {
    "Equal": np.equal,
    "Greater": np.greater,
    "GreaterOrEqual": np.greater_equal,
    "Less": np.less,
    "LessOrEqual": np.less_equal,
}


@pytest.mark.parametrize("shapes", BROADCAST, ids=str)
@pytest.mark.parametrize("op", [*BINARY, *COMPARE])
def test_binary_broadcasts_like_numpy(gpu, op, shapes):
    a, b = f32(*shapes[0]), f32(*shapes[1])
    b.reshape(-1)[:1] = a.reshape(-1)[:1] if a.size and b.size else b.reshape(-1)[:1]  # one tie for Equal
    got, want = run(gpu, op, a, b), {**BINARY, **COMPARE}[op](a, b)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_pow_and_integer_ops(gpu):
    a, b = np.abs(f32(3, 4)) + 0.1, f32(4)
    np.testing.assert_allclose(run(gpu, "Pow", a, b), a**b, rtol=1e-5)
    x, y = rng.integers(-50, 50, (2, 5)), rng.integers(1, 9, (5,))
    np.testing.assert_array_equal(run(gpu, "Add", x, y), x + y)
    np.testing.assert_array_equal(run(gpu, "Div", x, y), np.trunc(x / y).astype(np.int64))
    p, q = rng.random((4, 3)) > 0.5, rng.random((3,)) > 0.5
    np.testing.assert_array_equal(run(gpu, "And", p, q), p & q)
    np.testing.assert_array_equal(run(gpu, "Or", p, q), p | q)


UNARY = {
    "Sqrt": (lambda x: np.sqrt(np.abs(x)), np.sqrt),
    "Exp": (None, np.exp),
    "Log": (lambda x: np.abs(x) + 0.01, np.log),
    "Tanh": (None, np.tanh),
    "Erf": (None, np.vectorize(math.erf, otypes=[np.float32])),
    "Relu": (None, lambda x: np.maximum(x, 0)),
    "Sigmoid": (None, lambda x: 1 / (1 + np.exp(-x))),
    "Neg": (None, np.negative),
    "Abs": (None, np.abs),
    "Reciprocal": (None, np.reciprocal),
}


@pytest.mark.parametrize("op", UNARY)
def test_unary(gpu, op):
    prepare, fn = UNARY[op]
    x = f32(7, 33)
    x = prepare(x).astype(np.float32) if prepare else x
    np.testing.assert_allclose(run(gpu, op, x), fn(x), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    ("source", "to"),
    [(np.float32, 6), (np.float32, 7), (np.float32, 9), (np.int64, 1), (np.bool_, 1), (np.int8, 1)],
)
def test_cast(gpu, source, to):
    x = (f32(5, 6) * 10).astype(source)
    want = x.astype(spawnml.dtypes.from_onnx(to))
    got = run(gpu, "Cast", x, to=to)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


def test_where_broadcasts(gpu):
    c, x, y = rng.random((3, 1, 4)) > 0.5, f32(5, 1), f32(1, 4)
    np.testing.assert_array_equal(run(gpu, "Where", c, x, y), np.where(c, x, y))


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ((5, 7), (7, 3)),
        ((4, 33, 20), (20, 17)),
        ((2, 3, 9, 8), (3, 8, 5)),
        ((6,), (2, 6, 4)),
        ((3, 2, 5), (5,)),
        ((2, 1, 4, 5), (3, 5, 2)),
    ],
)
def test_matmul(gpu, a, b):
    x, y = f32(*a), f32(*b)
    want = np.matmul(x.astype(np.float64), y)
    np.testing.assert_allclose(run(gpu, "MatMul", x, y), want, rtol=1e-5, atol=1e-5 * a[-1])


@pytest.mark.parametrize(
    ("shape", "axis", "opset"), [((4, 9), -1, 13), ((2, 5, 3), 1, 13), ((2, 3, 4), 1, 11)]
)
def test_softmax(gpu, shape, axis, opset):
    x = f32(*shape)
    if opset >= 13:
        e = np.exp(x - x.max(axis, keepdims=True))
        want = e / e.sum(axis, keepdims=True)
    else:
        flat = x.reshape(math.prod(shape[:axis]), -1)
        e = np.exp(flat - flat.max(1, keepdims=True))
        want = (e / e.sum(1, keepdims=True)).reshape(shape)
    np.testing.assert_allclose(run(gpu, "Softmax", x, opset=opset, axis=axis), want, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("with_bias", [True, False])
def test_layer_normalization(gpu, with_bias):
    x, scale, bias = f32(3, 5, 16), f32(16), f32(16)
    mean = x.mean(-1, keepdims=True)
    inv_std = 1 / np.sqrt(x.var(-1, keepdims=True) + 1e-5)
    want = (x - mean) * inv_std * scale + (bias if with_bias else 0)
    spec = gpu.kernels.find("", "LayerNormalization", 17)
    ctx = KernelContext(Node("LayerNormalization", [], []), 17, {"axis": -1, "epsilon": 1e-5}, gpu)
    inputs = [gpu.from_numpy(x), gpu.from_numpy(scale), gpu.from_numpy(bias) if with_bias else None]
    got = [gpu.to_numpy(out) for out in spec.fn(ctx, *inputs)]
    for value, expected in zip(got, (want, mean, inv_std), strict=True):
        np.testing.assert_allclose(value, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(("axes", "keepdims"), [([1], 1), ([0, 2], 0), ([-1], 1), (None, 0)])
@pytest.mark.parametrize("op", ["ReduceMean", "ReduceSum"])
def test_reductions(gpu, op, axes, keepdims):
    x = f32(3, 4, 5)
    fn = np.mean if op == "ReduceMean" else np.sum
    want = fn(x.astype(np.float64), axis=None if axes is None else tuple(axes), keepdims=bool(keepdims))
    given = None if axes is None else np.array(axes, np.int64)
    got = run(gpu, op, x, given, opset=18, keepdims=keepdims)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_gather_embedding_lookup(gpu):
    table, ids = f32(50, 8), rng.integers(-50, 50, (2, 7))
    np.testing.assert_array_equal(run(gpu, "Gather", table, ids, axis=0), table[ids])
    np.testing.assert_array_equal(run(gpu, "Gather", table, np.array([3, -1]), axis=1), table[:, [3, -1]])


def test_movement(gpu):
    x = f32(2, 3, 4, 5)
    np.testing.assert_array_equal(run(gpu, "Transpose", x, perm=[0, 2, 1, 3]), x.transpose(0, 2, 1, 3))
    np.testing.assert_array_equal(run(gpu, "Transpose", x), x.transpose())
    starts, ends, axes, steps = [
        np.array(v, np.int64) for v in ([1, 4, 0], [3, -(10**18), 2**63 - 1], [1, 3, 2], [1, -2, 2])
    ]
    np.testing.assert_array_equal(run(gpu, "Slice", x, starts, ends, axes, steps), x[:, 1:3, 0::2, 4::-2])
    parts = [f32(2, k, 5) for k in (1, 3, 2)]
    np.testing.assert_array_equal(run(gpu, "Concat", *parts, axis=1), np.concatenate(parts, 1))


def test_expand(gpu):
    x = f32(3, 1)
    np.testing.assert_array_equal(run(gpu, "Expand", x, np.array([2, 1, 4])), np.broadcast_to(x, (2, 3, 4)))


def test_views_share_the_buffer(gpu):
    x = gpu.from_numpy(f32(2, 3, 4))
    ctx = KernelContext(Node("Reshape", [], []), 17, {}, gpu)
    y = gpu.kernels.find("", "Reshape", 17).fn(ctx, x, gpu.from_numpy(np.array([0, -1])))
    assert y.shape == (2, 12) and y.storage is x.storage
    z = gpu.kernels.find("", "Unsqueeze", 17).fn(ctx, y, gpu.from_numpy(np.array([0, -1])))
    assert z.shape == (1, 2, 12, 1)


def test_large_launch_spreads_over_a_2d_grid(gpu):
    n = gpu.runtime.max_groups * 64 + 1000
    x = np.arange(n, dtype=np.float32)
    np.testing.assert_array_equal(run(gpu, "Neg", x), -x)


def test_refuses_precisely_and_splits_with_cpu(gpu):
    """A node the GPU has no kernel for (TfIdfVectorizer) goes to the CPU; onnxruntime is the reference."""
    from onnx import TensorProto, helper

    counts = helper.make_node(
        "TfIdfVectorizer",
        ["r"],
        ["y"],
        mode="TF",
        min_gram_length=1,
        max_gram_length=1,
        max_skip_count=0,
        ngram_counts=[0],
        ngram_indexes=[0, 1],
        pool_int64s=[-2, -3],
    )
    graph = helper.make_graph(
        [helper.make_node("Neg", ["x"], ["r"]), counts],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.INT64, [6])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()
    name = gpu.name
    with pytest.raises(spawnml.UnsupportedOperatorError, match=rf"TfIdfVectorizer.*{name}: no {name} kernel"):
        spawnml.InferenceSession(model, providers=[name])
    session = spawnml.InferenceSession(model, providers=[name, "cpu"])
    assert [p for _, _, p in session.placement()] == [name, "cpu"]
    assert [(t.value, t.source, t.target) for t in session.transfers()] == [("r", name, "cpu")]
    x = np.array([2, 3, 3, 5, 2, 3], np.int64)
    reference = onnxruntime.InferenceSession(model, providers=["CPUExecutionProvider"])
    np.testing.assert_array_equal(session.run(None, {"x": x})[0], reference.run(None, {"x": x})[0])


def test_a_feed_only_the_cpu_reads_is_placed_there(gpu):
    """Host feeds go to the provider of their first reader: a string input never visits the GPU."""
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [
            helper.make_node("StringConcat", ["s", "s"], ["t"]),
            helper.make_node("Neg", ["x"], ["y"]),
        ],
        "g",
        [
            helper.make_tensor_value_info("s", TensorProto.STRING, [2]),
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [2]),
        ],
        [
            helper.make_tensor_value_info("t", TensorProto.STRING, [2]),
            helper.make_tensor_value_info("y", TensorProto.FLOAT, [2]),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)]).SerializeToString()
    session = spawnml.InferenceSession(model, providers=[gpu.name, "cpu"])
    assert session.transfers() == []
    feeds = {"s": np.array(["a", "b"], object), "x": np.array([1, -2], np.float32)}
    reference = onnxruntime.InferenceSession(model, providers=["CPUExecutionProvider"])
    for got, want in zip(session.run(None, feeds), reference.run(None, feeds), strict=True):
        np.testing.assert_array_equal(got, want)


@pytest.mark.real_model
def test_minilm_on_the_gpu_and_cpu_matches_onnxruntime(gpu):
    """Sentence-encoder hidden states within 1e-4 (relative and absolute) of onnxruntime's."""
    path = require(lambda: asset_file("minilm-onnx-int8", "model.onnx"))
    session = spawnml.InferenceSession(path, providers=[gpu.name, "cpu"])
    placed = collections.Counter(provider for _, _, provider in session.placement())
    on_cpu = sorted({op for _, op, provider in session.placement() if provider == "cpu"})
    print(f"MiniLM: {dict(placed)} nodes; on cpu: {on_cpu}; {len(session.transfers())} transfers")
    assert placed[gpu.name] > 5 * placed["cpu"]
    assert not [op for op in on_cpu if gpu.kernels.find("", op, 17)], "an op the GPU table runs went to cpu"
    reference = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    ids = rng.integers(0, 30000, (2, 11))
    feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": np.zeros_like(ids)}
    feeds["attention_mask"][1, 8:] = 0
    got, want = session.run(None, feeds)[0], reference.run(None, feeds)[0]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
