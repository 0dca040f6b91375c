"""Tensors past one kernel binding, on GPU backends whose buffers outgrow a binding (WebGPU).

Every kernel binds such a tensor in windows (``spawnml.kernel.split``). The binding limit is lowered
(64 KiB, 2 MiB) so small graphs and MiniLM cross it; onnxruntime is the reference.
"""

from __future__ import annotations

import numpy as np
import onnxruntime
import pytest
import spawnml
from onnx import TensorProto, helper
from spawnml.errors import DeviceMemoryError
from spawnml.gpu import GPUBackend
from spawnml.gpu.runtime import Runtime
from spawnml_models.assets import asset_file

from tests.backends import GPU_BACKENDS, backend_or_skip
from tests.model_files import require

rng = np.random.default_rng(11)


@pytest.fixture(params=GPU_BACKENDS)
def gpu(request: pytest.FixtureRequest) -> GPUBackend:
    backend = backend_or_skip(request.param)
    if type(backend.runtime).window is Runtime.window:
        pytest.skip(f"{backend.name} allocates no buffer past one binding, so it binds whole buffers only")
    return backend


def lower_binding_limit(gpu: GPUBackend, monkeypatch: pytest.MonkeyPatch, limit: int) -> None:
    monkeypatch.setattr(type(gpu.runtime), "max_buffer_bytes", property(lambda self: limit))


def split_programs(gpu: GPUBackend) -> set:
    """The programs compiled so far with a tensor bound in parts."""
    return {key for key in gpu.device().programs if isinstance(key, tuple)}


def operators_model() -> bytes:
    """Convolution, pooling, resize, normalization, reductions, products, softmax, gather and
    movement over a 1x8x64x64 image (128 KiB) and its derived tensors."""
    f = TensorProto.FLOAT
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["conv"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["conv"], ["relu"]),
        helper.make_node("MaxPool", ["relu"], ["pool"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Resize", ["pool", "", "scales"], ["up"], mode="linear"),
        helper.make_node("InstanceNormalization", ["up", "gamma", "beta"], ["norm"]),
        helper.make_node("Add", ["norm", "x"], ["sum"]),
        helper.make_node("Reshape", ["sum", "rows"], ["flat"]),
        helper.make_node("Softmax", ["flat"], ["soft"], axis=-1),
        helper.make_node("MatMul", ["soft", "proj"], ["mm"]),
        helper.make_node("ReduceMean", ["mm", "axis0"], ["mean"], keepdims=0),
        helper.make_node("Transpose", ["x"], ["t"], perm=[0, 2, 3, 1]),
        helper.make_node("Concat", ["t", "t"], ["cat"], axis=3),
        helper.make_node("Slice", ["cat", "starts", "ends", "axes", "steps"], ["sliced"]),
        helper.make_node("Gather", ["table", "ids"], ["gathered"], axis=0),
        helper.make_node("CumSum", ["gathered", "axis0"], ["cumsum"]),
    ]
    ints = TensorProto.INT64
    initializers = [
        helper.make_tensor("w", f, [8, 8, 3, 3], rng.standard_normal(576) * 0.2),
        helper.make_tensor("b", f, [8], rng.standard_normal(8)),
        helper.make_tensor("scales", f, [4], [1, 1, 2, 2]),
        helper.make_tensor("gamma", f, [8], rng.standard_normal(8)),
        helper.make_tensor("beta", f, [8], rng.standard_normal(8)),
        helper.make_tensor("rows", ints, [2], [512, 64]),
        helper.make_tensor("proj", f, [64, 300], rng.standard_normal(19200) * 0.1),
        helper.make_tensor("axis0", ints, [1], [0]),
        helper.make_tensor("starts", ints, [2], [1, 0]),
        helper.make_tensor("ends", ints, [2], [64, 16]),
        helper.make_tensor("axes", ints, [2], [1, 3]),
        helper.make_tensor("steps", ints, [2], [2, 3]),
        helper.make_tensor("table", f, [4000, 40], rng.standard_normal(160000)),
    ]
    graph = helper.make_graph(
        nodes,
        "large",
        [
            helper.make_tensor_value_info("x", f, [1, 8, 64, 64]),
            helper.make_tensor_value_info("ids", ints, [900]),
        ],
        [helper.make_tensor_value_info(n, f, None) for n in ("mean", "sliced", "cumsum")],
        initializers,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]).SerializeToString()


def test_every_kernel_binds_a_tensor_past_one_binding_in_parts(gpu, monkeypatch):
    """With the limit at 64 KiB the image (128 KiB), the upsampled maps, the 300-wide product and the
    640,000-byte table are each bound as several windows; answers within 1e-4 of onnxruntime."""
    lower_binding_limit(gpu, monkeypatch, 64 * 1024)
    model = operators_model()
    feeds = {
        "x": rng.standard_normal((1, 8, 64, 64)).astype(np.float32),
        "ids": rng.integers(-4000, 4000, 900),
    }
    before = split_programs(gpu)
    session = spawnml.InferenceSession(model, providers=[gpu.name])
    got = session.run(None, feeds)
    reference = onnxruntime.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, feeds)
    for value, want in zip(got, reference, strict=True):
        np.testing.assert_allclose(value, want, rtol=1e-4, atol=1e-4)
    assert len(split_programs(gpu) - before) >= 10


@pytest.mark.real_model
def test_minilm_with_activations_past_one_binding(gpu, monkeypatch):
    """MiniLM on 8 sequences of 128 tokens with a 4 MiB limit: the 47 MB word-embedding table, the
    attention scores and the feed-forward activations (6.3 MB each) are bound in parts; hidden states
    within 1e-4 (relative and absolute) of onnxruntime's, as at the full limit."""
    path = require(lambda: asset_file("minilm-onnx-int8", "model.onnx"))
    lower_binding_limit(gpu, monkeypatch, 4 * 1024 * 1024)
    session = spawnml.InferenceSession(path, providers=[gpu.name])
    ids = rng.integers(0, 30000, (8, 128))
    feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": np.zeros_like(ids)}
    feeds["attention_mask"][2, 100:] = 0
    feeds["attention_mask"][7, 9:] = 0
    before = split_programs(gpu)
    got = session.run(None, feeds)[0]
    reference = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(got, reference.run(None, feeds)[0], rtol=1e-4, atol=1e-4)
    assert split_programs(gpu) - before


def test_a_tensor_needing_more_bindings_than_the_device_has_is_named(gpu, monkeypatch):
    """Past the device's bindings per kernel the launch is refused with the tensor, the count and the
    limit; the session answers again once the tensor fits."""
    alignment = gpu.runtime.window_alignment
    lower_binding_limit(gpu, monkeypatch, alignment)
    parts = gpu.runtime.max_bindings + 1
    count = parts * alignment // 4
    node = helper.make_node("Relu", ["x"], ["y"])
    graph = helper.make_graph(
        [node],
        "relu",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n"])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()
    session = spawnml.InferenceSession(model, providers=[gpu.name])
    with pytest.raises(DeviceMemoryError) as caught:
        session.run(None, {"x": np.ones(count, np.float32)})
    message = str(caught.value)
    described = f"float32 tensor of shape [{count}] ({count * 4:,} bytes)"
    assert f"{described} in windows of at most {alignment} bytes" in message
    limit = gpu.runtime.max_bindings
    assert f"{2 * parts} bindings, past the {limit} one {gpu.name} kernel may have" in message
    x = rng.standard_normal(count // 4).astype(np.float32)
    np.testing.assert_array_equal(session.run(None, {"x": x})[0], np.maximum(x, 0))
