"""MelWeightMatrix on every GPU backend against onnxruntime: filter banks of several sizes, sample
rates and frequency ranges, float32, float64 and integer outputs. The weights are ratios of small
integers computed in the output's float type (float32 for integers: a correctly rounded division,
as the float64 reference's rounding to float32 is), so they must be equal exactly.
"""

from __future__ import annotations

import numpy as np
import onnxruntime
import pytest
import spawnml
from onnx import TensorProto, helper, numpy_helper

from tests.backends import GPU_BACKENDS, backend_or_skip


@pytest.fixture(params=GPU_BACKENDS, scope="module")
def provider(request) -> str:
    backend_or_skip(request.param)
    return request.param


CASES = [
    (8, 16, 8192, 0.0, 4096.0, TensorProto.FLOAT),
    (40, 512, 16000, 20.0, 7600.0, TensorProto.FLOAT),
    (80, 400, 16000, 0.0, 8000.0, TensorProto.FLOAT),
    (13, 255, 22050, 300.0, 10000.0, TensorProto.INT32),
    (30, 300, 16000, 60.0, 7000.0, TensorProto.DOUBLE),
]


@pytest.mark.parametrize(
    ("bins", "length", "rate", "low", "high", "dtype"), CASES, ids=[str(i) for i in range(len(CASES))]
)
def test_mel_weight_matrix(
    provider: str, bins: int, length: int, rate: int, low: float, high: float, dtype: int
) -> None:
    values = {
        "num_mel_bins": np.array(bins, np.int64),
        "dft_length": np.array(length, np.int64),
        "sample_rate": np.array(rate, np.int64),
        "lower_edge_hertz": np.array(low, np.float32),
        "upper_edge_hertz": np.array(high, np.float32),
    }
    node = helper.make_node("MelWeightMatrix", list(values), ["y"], output_datatype=dtype)
    graph = helper.make_graph(
        [node],
        "mel",
        [],
        [helper.make_empty_tensor_value_info("y")],
        [numpy_helper.from_array(v, n) for n, v in values.items()],
    )
    onnx_model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    data = onnx_model.SerializeToString()
    session = spawnml.InferenceSession(data, providers=[provider])
    assert {p for _, _, p in session.placement()} == {provider}
    (got,) = session.run(None, {})
    (want,) = onnxruntime.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, {})
    assert (got.dtype, got.shape) == (want.dtype, want.shape) == (got.dtype, (length // 2 + 1, bins))
    np.testing.assert_array_equal(got, want)
