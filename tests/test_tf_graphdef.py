"""Frozen TensorFlow GraphDefs on the CPU backend against TensorFlow itself.

Every graph is built here with TensorFlow (random weights, nothing downloaded), frozen with
``convert_variables_to_constants_v2`` (or TensorFlow 1's ``graph_util``) and run by both, and
converted to ONNX for onnxruntime. Outputs agree within ``rtol=1e-4, atol=1e-4``: float32
throughout, with summation orders that differ between oneDNN/Eigen, onnxruntime and numpy over
up to 1,280 terms, and batch normalisation folded to one scale and shift at load.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable

import numpy as np
import onnxruntime
import pytest
import spawnml
from spawnml import ModelLoadError, UnsupportedOperatorError, plugins
from spawnml.cli import main
from spawnml.formats import ModelSource, detect
from tensorboard.compat.proto import graph_pb2, types_pb2

from tests.fuzz.graphdef_files import add_node

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf  # after quieting its C++ logging
from tensorflow.python.framework.convert_to_constants import (
    convert_variables_to_constants_v2,
)

RTOL, ATOL = 1e-4, 1e-4
keras = tf.keras


def freeze(function: Callable, *specs: tf.TensorSpec) -> tuple[bytes, Callable]:
    """The serialized frozen GraphDef of ``function`` and the frozen concrete function."""
    frozen = convert_variables_to_constants_v2(tf.function(function).get_concrete_function(*specs))
    return frozen.graph.as_graph_def().SerializeToString(), frozen


def spec(*shape: int | None, dtype: tf.DType = tf.float32, name: str = "x") -> tf.TensorSpec:
    return tf.TensorSpec(shape, dtype, name=name)


def run_both(data: bytes, frozen: Callable, *inputs: np.ndarray) -> tuple[list, list]:
    """Outputs of SpawnML's CPU backend and of TensorFlow on the same inputs."""
    session = spawnml.InferenceSession(data, providers=["cpu"])
    names = [value.name for value in session.get_inputs()]
    ours = session.run(None, dict(zip(names, inputs, strict=True)))
    theirs = frozen(*(tf.constant(value) for value in inputs))
    return ours, [tensor.numpy() for tensor in theirs]


def assert_close(ours: list, theirs: list, atol: float = ATOL) -> None:
    assert len(ours) == len(theirs)
    for got, want in zip(ours, theirs, strict=True):
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=RTOL, atol=atol)


@pytest.fixture(autouse=True)
def fresh_plugins():
    plugins.reset()
    yield
    plugins.reset()


@pytest.fixture(scope="module")
def mobilenet() -> tuple[bytes, Callable]:
    """Keras MobileNetV2 (alpha 0.35, 96x96, logits) with random weights and batch statistics."""
    keras.utils.set_random_seed(0)
    model = keras.applications.MobileNetV2(
        input_shape=(96, 96, 3), alpha=0.35, weights=None, classifier_activation=None
    )
    rng = np.random.default_rng(0)
    for layer in model.layers:
        if isinstance(layer, keras.layers.BatchNormalization):
            gamma, beta, mean, variance = layer.get_weights()
            layer.set_weights(
                [
                    rng.uniform(0.5, 1.5, gamma.shape),
                    rng.normal(0, 0.1, beta.shape),
                    rng.normal(0, 0.1, mean.shape),
                    rng.uniform(0.5, 1.5, variance.shape),
                ]
            )
    return freeze(lambda x: model(x, training=False), spec(1, 96, 96, 3))


@pytest.fixture(scope="module")
def transformer_block() -> tuple[bytes, Callable]:
    """Self-attention, residual + layer norm, a GELU MLP, and a softmax head; any batch and length."""
    keras.utils.set_random_seed(1)
    inputs = keras.Input((None, 32))
    x = keras.layers.LayerNormalization()(inputs + keras.layers.MultiHeadAttention(4, 8)(inputs, inputs))
    hidden = keras.layers.Dense(32)(keras.layers.Dense(64, activation="gelu")(x))
    x = keras.layers.LayerNormalization()(x + hidden)
    model = keras.Model(inputs, keras.layers.Dense(5, activation="softmax")(x))
    return freeze(lambda x: model(x, training=False), spec(None, None, 32))


