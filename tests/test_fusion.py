"""Elementwise-chain fusion: ai.spawnml::FusedElementwise keeps results and cuts launches.

Every graph is run fused (level ``all``) and unfused (``disable``) on each provider, and
against onnxruntime. Tolerances: float32 chains of a few operators agree within
``rtol=1e-5, atol=1e-6`` on the CPU (numba, the same float32 operations as numpy) and within
``rtol=1e-4, atol=1e-5`` on the GPU backends (their exp, log, tanh and trigonometric functions
are a few ulp off, more than numpy's); the real model within its stated tolerance.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import onnxruntime
import pytest
import spawnml
from onnx import TensorProto, helper, numpy_helper
from spawnml import plugins
from spawnml.errors import SpawnMLError
from spawnml.session import SessionOptions
from spawnml_models.reference_models import REFERENCE_MODELS

from tests.backends import GPU_BACKENDS, backend_or_skip
from tests.model_files import require

FLOAT = TensorProto.FLOAT
RNG = np.random.default_rng(11)
TOLERANCE = {"cpu": (1e-5, 1e-6)} | dict.fromkeys(GPU_BACKENDS, (1e-4, 1e-5))


@pytest.fixture(params=["cpu", *GPU_BACKENDS])
def provider(request) -> str:
    backend_or_skip(request.param)
    return request.param


def model(nodes, inputs, outputs, initializers=(), opset: int = 17) -> bytes:
    graph = helper.make_graph(nodes, "chain", inputs, outputs, list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]).SerializeToString()


def tensor(name: str, *shape: int, elem: int = FLOAT) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, elem, list(shape))


def session(data: bytes, provider: str, level: str = "all") -> spawnml.InferenceSession:
    return spawnml.InferenceSession(
        data, SessionOptions(graph_optimization_level=level), providers=[provider]
    )


def chains(s: spawnml.InferenceSession) -> list[list[str]]:
    """The operators of each fused node, in graph order."""
    return [
        [step[0] for step in json.loads(node.attrs["chain"])]
        for node in s.graph.nodes
        if node.op_type == "FusedElementwise"
    ]


def assert_fused_results(
    data: bytes, feeds: dict[str, np.ndarray], provider: str
) -> spawnml.InferenceSession:
    """The fused session agrees with the unfused one and with onnxruntime; returns the fused one."""
    fused = session(data, provider)
    want = session(data, provider, "disable").run(None, feeds)
    reference = onnxruntime.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, feeds)
    rtol, atol = TOLERANCE[provider]
    for got in fused.run(None, feeds):
        for theirs in (want[0], reference[0]):
            assert got.dtype == theirs.dtype and got.shape == theirs.shape
            np.testing.assert_allclose(got, theirs, rtol=rtol, atol=atol)
    return fused


def swish_graph() -> bytes:
    """``y = a * b + c; y * sigmoid(y)``: a tree whose shared value ``y`` is read only inside it."""
    nodes = [
        helper.make_node("Mul", ["a", "b"], ["ab"]),
        helper.make_node("Add", ["ab", "c"], ["y"]),
        helper.make_node("Sigmoid", ["y"], ["s"]),
        helper.make_node("Mul", ["y", "s"], ["out"]),
    ]
    inputs = [tensor("a", 2, 3, 4), tensor("b", 4), tensor("c", 2, 1, 1)]
    return model(nodes, inputs, [tensor("out", 2, 3, 4)])


def swish_feeds() -> dict[str, np.ndarray]:
    return {
        "a": RNG.standard_normal((2, 3, 4)).astype(np.float32),
        "b": RNG.standard_normal(4).astype(np.float32),
        "c": RNG.standard_normal((2, 1, 1)).astype(np.float32),
    }


def test_a_broadcasting_tree_becomes_one_node(provider):
    fused = assert_fused_results(swish_graph(), swish_feeds(), provider)
    assert chains(fused) == [["Mul", "Add", "Sigmoid", "Mul"]]
    assert [node.op_type for node in fused.graph.nodes] == ["FusedElementwise"]


def test_hard_swish_as_exported_with_constant_clip_bounds(provider):
    """PP-OCR's spelling of HardSwish: ``x * clip(x + 3, 0, 6) / 6``, bounds as initializers."""
    constants = [
        numpy_helper.from_array(np.float32(v), n) for n, v in (("three", 3), ("zero", 0), ("six", 6))
    ]
    nodes = [
        helper.make_node("Add", ["x", "three"], ["shifted"]),
        helper.make_node("Clip", ["shifted", "zero", "six"], ["clipped"]),
        helper.make_node("Mul", ["x", "clipped"], ["scaled"]),
        helper.make_node("Div", ["scaled", "six"], ["y"]),
    ]
    data = model(nodes, [tensor("x", 4, 50)], [tensor("y", 4, 50)], constants)
    x = (RNG.standard_normal((4, 50)) * 4).astype(np.float32)
    fused = assert_fused_results(data, {"x": x}, provider)
    assert chains(fused) == [["Add", "Clip", "Mul", "Div"]]


