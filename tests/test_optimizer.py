"""Graph optimization levels: every pass keeps results, on small graphs and on real models.

Each optimized graph is run against the unoptimized one on the CPU backend, and small
graphs against onnxruntime too. Folded arithmetic (Conv with BatchNormalization, fused
activations, LayerNormalization) may round differently: float32 results agree within
``rtol=1e-5, atol=1e-5`` on small graphs and within each real model's stated tolerance.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime
import pytest
import spawnml
from onnx import TensorProto, helper, numpy_helper
from spawnml.models import ReferenceModel
from spawnml.passes import GraphOptimizationLevel, optimize
from spawnml.session import SessionOptions, resolve_providers
from spawnml_models.reference_models import REFERENCE_MODELS

from tests.model_files import require

RTOL = ATOL = 1e-5
FLOAT = TensorProto.FLOAT
RNG = np.random.default_rng(7)


def weight(name: str, *shape: int, low: float = -1.0) -> onnx.TensorProto:
    return numpy_helper.from_array(RNG.uniform(low, 1, shape).astype(np.float32), name)


def model(nodes, inputs, outputs, initializers=(), opset: int = 17) -> bytes:
    graph = helper.make_graph(nodes, "small", inputs, outputs, list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]).SerializeToString()


def tensor(name: str, *shape: int | str) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, FLOAT, list(shape))


def optimized_ops(data: bytes, level: str = "all") -> list[str]:
    options = SessionOptions(graph_optimization_level=level)
    return [node.op_type for node in spawnml.InferenceSession(data, options).graph.nodes]


def assert_same_results(data: bytes, feeds: dict[str, np.ndarray], level: str = "all") -> None:
    """The optimized session agrees with the unoptimized one and with onnxruntime."""
    plain = spawnml.InferenceSession(data, SessionOptions(graph_optimization_level="disable"))
    fast = spawnml.InferenceSession(data, SessionOptions(graph_optimization_level=level))
    reference = onnxruntime.InferenceSession(data, providers=["CPUExecutionProvider"])
    want = plain.run(None, feeds)
    for got in (fast.run(None, feeds), reference.run(None, feeds)):
        for ours, theirs in zip(got, want, strict=True):
            assert ours.dtype == theirs.dtype and ours.shape == theirs.shape
            np.testing.assert_allclose(ours, theirs, rtol=RTOL, atol=ATOL)


def test_levels_accept_onnxruntime_names_and_numbers():
    assert GraphOptimizationLevel.of("disable") == GraphOptimizationLevel.ORT_DISABLE_ALL
    assert GraphOptimizationLevel.of(2) == GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    assert GraphOptimizationLevel.of("ALL") == GraphOptimizationLevel.ORT_ENABLE_ALL
    assert SessionOptions().graph_optimization_level == GraphOptimizationLevel.ORT_ENABLE_ALL


def test_constant_and_shape_folding_and_no_ops():
    x = np.ones((2, 3), np.float32)
    nodes = [
        helper.make_node("Add", ["a", "b"], ["ab"]),
        helper.make_node("Shape", ["x"], ["shape"]),
        helper.make_node("Reshape", ["x", "shape"], ["same"]),
        helper.make_node("Cast", ["same"], ["cast"], to=FLOAT),
        helper.make_node("Identity", ["cast"], ["id"]),
        helper.make_node("Dropout", ["id"], ["dropped"]),
        helper.make_node("Transpose", ["dropped"], ["t"], perm=[0, 1]),
        helper.make_node("Mul", ["t", "ab"], ["y"]),
    ]
    inits = [numpy_helper.from_array(x, "a"), numpy_helper.from_array(x, "b")]
    data = model(nodes, [tensor("x", 2, 3)], [tensor("y", 2, 3)], inits)
    assert optimized_ops(data, "basic") == ["Mul"]
    assert optimized_ops(data, "disable") == [node.op_type for node in nodes]
    assert_same_results(data, {"x": RNG.normal(size=(2, 3)).astype(np.float32)}, "basic")


def test_an_input_with_an_initializer_default_is_never_folded():
    nodes = [helper.make_node("Neg", ["w"], ["nw"]), helper.make_node("Add", ["x", "nw"], ["y"])]
    graph = helper.make_graph(
        nodes, "g", [tensor("x", 2), tensor("w", 2)], [tensor("y", 2)], [weight("w", 2)]
    )
    data = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()
    assert optimized_ops(data, "extended") == ["Neg", "Add"]
    session = spawnml.InferenceSession(data)
    x, w = np.ones(2, np.float32), np.full(2, 3, np.float32)
    np.testing.assert_array_equal(session.run(None, {"x": x, "w": w})[0], x - w)


def test_identity_producing_a_graph_output_keeps_the_output_name():
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Identity", ["r"], ["y"])]
    data = model(nodes, [tensor("x", 3)], [tensor("y", 3)])
    session = spawnml.InferenceSession(data)
    assert [node.op_type for node in session.graph.nodes] == ["Relu"]
    assert [arg.name for arg in session.get_outputs()] == ["y"]
    assert_same_results(data, {"x": np.array([-1, 0, 2], np.float32)})


def test_transpose_pairs_cancel_or_compose():
    nodes = [
        helper.make_node("Transpose", ["x"], ["t1"], perm=[1, 2, 0]),
        helper.make_node("Transpose", ["t1"], ["t2"], perm=[2, 0, 1]),
        helper.make_node("Transpose", ["t2"], ["t3"], perm=[1, 0, 2]),
        helper.make_node("Transpose", ["t3"], ["y"], perm=[0, 2, 1]),
    ]
    data = model(nodes, [tensor("x", 2, 3, 4)], [tensor("y", 3, 4, 2)])
    assert optimized_ops(data) == ["Transpose"]
    assert_same_results(data, {"x": RNG.normal(size=(2, 3, 4)).astype(np.float32)})


def conv_model(after: list[onnx.NodeProto], extra: list[onnx.TensorProto]) -> bytes:
    conv = helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1])
    inits = [weight("w", 4, 3, 3, 3), weight("b", 4), *extra]
    return model([conv, *after], [tensor("x", 1, 3, 8, 8)], [tensor("y", 1, 4, 8, 8)], inits)


def test_conv_batch_norm_mul_add_and_activation_fold_into_one_fused_conv():
    after = [
        helper.make_node("BatchNormalization", ["c", "s", "o", "m", "v"], ["bn"], epsilon=1e-3),
        helper.make_node("Mul", ["bn", "k"], ["mul"]),
        helper.make_node("Add", ["mul", "q"], ["add"]),
        helper.make_node("Clip", ["add", "lo", "hi"], ["y"]),
    ]
    extra = [weight("s", 4), weight("o", 4), weight("m", 4), weight("v", 4, low=0.1), weight("k", 4, 1, 1)]
    extra += [weight("q", 1, 4, 1, 1)]
    extra += [numpy_helper.from_array(np.float32(-0.5), "lo"), numpy_helper.from_array(np.float32(0.5), "hi")]
    data = conv_model(after, extra)
    assert optimized_ops(data, "basic") == ["Conv", "BatchNormalization", "Mul", "Add", "Clip"]
    assert optimized_ops(data, "extended") == ["FusedConv"]
    session = spawnml.InferenceSession(data)
    assert session.graph.opset_imports["com.microsoft"] == 1
    assert_same_results(data, {"x": RNG.normal(size=(1, 3, 8, 8)).astype(np.float32)})


@pytest.mark.parametrize("activation", ["Relu", "Sigmoid", "Tanh", "LeakyRelu", "HardSigmoid"])
def test_conv_activation_fusion(activation):
    data = conv_model([helper.make_node(activation, ["c"], ["y"])], [])
    assert optimized_ops(data) == ["FusedConv"]
    assert_same_results(data, {"x": RNG.normal(size=(1, 3, 8, 8)).astype(np.float32)})


def test_conv_read_twice_is_not_folded():
    after = [helper.make_node("Relu", ["c"], ["r"]), helper.make_node("Add", ["r", "c"], ["y"])]
    data = conv_model(after, [])
    assert optimized_ops(data, "extended") == ["Conv", "Relu", "Add"]


def test_matmul_add_becomes_gemm_for_matrices_only():
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Add", ["m", "b"], ["y"])]
    data = model(nodes, [tensor("x", "n", 4)], [tensor("y", "n", 5)], [weight("w", 4, 5), weight("b", 5)])
    assert optimized_ops(data) == ["Gemm"]
    assert_same_results(data, {"x": RNG.normal(size=(3, 4)).astype(np.float32)})
    batched = model(
        nodes, [tensor("x", 2, 3, 4)], [tensor("y", 2, 3, 5)], [weight("w", 4, 5), weight("b", 5)]
    )
    assert optimized_ops(batched) == ["MatMul", "Add"]


@pytest.mark.parametrize("opset", [11, 17])
def test_matmuls_of_one_value_merge_into_one_and_a_split(tmp_path, opset):
    """Four products of one input by constant weights (two read by bias Adds, two straight as graph
    outputs) become one MatMul by the weights side by side and a Split (an attribute before opset
    13, an input from it); a product by a graph input and one of another value stay. Results agree
    with the unoptimized graph and onnxruntime, and onnxruntime runs the saved optimized model to
    the same answers (rtol = atol = 1e-5)."""
    nodes = [helper.make_node("MatMul", ["x", name], [f"p_{name}"]) for name in ("wq", "wk", "wv", "wo")]
    nodes += [helper.make_node("MatMul", ["x", "free"], ["p_free"])]
    nodes += [helper.make_node("Add", [f"p_{name}", "b"], [f"y_{name}"]) for name in ("wq", "wk")]
    nodes += [helper.make_node("MatMul", ["x2", "wo"], ["y_other"])]
    weights = [weight("wq", 16, 8), weight("wk", 16, 8), weight("wv", 16, 12), weight("b", 8)]
    weights += [weight("wo", 16, 4)]
    outputs = [tensor(name, 2, 5, "n") for name in ("y_wq", "y_wk", "p_wv", "p_wo", "p_free", "y_other")]
    inputs = [tensor("x", 2, 5, 16), tensor("free", 16, 3), tensor("x2", 2, 5, 16)]
    data = model(nodes, inputs, outputs, weights, opset)
    feeds = {
        name: RNG.normal(size=shape).astype(np.float32)
        for name, shape in (("x", (2, 5, 16)), ("free", (16, 3)), ("x2", (2, 5, 16)))
    }
    saved = tmp_path / "optimized.onnx"
    options = SessionOptions(graph_optimization_level="extended", optimized_model_filepath=str(saved))
    merged = spawnml.InferenceSession(data, options, providers=["cpu"])
    assert [node.op_type for node in merged.graph.nodes].count("MatMul") == 3
    (split,) = [node for node in merged.graph.nodes if node.op_type == "Split"]
    assert split.outputs == ["p_wq", "p_wk", "p_wv", "p_wo"]
    assert_same_results(data, feeds, "extended")
    reference = onnxruntime.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, feeds)
    from_saved = onnxruntime.InferenceSession(str(saved), providers=["CPUExecutionProvider"]).run(None, feeds)
    for got, want, theirs in zip(merged.run(None, feeds), reference, from_saved, strict=True):
        np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)
        np.testing.assert_allclose(theirs, want, rtol=RTOL, atol=ATOL)


def scalar(name: str, value: float) -> onnx.TensorProto:
    return numpy_helper.from_array(np.array(value, np.float32), name)


@pytest.mark.parametrize("halved", ["input", "sum", "product"])
@pytest.mark.parametrize("opset", [17, 20])
def test_gelu_fusion(halved, opset):
    nodes = [helper.make_node("Div", ["x", "sqrt2"], ["d"]), helper.make_node("Erf", ["d"], ["e"])]
    nodes.append(helper.make_node("Add", ["e", "one"], ["p"]))
    if halved == "input":
        nodes += [helper.make_node("Mul", ["x", "half"], ["h"]), helper.make_node("Mul", ["h", "p"], ["y"])]
    elif halved == "sum":
        nodes += [helper.make_node("Mul", ["p", "half"], ["h"]), helper.make_node("Mul", ["x", "h"], ["y"])]
    else:
        nodes += [helper.make_node("Mul", ["x", "p"], ["h"]), helper.make_node("Mul", ["h", "half"], ["y"])]
    inits = [scalar("sqrt2", 2**0.5), scalar("one", 1.0), scalar("half", 0.5)]
    data = model(nodes, [tensor("x", 2, 8)], [tensor("y", 2, 8)], inits, opset)
    session = spawnml.InferenceSession(data)
    assert [(node.domain, node.op_type) for node in session.graph.nodes] == [
        ("" if opset >= 20 else "com.microsoft", "Gelu")
    ]
    assert_same_results(data, {"x": RNG.normal(size=(2, 8)).astype(np.float32) * 3})


def layer_norm_nodes() -> list[onnx.NodeProto]:
    return [
        helper.make_node("ReduceMean", ["x"], ["mean"], axes=[-1]),
        helper.make_node("Sub", ["x", "mean"], ["d"]),
        helper.make_node("Pow", ["d", "two"], ["sq"]),
        helper.make_node("ReduceMean", ["sq"], ["var"], axes=[-1]),
        helper.make_node("Add", ["var", "eps"], ["ve"]),
        helper.make_node("Sqrt", ["ve"], ["std"]),
        helper.make_node("Div", ["d", "std"], ["n"]),
        helper.make_node("Mul", ["n", "gamma"], ["g"]),
        helper.make_node("Add", ["g", "beta"], ["ln"]),
    ]


def test_layer_norm_and_skip_layer_norm_fusion():
    nodes = [
        helper.make_node("Add", ["a", "b"], ["x"]),
        *layer_norm_nodes(),
        helper.make_node("Relu", ["ln"], ["y"]),
    ]
    inits = [scalar("two", 2.0), scalar("eps", 1e-5), weight("gamma", 16), weight("beta", 1, 1, 16)]
    data = model(nodes, [tensor("a", 2, 5, 16), tensor("b", 2, 5, 16)], [tensor("y", 2, 5, 16)], inits, 12)
    assert optimized_ops(data) == ["SkipLayerNormalization", "Relu"]
    feeds = {name: RNG.normal(size=(2, 5, 16)).astype(np.float32) for name in "ab"}
    assert_same_results(data, feeds)


def test_skip_layer_norm_gives_the_sum_when_it_is_read_elsewhere():
    nodes = [
        helper.make_node("Add", ["a", "b"], ["x"]),
        helper.make_node("LayerNormalization", ["x", "gamma", "beta"], ["ln"]),
        helper.make_node("Add", ["ln", "x"], ["y"]),
    ]
    inits = [weight("gamma", 16), weight("beta", 16)]
    data = model(nodes, [tensor("a", 2, 5, 16), tensor("b", 2, 5, 16)], [tensor("y", 2, 5, 16)], inits)
    session = spawnml.InferenceSession(data)
    assert [node.op_type for node in session.graph.nodes] == ["SkipLayerNormalization", "Add"]
    assert session.graph.nodes[0].outputs == ["ln", "", "", "x"]
    assert_same_results(data, {name: RNG.normal(size=(2, 5, 16)).astype(np.float32) for name in "ab"})


def test_optimize_leaves_the_loaded_graph_unchanged():
    data = conv_model([helper.make_node("Relu", ["c"], ["y"])], [])
    graph = spawnml.load(data)
    before = [(node.op_type, list(node.inputs), list(node.outputs)) for node in graph.nodes]
    optimize(graph, "all", resolve_providers(["cpu"]))
    assert [(node.op_type, node.inputs, node.outputs) for node in graph.nodes] == before


def test_optimized_model_filepath_saves_a_model_onnxruntime_runs(tmp_path):
    data = conv_model([helper.make_node("Relu", ["c"], ["y"])], [])
    target = tmp_path / "optimized.onnx"
    spawnml.InferenceSession(data, SessionOptions(optimized_model_filepath=str(target)))
    saved = onnx.load(target)
    onnx.checker.check_model(saved)
    assert [node.op_type for node in saved.graph.node] == ["FusedConv"]
    x = {"x": RNG.normal(size=(1, 3, 8, 8)).astype(np.float32)}
    got = onnxruntime.InferenceSession(str(target), providers=["CPUExecutionProvider"]).run(None, x)
    want = onnxruntime.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, x)
    np.testing.assert_allclose(got[0], want[0], rtol=RTOL, atol=ATOL)


@pytest.mark.real_model
@pytest.mark.parametrize("model", REFERENCE_MODELS, ids=lambda model: model.name)
@pytest.mark.parametrize("level", ["basic", "all"])
def test_real_models_keep_their_results(model: ReferenceModel, level: str):
    path = require(model.path)
    plain = spawnml.InferenceSession(path, SessionOptions(graph_optimization_level="disable"))
    fast = spawnml.InferenceSession(path, SessionOptions(graph_optimization_level=level))
    want, got = model.drive(plain), model.drive(fast)
    for index, (ours, theirs) in enumerate(zip(got, want, strict=True)):
        where = f"{model.name} output {index}"
        assert (ours.dtype, ours.shape) == (theirs.dtype, theirs.shape), where
        np.testing.assert_allclose(ours, theirs, rtol=model.rtol, atol=model.atol, err_msg=where)
    difference = max(float(np.abs(ours - theirs).max()) for ours, theirs in zip(got, want, strict=True))
    before, after = len(plain.graph.nodes), len(fast.graph.nodes)
    print(f"{model.name} {level}: {before} -> {after} nodes, largest absolute difference {difference:.2e}")
    assert after <= before


def branch(name: str, nodes, output: str) -> onnx.GraphProto:
    return helper.make_graph(nodes, name, [], [tensor(output, 4)])


def if_model() -> bytes:
    """An If whose branches compute on the outer weight ``w`` and constants of their own."""
    scale = helper.make_node(
        "Constant", [], ["scale"], value=numpy_helper.from_array(np.full(4, 0.5, np.float32))
    )
    then_nodes = [
        scale,
        helper.make_node("Neg", ["w"], ["nw"]),
        helper.make_node("Mul", ["nw", "scale"], ["ws"]),
        helper.make_node("Add", ["x", "ws"], ["s"]),
        helper.make_node("Relu", ["s"], ["r"]),
        helper.make_node("Mul", ["r", "x"], ["then_y"]),
    ]
    else_nodes = [helper.make_node("Sqrt", ["w"], ["sw"]), helper.make_node("Sub", ["x", "sw"], ["else_y"])]
    nodes = [
        helper.make_node("ReduceSum", ["x"], ["total"], keepdims=0),
        helper.make_node("Greater", ["total", "zero"], ["positive"]),
        helper.make_node(
            "If",
            ["positive"],
            ["y"],
            then_branch=branch("then", then_nodes, "then_y"),
            else_branch=branch("else", else_nodes, "else_y"),
        ),
    ]
    inits = [weight("w", 4, low=0.0), numpy_helper.from_array(np.array(0, np.float32), "zero")]
    return model(nodes, [tensor("x", 4)], [tensor("y", 4)], inits)


def body_ops(data: bytes, level: str = "all") -> dict[str, list[str]]:
    options = SessionOptions(graph_optimization_level=level)
    (node,) = [node for node in spawnml.InferenceSession(data, options).graph.nodes if node.op_type == "If"]
    return {
        name: [step.op_type for step in node.attrs[name].nodes] for name in ("then_branch", "else_branch")
    }


def test_if_branches_fold_outer_constants_and_fuse():
    data = if_model()
    assert body_ops(data, "basic") == {"then_branch": ["Add", "Relu", "Mul"], "else_branch": ["Sub"]}
    assert body_ops(data) == {"then_branch": ["FusedElementwise"], "else_branch": ["Sub"]}
    for sign in (1, -1):
        assert_same_results(data, {"x": sign * RNG.uniform(0.1, 1, 4).astype(np.float32)})


def test_optimized_model_with_fused_branches_runs_on_onnxruntime(tmp_path):
    data = if_model()
    target = tmp_path / "optimized.onnx"
    spawnml.InferenceSession(data, SessionOptions(optimized_model_filepath=str(target)))
    saved = onnx.load(target)
    onnx.checker.check_model(saved)
    (node,) = [node for node in saved.graph.node if node.op_type == "If"]
    assert {attribute.g.node[0].domain for attribute in node.attribute} == {""}
    session = onnxruntime.InferenceSession(str(target), providers=["CPUExecutionProvider"])
    reference = onnxruntime.InferenceSession(data, providers=["CPUExecutionProvider"])
    for sign in (1, -1):
        x = {"x": sign * RNG.uniform(0.1, 1, 4).astype(np.float32)}
        np.testing.assert_allclose(session.run(None, x)[0], reference.run(None, x)[0], rtol=RTOL, atol=ATOL)


def test_loop_body_inputs_are_never_folded():
    body = helper.make_graph(
        [
            helper.make_node("Identity", ["cond_in"], ["cond_out"]),
            helper.make_node("Neg", ["w"], ["nw"]),
            helper.make_node("Mul", ["carried", "nw"], ["carried_out"]),
        ],
        "body",
        [
            helper.make_tensor_value_info("i", TensorProto.INT64, []),
            helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
            tensor("carried", 4),
        ],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []), tensor("carried_out", 4)],
    )
    nodes = [helper.make_node("Loop", ["trips", "", "x"], ["y"], body=body)]
    inits = [weight("w", 4), numpy_helper.from_array(np.array(3, np.int64), "trips")]
    data = model(nodes, [tensor("x", 4)], [tensor("y", 4)], inits)
    (loop,) = spawnml.InferenceSession(data).graph.nodes
    assert [node.op_type for node in loop.attrs["body"].nodes] == ["Identity", "Mul"]
    assert_same_results(data, {"x": RNG.normal(size=4).astype(np.float32)})