# -- real graphs -------------------------------------------------------------------------------


def test_mobilenet_v2_matches_tensorflow(mobilenet):
    data, frozen = mobilenet
    image = np.random.default_rng(0).uniform(-1, 1, (1, 96, 96, 3)).astype(np.float32)
    ours, theirs = run_both(data, frozen, image)
    assert np.ptp(theirs[0]) > 0.5  # logits that differ between classes
    assert_close(ours, theirs)


def test_mobilenet_v2_needs_one_transpose(mobilenet):
    """Convolutions, batch norms, ReLU6 and padding chain in NCHW: only the input is transposed."""
    graph = spawnml.load(mobilenet[0])
    counts = graph.op_counts()
    assert counts[("", "Conv")] == 52 and counts[("", "Transpose")] == 1


@pytest.mark.parametrize("shape", [(2, 16, 32), (1, 5, 32)])
def test_transformer_block_matches_tensorflow(transformer_block, shape):
    data, frozen = transformer_block
    tokens = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    assert_close(*run_both(data, frozen, tokens))


def test_tf1_frozen_graph_matches_session():
    """A TensorFlow 1 graph frozen with graph_util: variables read through Identity, fused batch norm."""
    v1 = tf.compat.v1
    graph = tf.Graph()
    with graph.as_default():
        image = v1.placeholder(tf.float32, [None, 16, 16, 3], name="image")
        init = v1.random_normal_initializer(seed=1)
        x = tf.nn.conv2d(image, v1.get_variable("w", [3, 3, 3, 8], initializer=init), 1, "SAME")
        gamma, beta, mean = (v1.get_variable(name, [8], initializer=init) for name in ("g", "b", "m"))
        variance = v1.get_variable("v", [8], initializer=v1.random_uniform_initializer(0.5, 1.5, seed=2))
        x = tf.nn.relu6(v1.nn.fused_batch_norm(x, gamma, beta, mean, variance, is_training=False)[0])
        x = tf.reshape(tf.nn.max_pool2d(x, 2, 2, "VALID"), [-1, 512])
        logits = tf.identity(tf.matmul(x, v1.get_variable("d", [512, 10], initializer=init)), name="logits")
        batch = np.random.default_rng(6).standard_normal((2, 16, 16, 3)).astype(np.float32)
        with v1.Session(graph=graph) as session:
            session.run(v1.global_variables_initializer())
            graph_def = v1.graph_util.convert_variables_to_constants(
                session, graph.as_graph_def(), ["logits"]
            )
            want = session.run(logits, {image: batch})
    ours = spawnml.InferenceSession(graph_def.SerializeToString(), providers=["cpu"])
    assert [value.name for value in ours.get_outputs()] == ["logits"]
    assert_close(ours.run(None, {"image": batch}), [want])


# -- operators ---------------------------------------------------------------------------------

rng = np.random.default_rng(2)
WEIGHTS = rng.standard_normal((3, 3, 4, 6)).astype(np.float32)
DEPTHWISE = rng.standard_normal((3, 3, 4, 2)).astype(np.float32)
MATRIX = rng.standard_normal((5, 4)).astype(np.float32)
TRANSPOSED = rng.standard_normal((3, 3, 3, 4)).astype(np.float32)
IMAGE = spec(2, 9, 9, 4)


def _batch_norm(x):
    scale, offset, mean, variance = (rng.uniform(0.5, 1.5, 4).astype(np.float32) for _ in range(4))
    return tf.compat.v1.nn.fused_batch_norm(
        x, scale, offset, mean, variance, epsilon=1e-3, is_training=False
    )[0]