ACTIVATIONS = [
    ("LeakyRelu", {"alpha": 0.2}, 17),
    ("Elu", {"alpha": 0.7}, 17),
    ("Selu", {}, 17),
    ("Celu", {"alpha": 1.5}, 17),
    ("HardSigmoid", {"alpha": 0.3, "beta": 0.4}, 17),
    ("HardSwish", {}, 17),
    ("Softplus", {}, 17),
    ("Softsign", {}, 17),
    ("Mish", {}, 18),
    ("Gelu", {}, 20),
    ("Gelu", {"approximate": "tanh"}, 20),
    ("ThresholdedRelu", {"alpha": 0.5}, 17),
    ("Shrink", {"bias": 0.3, "lambd": 0.8}, 17),
    ("Relu", {}, 17),
    ("Tanh", {}, 17),
    ("Erf", {}, 17),
    ("Exp", {}, 17),
    ("Sin", {}, 17),
    ("Cos", {}, 17),
    ("Atan", {}, 17),
    ("Sinh", {}, 17),
    ("Asinh", {}, 17),
    ("Floor", {}, 17),
    ("Ceil", {}, 17),
    ("Round", {}, 17),
    ("Sign", {}, 17),
    ("Abs", {}, 17),
    ("Neg", {}, 17),
]


@pytest.mark.parametrize(("op", "attrs", "opset"), ACTIVATIONS, ids=lambda v: str(v))
def test_each_operator_inside_a_chain(provider, op, attrs, opset):
    """``op(x * w) + x`` fuses into one node; rounding ties of Round are included."""
    nodes = [
        helper.make_node("Mul", ["x", "w"], ["xw"]),
        helper.make_node(op, ["xw"], ["act"], **attrs),
        helper.make_node("Add", ["act", "x"], ["y"]),
    ]
    w = numpy_helper.from_array(np.float32(1.5), "w")
    data = model(nodes, [tensor("x", 3, 40)], [tensor("y", 3, 40)], [w], opset)
    x = (RNG.standard_normal((3, 40)) * 2).astype(np.float32)
    x[0, :8] = np.array([0.5, 1.5, 2.5, -0.5, -1.5, 0, 1 / 3, -1 / 3], np.float32) / 1.5  # ties after * 1.5
    fused = assert_fused_results(data, {"x": x}, provider)
    assert chains(fused) == [["Mul", op, "Add"]]


def test_nan_propagates_through_max_min_and_clip(provider):
    nodes = [
        helper.make_node("Max", ["a", "b"], ["high"]),
        helper.make_node("Min", ["high", "c"], ["low"]),
        helper.make_node("Clip", ["low", "", "cap"], ["y"]),
    ]
    cap = numpy_helper.from_array(np.float32(0.5), "cap")
    data = model(nodes, [tensor("a", 6), tensor("b", 6), tensor("c", 6)], [tensor("y", 6)], [cap])
    a = np.array([np.nan, 1, -1, np.inf, 0.25, -np.inf], np.float32)
    b = np.array([0, np.nan, 2, 1, -3, 0], np.float32)
    c = np.array([1, 1, np.nan, 2, 0.1, -1], np.float32)
    fused = assert_fused_results(data, {"a": a, "b": b, "c": c}, provider)
    assert chains(fused) == [["Max", "Min", "Clip"]]


