"""Operator tests: run one-node ONNX models on SpawnML and on onnxruntime, compare."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime
import pytest
import spawnml
from onnx import helper


def make_model(
    op_type: str,
    inputs: dict[str, np.ndarray],
    outputs: list[str] | int = 1,
    opset: int = 17,
    domain: str = "",
    initializers: dict[str, np.ndarray] | None = None,
    **attrs,
) -> onnx.ModelProto:
    """A model with one node; ``inputs`` become graph inputs (or initializers)."""
    initializers = initializers or {}
    output_names = [f"y{i}" for i in range(outputs)] if isinstance(outputs, int) else outputs
    node = helper.make_node(op_type, [*inputs, *initializers], output_names, domain=domain, **attrs)
    graph = helper.make_graph(
        [node],
        op_type.lower(),
        [
            helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
            for n, a in inputs.items()
        ],
        [helper.make_value_info(n, onnx.TypeProto()) for n in output_names],
        [onnx.numpy_helper.from_array(a, n) for n, a in initializers.items()],
    )
    opsets = [helper.make_opsetid("", opset)]
    if domain:
        opsets.append(helper.make_opsetid(domain, 1))
    return helper.make_model(graph, opset_imports=opsets, ir_version=8)


def run_both(model: onnx.ModelProto, feeds: dict[str, np.ndarray], providers=("cpu",)):
    """Outputs of SpawnML and of onnxruntime for the same model and feeds."""
    data = model.SerializeToString()
    ours = spawnml.InferenceSession(data, providers=list(providers)).run(None, feeds)
    reference = onnxruntime.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, feeds)
    return ours, reference


def assert_close(ours, reference, rtol: float = 1e-5, atol: float = 1e-6) -> None:
    assert len(ours) == len(reference)
    for got, want in zip(ours, reference, strict=True):
        got, want = np.asarray(got), np.asarray(want)
        assert got.dtype == want.dtype, f"dtype {got.dtype} != {want.dtype}"
        assert got.shape == want.shape, f"shape {got.shape} != {want.shape}"
        if want.dtype == object or want.dtype == bool or np.issubdtype(want.dtype, np.integer):
            np.testing.assert_array_equal(got, want)
        else:
            np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, equal_nan=True)


def assert_inferred_shapes(model: onnx.ModelProto, reference) -> None:
    """Shape inference must agree with the shapes onnxruntime actually produced."""
    graph = spawnml.load(model.SerializeToString())
    types = spawnml.passes.infer_shapes(graph)
    for value, want in zip(graph.outputs, reference, strict=True):
        inferred = types.get(value.name)
        if inferred is None:
            continue
        if inferred.dtype is not None:
            assert inferred.dtype == np.asarray(want).dtype, value.name
        if inferred.shape is not None:
            assert len(inferred.shape) == np.ndim(want), (value.name, inferred.shape)
            for dim, size in zip(inferred.shape, np.shape(want), strict=True):
                assert not isinstance(dim, int) or dim == size, (value.name, inferred.shape)


@pytest.fixture
def check():
    """``check(model, feeds, rtol=..., atol=...)``: run on both runtimes and compare."""

    def run(model, feeds, rtol=1e-5, atol=1e-6):
        ours, reference = run_both(model, feeds)
        assert_close(ours, reference, rtol, atol)
        assert_inferred_shapes(model, reference)
        return ours

    return run