#: name -> (function, input specs): each one frozen, run by both, compared.
OPERATORS: dict[str, tuple[Callable, list[tf.TensorSpec]]] = {
    "conv_same_strided": (lambda x: tf.nn.conv2d(x, WEIGHTS, 2, "SAME"), [IMAGE]),
    "conv_valid_dilated": (lambda x: tf.nn.conv2d(x, WEIGHTS, 1, "VALID", dilations=2), [IMAGE]),
    "conv_explicit": (lambda x: tf.nn.conv2d(x, WEIGHTS, 1, [[0, 0], [1, 2], [0, 1], [0, 0]]), [IMAGE]),
    "depthwise": (lambda x: tf.nn.depthwise_conv2d(x, DEPTHWISE, [1, 2, 2, 1], "SAME"), [IMAGE]),
    "pools": (
        lambda x: tf.nn.max_pool2d(x, 3, 2, "SAME") + tf.nn.avg_pool2d(x, 3, 2, "SAME"),
        [IMAGE],
    ),
    "fused_batch_norm_relu": (lambda x: tf.nn.relu(_batch_norm(x)), [IMAGE]),
    "fused_batch_norm_v1": (
        lambda x: tf.raw_ops.FusedBatchNorm(
            x=x,
            scale=[1.5, 0.5, 1.0, 2.0],
            offset=[0.1, 0.2, 0.3, 0.4],
            mean=[0.5, -0.5, 0.0, 1.0],
            variance=[1.0, 2.0, 0.5, 1.5],
            epsilon=1e-3,
            is_training=False,
        )[0],
        [IMAGE],
    ),
    "pad_concat_nchw": (
        lambda x: tf.concat(
            [
                tf.nn.relu6(tf.pad(tf.nn.conv2d(x, WEIGHTS, 1, "VALID"), [[0, 0], [1, 1], [1, 1], [0, 0]])),
                tf.nn.elu(tf.nn.conv2d(x, WEIGHTS, 1, "SAME")),
            ],
            axis=-1,
        ),
        [IMAGE],
    ),
    "mirror_pad": (lambda x: tf.pad(x, [[0, 0], [2, 1], [1, 2], [0, 0]], "REFLECT"), [IMAGE]),
    "reductions": (
        lambda x: (
            tf.reduce_mean(tf.nn.conv2d(x, WEIGHTS, 1, "SAME"), [1, 2]),
            tf.reduce_sum(x, [-1], keepdims=True),
            tf.reduce_max(tf.nn.conv2d(x, WEIGHTS, 1, "SAME"), [2]),
            tf.reduce_min(x, [0, 3]),
        ),
        [IMAGE],
    ),
    "unary": (
        lambda x: tf.concat(
            [
                tf.nn.leaky_relu(x, 0.1),
                tf.nn.selu(x),
                tf.nn.softplus(x),
                tf.nn.softsign(x),
                tf.sigmoid(x),
                tf.tanh(x),
                tf.math.erfc(x),
                tf.math.log1p(tf.abs(x)),
                tf.square(x),
                tf.math.rsqrt(tf.abs(x) + 1),
                tf.round(x * 3),
                tf.sign(x),
                tf.floor(x) + tf.math.ceil(x),
            ],
            axis=-1,
        ),
        [spec(3, 7)],
    ),
    "more_elementwise": (
        lambda x, y: (
            tf.exp(x) + tf.math.log(tf.abs(x) + 1) + tf.sqrt(tf.abs(y)) + tf.math.reciprocal(x + 5),
            tf.sin(x) * tf.cos(y) + tf.math.erf(x) + tf.pow(tf.abs(x) + 1, y),
            tf.raw_ops.Div(x=x, y=y + 5) + tf.raw_ops.Inv(x=y + 5) + tf.raw_ops.Snapshot(input=x),
            tf.cast(tf.logical_or(tf.logical_not(x > 0), tf.math.is_nan(y)), tf.float32),
            tf.reduce_prod(x, axis=1) + tf.ensure_shape(tf.reduce_sum(y, axis=1), [1]),
            *tf.identity_n([x, y]),
            tf.pad(x, [[1, 0], [0, 2]], constant_values=1.5),
        ),
        [spec(3, 7), spec(1, 7, name="y")],
    ),
    "binary": (
        lambda x, y: (
            tf.math.squared_difference(x, y),
            tf.maximum(x, y) - tf.minimum(x, 0.5),
            tf.math.floordiv(x, y + 3),
            x / (tf.abs(y) + 1),
            tf.where(x > y, x, y * 2),
            tf.clip_by_value(x, -0.5, 0.5),
            tf.cast(tf.not_equal(x, y), tf.float32) + tf.cast(tf.logical_and(x >= 0, y <= 0), tf.float32),
            tf.add_n([x, x * 2, x]),
        ),
        [spec(3, 7), spec(1, 7, name="y")],
    ),
    "matmul": (
        lambda x: (
            tf.matmul(x, MATRIX, transpose_b=True),
            tf.matmul(x, x, transpose_a=True),
        ),
        [spec(3, 4)],
    ),
    "batch_matmul_einsum": (
        lambda x: (
            tf.linalg.matmul(
                x, tf.constant(rng.standard_normal((2, 5, 4)).astype(np.float32)), adjoint_b=True
            ),
            tf.einsum("bij,bkj->bik", x, x),
        ),
        [spec(2, 3, 4)],
    ),
    "shapes": (
        lambda x: (
            tf.reshape(x, [tf.shape(x)[0], -1]),
            tf.squeeze(tf.expand_dims(x, 1), [1]),
            tf.transpose(x, [2, 0, 1]),
            tf.tile(x, [1, 2, 1]),
            tf.shape(x),
        ),
        [spec(None, 3, 4)],
    ),
    "slicing": (
        lambda x: (
            x[:, 1:, ::-2],
            x[1, :, 2],
            x[-1:, 0],
            tf.slice(x, [0, 1, 1], [-1, 2, 2]),
            tf.gather(x, [2, 0], axis=2),
            tf.gather_nd(x, [[1, 2], [0, 3]]),
            tf.one_hot(tf.argmax(x, axis=2), 5, 2.0, -1.0, axis=1),
        ),
        [spec(3, 4, 5)],
    ),
    "pack_split": (
        lambda x: (
            tf.stack([x, x * 2], axis=1),
            *tf.unstack(x, axis=1),
            *tf.split(x, 2, axis=2),
            *tf.split(x, [1, 3], axis=2),
        ),
        [spec(2, 3, 4)],
    ),
    "softmax_argmax": (
        lambda x: (
            tf.nn.softmax(x),
            tf.nn.log_softmax(x),
            tf.argmax(x, axis=1),
            tf.argmin(x, axis=0, output_type=tf.int32),
        ),
        [spec(3, 6)],
    ),
    "conv_transpose": (
        lambda x: (
            tf.nn.conv2d_transpose(x, TRANSPOSED, [2, 17, 18, 3], 2, "SAME"),
            tf.nn.conv2d_transpose(x, TRANSPOSED, [2, 19, 19, 3], 2, "VALID"),
        ),
        [IMAGE],
    ),
    "resize_blocks": (
        lambda x: (
            tf.image.resize(x, [14, 5]),
            tf.image.resize(tf.nn.relu(tf.nn.conv2d(x, WEIGHTS, 1, "SAME")), [18, 18], "nearest"),
            tf.compat.v1.image.resize_bilinear(x, [4, 13], align_corners=True),
            tf.compat.v1.image.resize_nearest_neighbor(x, [5, 12]),
            tf.nn.depth_to_space(tf.nn.space_to_depth(x[:, :8, :8], 2) * 2, 2),
        ),
        [IMAGE],
    ),
    "cumsum_topk_like": (
        lambda x: (
            tf.math.cumsum(x, axis=1, exclusive=True, reverse=True),
            *tf.math.top_k(x, 3),
            tf.broadcast_to(x[:1], [4, 7]),
            tf.zeros_like(x) + tf.ones_like(x),
        ),
        [spec(4, 7)],
    ),
    "fill_range": (
        lambda n: (tf.fill([2, 3], tf.cast(n, tf.float32)), tf.range(0, n, 2)),
        [spec(dtype=tf.int32, name="n")],
    ),
}


