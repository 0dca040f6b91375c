import numpy as np
import pytest
import spawnml
from spawnml.ir import Graph, Node, Value

MOCK_DOMAIN = "test.mock"  # the domain of the mock plugin in conftest.py

F32 = np.dtype(np.float32)


def mock_graph(*nodes: Node, inputs=None, initializers=None) -> Graph:
    inputs = inputs or [Value("x", F32, ("batch", 3))]
    return Graph(
        list(nodes),
        inputs,
        [Value("y", F32, ("batch", 3))],
        initializers=initializers or {},
        opset_imports={"": 17, MOCK_DOMAIN: 1},
        name="mock",
    )


def scale_plus(factor: float = 3.0) -> Graph:
    return mock_graph(
        Node("Scale", ["x"], ["s"], {"factor": factor}, name="scale", domain=MOCK_DOMAIN),
        Node("Plus", ["s", "bias"], ["y"], name="plus", domain=MOCK_DOMAIN),
        initializers={"bias": np.arange(3, dtype=np.float32)},
    )


def test_run_matches_numpy_and_reports_placement(mock_plugins):
    session = spawnml.InferenceSession(scale_plus(), providers=["mock"])
    x = np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32)
    (y,) = session.run(None, {"x": x})
    np.testing.assert_array_equal(y, x * np.float32(3.0) + np.arange(3, dtype=np.float32))
    assert session.get_providers() == ["mock"]
    assert [(a.name, a.type, a.shape) for a in session.get_inputs()] == [("x", "tensor(float)", ["batch", 3])]
    assert session.placement() == [("scale", "Scale", "mock"), ("plus", "Plus", "mock")]
    assert session.transfers() == []


def test_schema_default_attribute_reaches_kernel(mock_plugins):
    graph = mock_graph(Node("Scale", ["x"], ["y"], domain=MOCK_DOMAIN))
    x = np.ones((1, 3), np.float32)
    (y,) = spawnml.InferenceSession(graph, providers=["mock"]).run(None, {"x": x})
    np.testing.assert_array_equal(y, x * 2)


def test_run_with_tensors_keeps_outputs_on_device_and_exports_dlpack(mock_plugins):
    session = spawnml.InferenceSession(scale_plus(), providers=["mock"])
    x = spawnml.Tensor.from_numpy(np.ones((4, 3), np.float32), device="mock")
    (y,) = session.run_with_tensors(None, {"x": x})
    assert (y.device, y.shape, y.dtype) == ("mock", (4, 3), F32)
    np.testing.assert_array_equal(np.from_dlpack(y), np.ones((4, 3)) * 3 + np.arange(3))


def test_unsupported_operators_listed_at_load(mock_plugins):
    graph = mock_graph(
        Node("Nowhere", ["x"], ["a"], domain=MOCK_DOMAIN),
        Node("Nowhere", ["a"], ["b"], domain=MOCK_DOMAIN),
        Node("Mystery", ["b"], ["y"], domain="com.example"),
    )
    graph.opset_imports["com.example"] = 4
    with pytest.raises(spawnml.UnsupportedOperatorError) as caught:
        spawnml.InferenceSession(graph, providers=["mock"])
    found = {(op.domain, op.op_type, op.opset, op.count) for op in caught.value.operators}
    assert found == {(MOCK_DOMAIN, "Nowhere", 1, 2), ("com.example", "Mystery", 4, 1)}
    assert caught.value.providers == ("mock",)
    message = str(caught.value)
    assert "test.mock::Nowhere (opset 1, 2 nodes): mock: no mock kernel" in message
    assert "com.example::Mystery (opset 4, 1 node): no operator schema registered" in message


@pytest.mark.parametrize(
    ("feeds", "message"),
    [
        (
            {"z": np.ones((1, 3), np.float32)},
            r"unknown input name\(s\) \['z'\]; the model's inputs are \['x'\]",
        ),
        ({}, r"missing input\(s\) \['x'\]"),
        (
            {"x": np.ones((1, 3), np.float64)},
            "input 'x' expects tensor\\(float\\) but got tensor\\(double\\)",
        ),
        ({"x": np.ones((3,), np.float32)}, r"input 'x' expects rank 2 \[batch, 3\] but got rank 1 \[3\]"),
        ({"x": np.ones((1, 4), np.float32)}, r"axis 1: 4 != 3"),
    ],
)
def test_bad_feeds_name_input_expected_and_given(mock_plugins, feeds, message):
    session = spawnml.InferenceSession(scale_plus(), providers=["mock"])
    with pytest.raises(spawnml.InvalidFeedError, match=message):
        session.run(None, feeds)


def test_symbolic_dims_must_agree_between_inputs(mock_plugins):
    graph = mock_graph(
        Node("Plus", ["x", "x2"], ["y"], domain=MOCK_DOMAIN),
        inputs=[Value("x", F32, ("batch", 3)), Value("x2", F32, ("batch", 3))],
    )
    session = spawnml.InferenceSession(graph, providers=["mock"])
    with pytest.raises(spawnml.InvalidFeedError, match="'batch' = 1, but input 'x' gave 'batch' = 2"):
        session.run(None, {"x": np.ones((2, 3), np.float32), "x2": np.ones((1, 3), np.float32)})


def test_kernel_failure_names_node_operator_and_provider(mock_plugins):
    graph = mock_graph(Node("Fails", ["x"], ["y"], name="boom", domain=MOCK_DOMAIN))
    session = spawnml.InferenceSession(graph, providers=["mock"])
    with pytest.raises(spawnml.ExecutionError, match=r"node 'boom' \(Fails\) failed on provider 'mock'"):
        session.run(None, {"x": np.ones((1, 3), np.float32)})


def test_provider_errors(mock_plugins):
    with pytest.raises(spawnml.BackendUnavailableError, match="'gpu9' is not installed"):
        spawnml.InferenceSession(scale_plus(), providers=["gpu9"])
    with pytest.raises(spawnml.BackendUnavailableError, match="no absent device here"):
        spawnml.InferenceSession(scale_plus(), providers=["absent"])


def test_missing_attribute_and_unknown_attribute_are_refused(mock_plugins):
    graph = mock_graph(Node("Scale", ["x"], ["y"], {"factr": 1.0}, domain=MOCK_DOMAIN))
    with pytest.raises(spawnml.InvalidGraphError, match=r"no attribute\(s\) \['factr'\]"):
        spawnml.InferenceSession(graph, providers=["mock"])


def test_limits_refuse_large_initializers(mock_plugins):
    from spawnml.limits import check_graph

    with pytest.raises(
        spawnml.ModelLimitError, match="tensor elements in initializer 'bias' is 3, above the limit of 2"
    ):
        check_graph(scale_plus(), spawnml.Limits(max_tensor_elements=2))
    with pytest.raises(spawnml.ModelLimitError, match="node count is 2, above the limit of 1"):
        check_graph(scale_plus(), spawnml.Limits(max_nodes=1))


def test_shape_inference_through_mock_schemas(mock_plugins):
    types = spawnml.passes.infer_shapes(scale_plus())
    assert types["s"].shape == ("batch", 3)
    assert types["y"].dtype == F32 and types["y"].shape == ("batch", 3)
