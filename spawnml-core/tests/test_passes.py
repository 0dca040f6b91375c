"""Core rewrite passes on small IR graphs, run on the mock backend: same results, fewer nodes."""

from __future__ import annotations

import numpy as np
from spawnml import plugins
from spawnml.ir import Graph, Node, Value
from spawnml.passes import infer_shapes, optimize
from spawnml.passes.dead_nodes import eliminate_dead_nodes
from spawnml.passes.shape_inference import InferenceMemo
from spawnml.session import InferenceSession, SessionOptions

from .conftest import MOCK_DOMAIN

F32 = np.dtype(np.float32)


def mock_graph() -> Graph:
    """``y = Plus(x, Scale(c))`` with ``c`` a constant and a dead ``Scale(x)`` on the side."""
    return Graph(
        nodes=[
            Node("Scale", ["c"], ["sc"], {"factor": 3.0}, domain=MOCK_DOMAIN),
            Node("Plus", ["x", "sc"], ["y"], domain=MOCK_DOMAIN),
            Node("Scale", ["x"], ["unused"], domain=MOCK_DOMAIN),
        ],
        inputs=[Value("x", F32, (2,))],
        outputs=[Value("y", F32, (2,))],
        initializers={"c": np.array([1, 2], F32)},
        opset_imports={MOCK_DOMAIN: 1},
    )


def test_constants_fold_on_the_provider_and_dead_nodes_go(mock_plugins):
    graph = mock_graph()
    optimized = optimize(graph, "basic", [plugins.backends()["mock"]], plugins.operators())
    assert [node.op_type for node in optimized.nodes] == ["Plus"]
    np.testing.assert_array_equal(optimized.initializers["sc"], [3, 6])
    assert "c" not in optimized.initializers and len(graph.nodes) == 3
    x = {"x": np.array([1, -1], F32)}
    plain = InferenceSession(graph, SessionOptions(graph_optimization_level="disable"), providers=["mock"])
    fast = InferenceSession(graph, providers=["mock"])
    np.testing.assert_array_equal(fast.run(None, x)[0], plain.run(None, x)[0])


def test_without_providers_nothing_is_folded(mock_plugins):
    optimized = optimize(mock_graph(), "all", [], plugins.operators())
    assert [node.op_type for node in optimized.nodes] == ["Scale", "Plus"]


def test_dead_node_elimination_keeps_what_outputs_and_subgraphs_read():
    body = Graph(nodes=[Node("Identity", ["outer"], ["b"])], outputs=[Value("b")])
    graph = Graph(
        nodes=[
            Node("Neg", ["x"], ["outer"]),
            Node("If", ["cond"], ["y"], {"then_branch": body, "else_branch": body}),
            Node("Neg", ["x"], ["dead"]),
        ],
        inputs=[Value("x"), Value("cond")],
        outputs=[Value("y")],
        initializers={"unread": np.zeros(1)},
        value_info={"dead": Value("dead", F32)},
    )
    assert eliminate_dead_nodes(graph) == 1
    assert [node.outputs[0] for node in graph.nodes] == ["outer", "y"]
    assert graph.initializers == {} and graph.value_info == {}


def test_a_value_renamed_in_the_graph_is_renamed_in_the_subgraphs_reading_it(mock_plugins):
    """Removing ``a = Identity(c)`` makes the If's branches read ``c``, so ``c``'s producer stays: the
    optimizer, which keeps the branches' free names while it rewrites the graph around them, sees
    them change."""
    branch = Graph(nodes=[Node("Scale", ["a"], ["b"], domain=MOCK_DOMAIN)], outputs=[Value("b")])
    graph = Graph(
        nodes=[
            Node("Scale", ["x"], ["c"], domain=MOCK_DOMAIN),
            Node("Identity", ["c"], ["a"]),
            Node("If", ["cond"], ["y"], {"then_branch": branch, "else_branch": branch}),
        ],
        inputs=[Value("x", F32, (2,)), Value("cond", np.dtype(bool), ())],
        outputs=[Value("y", F32, (2,))],
        opset_imports={"": 17, MOCK_DOMAIN: 1},
    )
    optimized = optimize(graph, "all", [plugins.backends()["mock"]], plugins.operators())
    assert [node.op_type for node in optimized.toposort()] == ["Scale", "If"]
    assert optimized.nodes[1].attrs["then_branch"].nodes[0].inputs == ["c"]


def test_inference_kept_across_rewrites_follows_every_change():
    """A node's kept inference is not reused once its attributes, input types or constant inputs
    change: ONNX's Transpose and Reshape shapes, worked out by hand, after each edit."""
    transpose = Node("Transpose", ["x"], ["t"], {"perm": [2, 0, 1]})
    graph = Graph(
        nodes=[transpose, Node("Reshape", ["t", "shape"], ["y"])],
        inputs=[Value("x", F32, (2, 3, 4))],
        outputs=[Value("y")],
        initializers={"shape": np.array([4, -1], np.int64)},
        opset_imports={"": 17},
    )
    memo = InferenceMemo()
    assert [infer_shapes(graph, memo=memo)[name].shape for name in ("t", "y")] == [(4, 2, 3), (4, 6)]
    transpose.attrs = {"perm": [1, 2, 0]}
    assert [infer_shapes(graph, memo=memo)[name].shape for name in ("t", "y")] == [(3, 4, 2), (4, 6)]
    graph.initializers["shape"] = np.array([-1, 2], np.int64)
    assert infer_shapes(graph, memo=memo)["y"].shape == (12, 2)
    graph.inputs = [Value("x", F32, (5, 3, 4))]
    assert [infer_shapes(graph, memo=memo)[name].shape for name in ("t", "y")] == [(3, 4, 5), (30, 2)]