@pytest.mark.parametrize("name", OPERATORS)
def test_operator_matches_tensorflow(name: str):
    function, specs = OPERATORS[name]
    data, frozen = freeze(function, *specs)
    inputs = [
        np.asarray(7, np.int32)
        if item.dtype == tf.int32
        else np.random.default_rng(3).standard_normal([dim or 3 for dim in item.shape]).astype(np.float32)
        for item in specs
    ]
    assert_close(*run_both(data, frozen, *inputs))


def test_placeholder_with_default_is_an_optional_input():
    def scaled(x):
        scale = tf.compat.v1.placeholder_with_default(np.float32(2.0), [], name="scale")
        return x * scale

    data, frozen = freeze(scaled, spec(3))
    session = spawnml.InferenceSession(data, providers=["cpu"])
    x = np.arange(3, dtype=np.float32)
    np.testing.assert_array_equal(session.run(None, {"x": x})[0], frozen(tf.constant(x))[0].numpy())
    np.testing.assert_array_equal(session.run(None, {"x": x, "scale": np.float32(5)})[0], x * 5)


# -- refusals ----------------------------------------------------------------------------------


def test_unmapped_operators_are_refused_by_name():
    data, _ = freeze(lambda x: tf.math.lgamma(tf.math.bessel_i0e(x)) + tf.math.lgamma(x), spec(3, 4))
    graph = spawnml.load(data)
    assert graph.op_counts()[("tensorflow", "Lgamma")] == 2
    with pytest.raises(UnsupportedOperatorError) as caught:
        spawnml.InferenceSession(graph, providers=["cpu"])
    assert "tensorflow::Lgamma (opset 1, 2 nodes)" in str(caught.value)
    assert "tensorflow::BesselI0e" in str(caught.value)