@pytest.mark.parametrize("bounds", [["", "cap"], ["floor"], ["floor", "cap"]], ids=["max", "min", "both"])
def test_a_saved_chain_with_clip_is_standard_onnx(bounds, tmp_path):
    """A fused chain written back to a file gives Clip its bounds in their ONNX places: the file
    passes onnx.checker and runs on onnxruntime to the same answers."""
    nodes = [
        helper.make_node("Mul", ["a", "a"], ["square"]),
        helper.make_node("Clip", ["square", *bounds], ["y"]),
    ]
    limits = [numpy_helper.from_array(np.float32(v), name) for name, v in (("floor", 0.2), ("cap", 0.5))]
    data = model(nodes, [tensor("a", 8)], [tensor("y", 8)], limits)
    saved = tmp_path / "optimized.onnx"
    fused = spawnml.InferenceSession(
        data, SessionOptions(optimized_model_filepath=str(saved)), providers=["cpu"]
    )
    assert chains(fused) == [["Mul", "Clip"]]
    onnx.checker.check_model(onnx.load(saved), full_check=True)
    feeds = {"a": RNG.standard_normal(8).astype(np.float32)}
    expected = onnxruntime.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, feeds)
    from_saved = onnxruntime.InferenceSession(str(saved), providers=["CPUExecutionProvider"]).run(None, feeds)
    np.testing.assert_array_equal(from_saved[0], expected[0])


def test_pow_with_integer_exponents_of_negative_bases(provider):
    nodes = [helper.make_node("Pow", ["x", "e"], ["p"]), helper.make_node("Sub", ["p", "x"], ["y"])]
    data = model(nodes, [tensor("x", 8), tensor("e", 8)], [tensor("y", 8)])
    x = np.array([-2, -2, -1.5, 0, 0, 3, -3, 2], np.float32)
    e = np.array([2, 3, 2, 0, 2, 0.5, 0, -1], np.float32)
    fused = assert_fused_results(data, {"x": x, "e": e}, provider)
    assert chains(fused) == [["Pow", "Sub"]]


def test_values_read_outside_the_chain_or_not_float32_stay_unfused(provider):
    nodes = [
        helper.make_node("Relu", ["x"], ["r"]),
        helper.make_node("Neg", ["r"], ["n"]),  # r is read twice, once outside the chain
        helper.make_node("Exp", ["n"], ["y"]),
        helper.make_node("Add", ["r", "n"], ["z"]),  # n is read by Exp and here
        helper.make_node("Abs", ["i"], ["ia"]),
        helper.make_node("Neg", ["ia"], ["j"]),  # int32: not fused
    ]
    int32 = TensorProto.INT32
    data = model(
        nodes,
        [tensor("x", 5), tensor("i", 5, elem=int32)],
        [tensor("y", 5), tensor("z", 5), tensor("j", 5, elem=int32)],
    )
    feeds = {"x": RNG.standard_normal(5).astype(np.float32), "i": np.arange(-2, 3, dtype=np.int32)}
    fused = session(data, provider)
    assert [node.op_type for node in fused.graph.nodes] == ["Relu", "Neg", "Exp", "Add", "Abs", "Neg"]
    reference = onnxruntime.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, feeds)
    for got, want in zip(fused.run(None, feeds), reference, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_an_intermediate_graph_output_ends_the_chain():
    nodes = [helper.make_node("Sigmoid", ["x"], ["s"]), helper.make_node("Mul", ["s", "x"], ["y"])]
    data = model(nodes, [tensor("x", 4)], [tensor("s", 4), tensor("y", 4)])
    assert [node.op_type for node in session(data, "cpu").graph.nodes] == ["Sigmoid", "Mul"]


def test_a_malformed_chain_is_refused_clearly():
    node = helper.make_node(
        "FusedElementwise", ["x"], ["y"], domain="ai.spawnml", chain='[["Nope",[0],"float32",{}]]'
    )
    graph = helper.make_graph([node], "g", [tensor("x", 3)], [tensor("y", 3)])
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("ai.spawnml", 1)]
    data = helper.make_model(graph, opset_imports=opsets).SerializeToString()
    s = spawnml.InferenceSession(data, providers=["cpu"])
    with pytest.raises(SpawnMLError, match="unknown operator 'Nope'"):
        s.run(None, {"x": np.zeros(3, np.float32)})


