"""Loss operators (NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss) against onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest
import spawnml
from spawnml.ir import Node
from spawnml.ops.defs.loss import SCHEMAS
from spawnml.ops.registry import OperatorRegistry
from spawnml.ops.schema import InferenceContext, TensorType

from tests.ops.conftest import make_model

#: float32 sums of a few dozen logarithms.
FLOAT = {"rtol": 1e-5, "atol": 1e-6}
#: float16 against onnxruntime, which may accumulate in float16.
HALF = {"rtol": 2e-3, "atol": 2e-3}
CLASSES = 5
LOSSES = ["NegativeLogLikelihoodLoss", "SoftmaxCrossEntropyLoss"]

rng = np.random.default_rng(0)


def loss_model(
    op: str, shape: tuple[int, ...], weight: bool, opset: int, outputs: int = 1, dtype=np.float32, **attrs
):
    """A one-node model and its feeds: scores of ``shape``, int64 targets and optional weights."""
    target_shape = (shape[0], *shape[2:])
    feeds = {
        "scores": rng.standard_normal(shape).astype(dtype),
        "target": rng.integers(0, shape[1], target_shape).astype(np.int64),
    }
    if "ignore_index" in attrs:
        feeds["target"][rng.random(target_shape) < 0.3] = attrs["ignore_index"]
    if weight:
        feeds["weight"] = rng.random(shape[1]).astype(dtype)
    return make_model(op, feeds, outputs, opset, **attrs), feeds


SHAPES = [(4, CLASSES), (3, CLASSES, 2), (2, CLASSES, 3, 4), (2, CLASSES, 2, 1, 3, 2)]


@pytest.mark.parametrize("op", LOSSES)
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
@pytest.mark.parametrize("weight", [False, True])
def test_losses(check, op, shape, reduction, weight):
    check(*loss_model(op, shape, weight, 13, reduction=reduction), **FLOAT)


@pytest.mark.parametrize("op", LOSSES)
@pytest.mark.parametrize("ignore_index", [0, 3, -1, CLASSES + 2])
@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
@pytest.mark.parametrize("weight", [False, True])
def test_ignore_index(check, op, ignore_index, reduction, weight):
    model = loss_model(op, (3, CLASSES, 4), weight, 13, ignore_index=ignore_index, reduction=reduction)
    check(*model, **FLOAT)


@pytest.mark.parametrize("reduction", ["none", "mean"])
@pytest.mark.parametrize("weight", [False, True])
def test_log_prob_output(check, reduction, weight):
    model = loss_model("SoftmaxCrossEntropyLoss", (3, CLASSES, 2), weight, 13, 2, reduction=reduction)
    check(*model, **FLOAT)


@pytest.mark.parametrize("op", LOSSES)
@pytest.mark.parametrize("opset", [12, 13, 22])
def test_opsets(check, op, opset):
    check(*loss_model(op, (4, CLASSES, 3), True, opset, ignore_index=1), **FLOAT)


@pytest.mark.parametrize("op", LOSSES)
def test_int32_targets(check, op):
    model, feeds = loss_model(op, (4, CLASSES), True, 13)
    feeds["target"] = feeds["target"].astype(np.int32)
    model.graph.input[1].type.tensor_type.elem_type = 6  # int32
    check(model, feeds, **FLOAT)


@pytest.mark.parametrize("op", LOSSES)
@pytest.mark.parametrize(
    "dtype, tolerance", [(np.float16, HALF), (np.float64, {"rtol": 1e-12, "atol": 1e-12})]
)
def test_float_types(check, op, dtype, tolerance):
    check(*loss_model(op, (4, CLASSES, 3), True, 13, dtype=dtype, reduction="mean"), **tolerance)


@pytest.mark.parametrize("op", LOSSES)
def test_target_out_of_range(op):
    model, feeds = loss_model(op, (2, CLASSES), False, 13)
    feeds["target"][0] = CLASSES
    session = spawnml.InferenceSession(model.SerializeToString(), providers=["cpu"])
    with pytest.raises(spawnml.SpawnMLError, match="targets"):
        session.run(None, feeds)


@pytest.mark.parametrize("op", LOSSES)
def test_unknown_reduction_refused(op):
    model, _ = loss_model(op, (2, CLASSES), False, 13, reduction="max")
    with pytest.raises(spawnml.UnsupportedOperatorError, match=op):
        spawnml.InferenceSession(model.SerializeToString(), providers=["cpu"])


REGISTRY = OperatorRegistry(SCHEMAS)


@pytest.mark.parametrize("reduction, expected", [("none", ("N", "D")), ("mean", ()), ("sum", ())])
def test_symbolic_shapes(reduction, expected):
    schema = REGISTRY.lookup("", "SoftmaxCrossEntropyLoss", 13)
    node = Node("SoftmaxCrossEntropyLoss", ["x", "t"], ["loss", "log_prob"], {"reduction": reduction})
    types = [TensorType(np.dtype(np.float32), ("N", 5, "D")), TensorType(np.dtype(np.int64), ("N", "D"))]
    loss, log_prob = schema.infer(InferenceContext(node, 13, schema.resolve_attrs(node), types))
    assert loss.shape == expected
    assert log_prob.shape == ("N", 5, "D")