def test_graph_with_variables_is_refused():
    variable = tf.Variable(np.ones((4, 2), np.float32))
    graph_def = tf.function(lambda x: x @ variable).get_concrete_function(spec(3, 4)).graph.as_graph_def()
    with pytest.raises(ModelLoadError, match=r"not frozen: it holds variables \(ReadVariableOp"):
        spawnml.load(graph_def.SerializeToString())


def test_saved_model_is_refused_with_advice(tmp_path):
    module = tf.Module()
    module.scale = tf.Variable(2.0)
    module.call = tf.function(lambda x: x * module.scale, input_signature=[spec(3)])
    tf.saved_model.save(module, str(tmp_path))
    with pytest.raises(ModelLoadError, match=r"SavedModel.*convert_variables_to_constants_v2"):
        spawnml.load(tmp_path / "saved_model.pb")


@pytest.mark.parametrize("damage", ["truncated", "flipped"])
def test_damaged_graphdef_is_refused(transformer_block, tmp_path, damage):
    data = bytearray(transformer_block[0])
    if damage == "truncated":
        data = data[: len(data) // 3]
    else:
        data[40:48] = b"\xff" * 8
    path = tmp_path / "damaged.pb"
    path.write_bytes(bytes(data))
    with pytest.raises(ModelLoadError, match=r"damaged\.pb' is not a valid TensorFlow GraphDef") as caught:
        spawnml.load(path)
    print(caught.value)


def _hostile(build: Callable[[graph_pb2.GraphDef], None]) -> bytes:
    graph = graph_pb2.GraphDef()
    add_node(graph, "x", "Placeholder", dtype=types_pb2.DT_FLOAT, shape=(2,))
    build(graph)
    return graph.SerializeToString()


def _constant_read_by_add(graph: graph_pb2.GraphDef, dims: list[int], values=(), content=b"") -> None:
    """A float Const written field by field, lying as asked, and an AddV2 that reads it."""
    tensor = graph.node.add(name="w", op="Const").attr["value"].tensor
    tensor.dtype = types_pb2.DT_FLOAT
    tensor.float_val.extend(values)
    tensor.tensor_content = content
    for size in dims:
        tensor.tensor_shape.dim.add(size=size)
    add_node(graph, "y", "AddV2", ("x", "w"), T=types_pb2.DT_FLOAT)


HOSTILE = {
    "splat of 2^40 elements": (  # one stored value repeated: refused before anything is allocated
        lambda graph: _constant_read_by_add(graph, [1 << 20, 1 << 20], values=[0.0]),
        r"tensor elements in .*'w'.* is 1,099,511,627,776",
    ),
    "cycle": (
        lambda graph: (
            add_node(graph, "a", "Relu", ("b",)),
            add_node(graph, "b", "Relu", ("a",)),
        ),
        r"cycle through Relu 'a', Relu 'b'",
    ),
    "dangling input": (lambda graph: add_node(graph, "y", "Relu", ("nowhere:1",)), "reads 'nowhere'"),
    "duplicate name": (lambda graph: add_node(graph, "x", "Relu", ("x",)), "two nodes named 'x'"),
    "short content": (
        lambda graph: _constant_read_by_add(graph, [3], content=bytes(8)),
        r"'w'.* holds 8 bytes, but its shape \[3\] of float32 needs 12",
    ),
    "wrong attribute kind": (
        lambda graph: add_node(graph, "y", "Conv2D", ("x", "x"), strides="1111", padding="SAME"),
        r"Conv2D node 'y' has attribute 'strides' of kind s, not list",
    ),
    "missing input": (
        lambda graph: add_node(graph, "y", "AddV2", ("x",)),
        "has 1 inputs; input 1 is missing",
    ),
}


@pytest.mark.parametrize("name", HOSTILE)
def test_hostile_graph_is_refused(name: str):
    build, message = HOSTILE[name]
    with pytest.raises(ModelLoadError, match=message):
        spawnml.load(_hostile(build))


def test_limits_bound_the_graph(transformer_block):
    with pytest.raises(spawnml.ModelLimitError, match="node count"):
        spawnml.load(transformer_block[0], limits=spawnml.Limits(max_nodes=10))


# -- detection and the command line ------------------------------------------------------------


def test_detected_by_structure_then_extension(mobilenet, transformer_block, tmp_path):
    loaders = list(plugins.formats().values())
    for data in (mobilenet[0], transformer_block[0]):
        assert [loader.name for loader in loaders if loader.sniff(data[:64])] == ["tensorflow"]
    other = tmp_path / "graph.pb"
    other.write_bytes(b"\x22\x02\x08\x01")  # a GraphDef with versions only: no node to recognise
    assert detect(ModelSource.of(other), loaders).name == "tensorflow"
    with pytest.raises(ModelLoadError, match="holds none"):
        spawnml.load(other)


def test_other_formats_are_not_taken_for_graphdefs():
    from tests.fuzz.seeds import SEEDS

    loader = plugins.formats()["tensorflow"]
    others = {name: build()[:64] for name, build in SEEDS.items() if name != "tensorflow"}
    assert [name for name, head in others.items() if loader.sniff(head)] == []
    assert loader.sniff(SEEDS["tensorflow"]()[:64])


def test_info_and_convert_to_onnx(transformer_block, tmp_path, capsys):
    data, frozen = transformer_block
    model = tmp_path / "block.pb"
    model.write_bytes(data)
    assert main(["info", str(model), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["format"] == "tensorflow"
    assert [value["name"] for value in report["inputs"]] == ["x"]
    assert [value["name"] for value in report["outputs"]] == ["Identity"]

    converted = tmp_path / "block.onnx"
    assert main(["convert", str(model), str(converted)]) == 0
    tokens = np.random.default_rng(4).standard_normal((2, 16, 32)).astype(np.float32)
    session = onnxruntime.InferenceSession(str(converted), providers=["CPUExecutionProvider"])
    assert_close(session.run(None, {"x": tokens}), [frozen(tf.constant(tokens))[0].numpy()])


def test_loading_does_not_import_tensorflow(tmp_path, transformer_block):
    """The loader reads GraphDefs through TensorBoard's protos; TensorFlow is the tests' reference only."""
    import subprocess
    import sys

    model = tmp_path / "block.pb"
    model.write_bytes(transformer_block[0])
    script = f"import sys, spawnml; spawnml.load({str(model)!r}); print('tensorflow' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"


def test_converted_mobilenet_matches_tensorflow(mobilenet, tmp_path):
    data, frozen = mobilenet
    model = tmp_path / "mobilenet.pb"
    model.write_bytes(data)
    converted = tmp_path / "mobilenet.onnx"
    assert main(["convert", str(model), str(converted)]) == 0
    image = np.random.default_rng(5).uniform(-1, 1, (1, 96, 96, 3)).astype(np.float32)
    session = onnxruntime.InferenceSession(str(converted), providers=["CPUExecutionProvider"])
    assert_close(session.run(None, {"x": image}), [frozen(tf.constant(image))[0].numpy()])