def count_launches(monkeypatch, backend_name: str) -> list[str]:
    """Every program launched on ``backend_name`` from now on, by kernel name."""
    runtime = plugins.backends()[backend_name].runtime
    launched: list[str] = []
    launch = runtime.launch

    def counting(program, *args, **kwargs):
        launched.append(program)
        return launch(program, *args, **kwargs)

    monkeypatch.setattr(runtime, "launch", counting)
    return launched


@pytest.mark.parametrize("gpu", GPU_BACKENDS)
def test_fusion_cuts_gpu_launches(monkeypatch, gpu):
    backend_or_skip(gpu)
    data, feeds = swish_graph(), swish_feeds()
    plain, fused = session(data, gpu, "extended"), session(data, gpu)
    launched = count_launches(monkeypatch, gpu)
    plain.run(None, feeds)
    before = len(launched)
    fused.run(None, feeds)
    assert (before, len(launched) - before) == (4, 1)


@pytest.mark.real_model
@pytest.mark.parametrize("gpu", GPU_BACKENDS)
def test_pp_ocr_recogniser_fused_on_the_gpu_matches_onnxruntime(monkeypatch, gpu):
    """PP-OCRv4 rec's exported HardSwish and swish chains, fused: one launch less per node removed."""
    backend_or_skip(gpu)
    reference_model = next(m for m in REFERENCE_MODELS if m.name == "pp-ocrv4-rec")
    path = require(reference_model.path)
    feeds = {"x": RNG.random((1, 3, 48, 160), dtype=np.float32)}
    plain, fused = session(path, gpu, "extended"), session(path, gpu)
    assert chains(fused).count(["Add", "Clip", "Mul", "Div", "Mul", "Add"]) == 28
    (want,) = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feeds)
    launched = count_launches(monkeypatch, gpu)
    counts = []
    for s in (plain, fused):
        start = len(launched)
        (got,) = s.run(None, feeds)
        counts.append(len(launched) - start)
        np.testing.assert_allclose(got, want, rtol=reference_model.rtol, atol=reference_model.atol)
    print(f"{gpu}: {counts[0]} launches unfused, {counts[1]} fused")
    assert counts[0] - counts[1] == len(plain.graph.nodes) - len(fused.graph.nodes) > 150


def projection_norm_graph(biased_first: bool, sum_read_elsewhere: bool, with_beta: bool = True) -> bytes:
    """A transformer layer's end: ``LayerNormalization(x @ w + b + skip)``, the biased product on
    either side of the residual Add, the sum a second output or not, the normalization's bias
    given or not."""
    residual = ["proj", "skip"] if biased_first else ["skip", "proj"]
    scales = ["gamma", "beta"] if with_beta else ["gamma"]
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["product"]),
        helper.make_node("Add", ["product", "b"], ["proj"]),
        helper.make_node("Add", residual, ["total"]),
        helper.make_node("LayerNormalization", ["total", *scales], ["y"], epsilon=1e-12),
    ]
    weights = [
        numpy_helper.from_array(RNG.standard_normal(shape).astype(np.float32), name)
        for name, shape in (("w", (16, 24)), ("b", (24,)), ("gamma", (24,)), ("beta", (24,)))
    ]
    outputs = [tensor("y", 2, 5, 24)] + ([tensor("total", 2, 5, 24)] if sum_read_elsewhere else [])
    return model(nodes, [tensor("x", 2, 5, 16), tensor("skip", 2, 5, 24)], outputs, weights)


def assert_rewrite_answers(
    data: bytes, rewritten: spawnml.InferenceSession, saved: Path, feeds: dict[str, np.ndarray]
) -> None:
    """The rewritten session, the unoptimized one and onnxruntime on the original model agree
    (rtol and atol 1e-5), and onnxruntime runs the saved optimized model to the same answers."""
    want = session(data, "cpu", "disable").run(None, feeds)
    reference = onnxruntime.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, feeds)
    from_saved = onnxruntime.InferenceSession(str(saved), providers=["CPUExecutionProvider"]).run(None, feeds)
    for got, plain, theirs, saved_got in zip(
        rewritten.run(None, feeds), want, reference, from_saved, strict=True
    ):
        assert got.dtype == theirs.dtype and got.shape == theirs.shape
        np.testing.assert_allclose(got, theirs, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(got, plain, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(saved_got, theirs, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("biased_first", [True, False])
@pytest.mark.parametrize("sum_read_elsewhere", [False, True])
@pytest.mark.parametrize("with_beta", [True, False])
def test_skip_layer_norm_takes_in_the_projection_bias(tmp_path, biased_first, sum_read_elsewhere, with_beta):
    """The bias Add becomes SkipLayerNormalization's bias input; results (and the sum, where it is an
    output) agree with onnxruntime and the unfused graph within rtol=1e-5, atol=1e-5 (the fused
    node sums input, skip and bias in another order and normalizes in one pass), and so do
    onnxruntime's on the optimized model SpawnML saves."""
    data = projection_norm_graph(biased_first, sum_read_elsewhere, with_beta)
    saved = tmp_path / "optimized.onnx"
    fused = spawnml.InferenceSession(
        data, SessionOptions(optimized_model_filepath=str(saved)), providers=["cpu"]
    )
    norm = fused.graph.nodes[-1]
    assert [node.op_type for node in fused.graph.nodes] == ["MatMul", "SkipLayerNormalization"]
    assert norm.inputs == ["product", "skip", "gamma", "beta" if with_beta else "", "b"]
    assert norm.outputs == (["y", "", "", "total"] if sum_read_elsewhere else ["y"])
    feeds = {
        "x": RNG.standard_normal((2, 5, 16)).astype(np.float32),
        "skip": RNG.standard_normal((2, 5, 24)).astype(np.float32),
    }
    assert_rewrite_answers(data, fused, saved, feeds)


def test_a_bias_sum_read_elsewhere_stays_a_node_of_its_own():
    """The biased product is read by another node too, so the Add that makes it stays."""
    data = projection_norm_graph(biased_first=True, sum_read_elsewhere=False)
    graph = onnx.load_from_string(data)
    graph.graph.node.append(helper.make_node("Relu", ["proj"], ["relu"]))
    graph.graph.output.append(tensor("relu", 2, 5, 24))
    fused = session(graph.SerializeToString(), "cpu")
    assert [node.op_type for node in fused.graph.nodes] == ["MatMul", "Add", "SkipLayerNormalization", "Relu"]
    assert len(fused.graph.nodes[2].inputs) == 4


def shape_per_branch_graph() -> bytes:
    """Two branches each taking the shape of their own value of shape ``(n, 4)``, as exported
    transformers take every layer's key shape; a third takes the shape of an ``(m, 4)`` value."""
    nodes = [helper.make_node("Relu", ["a"], ["ra"]), helper.make_node("Neg", ["b"], ["rb"])]
    nodes.append(helper.make_node("Abs", ["c"], ["rc"]))
    for branch in ("a", "b", "c"):
        nodes += [
            helper.make_node("Shape", [f"r{branch}"], [f"s{branch}"]),
            helper.make_node("Slice", [f"s{branch}", "zero", "one"], [f"n{branch}"]),
            helper.make_node("Concat", [f"n{branch}", "minus_one"], [f"t{branch}"], axis=0),
            helper.make_node("Reshape", [f"r{branch}", f"t{branch}"], [f"y{branch}"]),
        ]
    ints = [
        numpy_helper.from_array(np.array([value], np.int64), name)
        for name, value in (("zero", 0), ("one", 1), ("minus_one", -1))
    ]
    inputs = [tensor("a", "n", 4), tensor("b", "n", 4), tensor("c", "m", 4)]
    return model(
        nodes, inputs, [tensor(f"y{branch}", "n", 4) for branch in "ab"] + [tensor("yc", "m", 4)], ints
    )


def test_repeated_shape_computations_merge():
    """The shape of ``ra`` and of ``rb``, both ``(n, 4)``, is taken once, and the Slice and Concat
    after it merge; the ``(m, 4)`` branch keeps its own. Results equal onnxruntime's exactly."""
    data = shape_per_branch_graph()
    optimized = session(data, "cpu")
    ops = [node.op_type for node in optimized.graph.nodes]
    assert [ops.count(op) for op in ("Shape", "Slice", "Concat", "Reshape")] == [2, 2, 2, 3]
    rows = {"a": 3, "b": 3, "c": 5}
    feeds = {name: RNG.standard_normal((count, 4)).astype(np.float32) for name, count in rows.items()}
    reference = onnxruntime.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, feeds)
    for got, theirs in zip(optimized.run(None, feeds), reference, strict=True):
        assert got.shape == theirs.shape
        np.testing.assert_array_equal(got, theirs)


def test_random_draws_are_never_merged():
    nodes = [
        helper.make_node("RandomNormalLike", ["x"], ["r1"], seed=1.0),
        helper.make_node("RandomNormalLike", ["x"], ["r2"], seed=1.0),
        helper.make_node("Add", ["r1", "r2"], ["y"]),
    ]
    data = model(nodes, [tensor("x", 4)], [tensor("y", 4)])
    assert [node.op_type for node in session(data, "cpu").graph.nodes] == [
        "RandomNormalLike",
        "RandomNormalLike",
        "Add",
    ]


def scaled_heads_graph(bias: bool, weight_shared: bool) -> bytes:
    """An attention layer's query: ``x @ w (+ b)`` split into heads, then times ``4 ** -0.25``; with
    ``weight_shared``, another product reads ``w`` too (of ``relu(x)``, so that the two products
    are not merged into one)."""
    nodes = [helper.make_node("MatMul", ["x", "w"], ["product"])]
    if bias:
        nodes.append(helper.make_node("Add", ["b", "product"], ["biased"]))
    nodes += [
        helper.make_node("Reshape", ["biased" if bias else "product", "heads"], ["split"]),
        helper.make_node("Transpose", ["split"], ["moved"], perm=[0, 2, 1, 3]),
        helper.make_node("Mul", ["moved", "scale"], ["y"]),
    ]
    outputs = [tensor("y", 2, 4, 5, 6)]
    if weight_shared:
        nodes.append(helper.make_node("Relu", ["x"], ["positive"]))
        nodes.append(helper.make_node("MatMul", ["positive", "w"], ["other"]))
        outputs.append(tensor("other", 2, 5, 24))
    constants = [
        numpy_helper.from_array(RNG.standard_normal((16, 24)).astype(np.float32), "w"),
        numpy_helper.from_array(RNG.standard_normal(24).astype(np.float32), "b"),
        numpy_helper.from_array(np.array([2, 5, 4, 6], np.int64), "heads"),
        numpy_helper.from_array(np.float32(4**-0.25), "scale"),
    ]
    return model(nodes, [tensor("x", 2, 5, 16)], outputs, constants)


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("weight_shared", [False, True])
def test_a_scalar_mul_folds_into_the_projection_weights(tmp_path, bias, weight_shared):
    """The Mul goes; the product reads a scaled copy of ``w`` (and of ``b``), ``w`` stays for another
    reader. Results agree with onnxruntime and the unfolded graph within rtol=1e-5, atol=1e-5 (the
    scaled weights are rounded once more), and so do onnxruntime's on the optimized model saved."""
    data = scaled_heads_graph(bias, weight_shared)
    saved = tmp_path / "optimized.onnx"
    folded = spawnml.InferenceSession(
        data, SessionOptions(optimized_model_filepath=str(saved)), providers=["cpu"]
    )
    ops = [node.op_type for node in folded.graph.nodes]
    assert "Mul" not in ops and ops.count("MatMul") == 1 + weight_shared
    assert ("w" in folded.graph.initializers) == weight_shared
    feeds = {"x": RNG.standard_normal((2, 5, 16)).astype(np.float32)}
    assert_rewrite_answers(data, folded, saved, feeds)


def test_a_scalar_mul_of_a_value_read_elsewhere_stays():
    """The heads are a graph output too, so scaling the weights would change them: nothing folds."""
    graph = onnx.load_from_string(scaled_heads_graph(bias=True, weight_shared=False))
    graph.graph.output.append(tensor("moved", 2, 4, 5, 6))
    folded = session(graph.SerializeToString(), "cpu")
    assert [node.op_type for node in folded.graph.nodes] == ["MatMul", "Add", "Reshape", "Transpose", "Mul"]
