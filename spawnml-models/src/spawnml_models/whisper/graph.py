"""Whisper's encoder and decoder as SpawnML graphs, built from a CTranslate2 ``WhisperSpec`` model.

Encoder: ``features`` (float32 ``[batch, 80, 3000]``, one 30 s log-mel window) to
``encoder_output`` (``[batch, 1500, width]``): two GELU convolutions (the second of stride 2),
learned positions, pre-norm transformer layers and a final LayerNorm. It also projects the
cross-attention keys and values of every decoder layer once, as ``cross_key.i`` /
``cross_value.i`` (``[batch, 1500, width]``), so decode steps do not repeat that work.

Decoder: ``input_ids`` and ``position_ids`` (int64 ``[batch, sequence]``), the cross keys and
values and, per layer, ``past_key.i`` / ``past_value.i`` (``[batch, heads, past, head_dim]``,
as :class:`~spawnml_models.llm.cache.KVCache` keeps them) to ``logits`` (``[batch, sequence,
vocab]``, tied to the token embeddings) and ``present_key.i`` / ``present_value.i``.

CTranslate2 stores each linear weight as ``[out, in]`` with a fused query-key-value
projection (``linear_0``) in self-attention and a fused key-value one (``linear_1``) in
cross-attention; the graphs split their outputs. Float weights of any stored precision
are widened to float32; int8-quantized models are refused.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from spawnml import ModelLoadError
from spawnml.ir import Graph, Value

from ..bert import TransformerBuilder
from ..ctranslate2 import CTranslate2Model
from ..llm.graph import past_names, present_names

OPSET = 23  # Attention
SPEC = "WhisperSpec"
FLOAT32 = np.dtype(np.float32)
INT64 = np.dtype(np.int64)
ENCODER_OUTPUT = "encoder_output"
GELU_ERF = 3  # CTranslate2's ActivationType::GELU
LAYER_NORM_EPSILON = 1e-5


def cross_names(layer: int) -> tuple[str, str]:
    """The cross-attention key and value names of decoder ``layer``."""
    return f"cross_key.{layer}", f"cross_value.{layer}"


@dataclass(frozen=True)
class WhisperConfig:
    """The dimensions of a Whisper model, read from its variables.

    ``layers``, ``kv_heads`` and ``head_dim`` describe the decoder's self-attention cache as
    :class:`~spawnml_models.llm.cache.KVCache` expects them.
    """

    width: int
    heads: int
    encoder_layers: int
    layers: int
    vocab: int
    frames: int  # encoder positions: input frames / 2
    context: int  # decoder positions

    @property
    def kv_heads(self) -> int:
        return self.heads

    @property
    def head_dim(self) -> int:
        return self.width // self.heads

    @classmethod
    def from_model(cls, model: CTranslate2Model) -> WhisperConfig:
        """The configuration of a CTranslate2 Whisper model; other specs, settings, quantized
        weights and missing variables are refused."""
        if model.spec != SPEC:
            raise ModelLoadError(f"the CTranslate2 model follows {model.spec}, not {SPEC}")
        names = model.variables
        _require(names, _GLOBAL_VARIABLES)
        quantized = sorted(name for name, value in names.items() if value.ndim and value.dtype.kind != "f")
        if quantized:
            raise ModelLoadError(
                f"the Whisper model has {len(quantized)} quantized variables ({quantized[0]}, ...); "
                "only float models (float32, float16, bfloat16) are supported"
            )
        settings = {"decoder/activation": GELU_ERF, "decoder/pre_norm": 1, "decoder/scale_embeddings": 0}
        for name, wanted in settings.items():
            if name in names and model.scalar(name) != wanted:
                raise ModelLoadError(f"{name} is {model.scalar(name)}; Whisper's decoder has {wanted}")
        heads = int(model.scalar("encoder/num_heads"))
        if model.scalar("decoder/num_heads") != heads:
            raise ModelLoadError("the encoder and decoder of this Whisper model have different head counts")
        vocab, width = names["decoder/embeddings/weight"].shape
        config = cls(
            width=width,
            heads=heads,
            encoder_layers=_count_layers(names, "encoder"),
            layers=_count_layers(names, "decoder"),
            vocab=vocab,
            frames=names["encoder/position_encodings/encodings"].shape[0],
            context=names["decoder/position_encodings/encodings"].shape[0],
        )
        for stack, count in (("encoder", config.encoder_layers), ("decoder", config.layers)):
            _require(
                names, [f"{stack}/layer_{i}/{leaf}" for i in range(count) for leaf in _LAYER_VARIABLES[stack]]
            )
        return config


def _require(names: dict[str, np.ndarray], wanted: list[str]) -> None:
    missing = [name for name in wanted if name not in names]
    if missing:
        raise ModelLoadError(f"the Whisper model lacks {len(missing)} variables: {', '.join(missing[:5])}")


def _leaves(*modules: str) -> list[str]:
    """The variables of linear and layer-norm modules: ``weight`` / ``bias`` or ``gamma`` / ``beta``."""
    return [
        f"{module}/{leaf}"
        for module in modules
        for leaf in (("gamma", "beta") if module.endswith("layer_norm") else ("weight", "bias"))
    ]


_GLOBAL_VARIABLES = [
    "encoder/num_heads",
    "decoder/num_heads",
    "encoder/position_encodings/encodings",
    "decoder/position_encodings/encodings",
    "decoder/embeddings/weight",
    *_leaves("encoder/conv1", "encoder/conv2", "encoder/layer_norm", "decoder/layer_norm"),
]
_BLOCK = ("self_attention/layer_norm", "self_attention/linear_0", "self_attention/linear_1")
_FFN = ("ffn/layer_norm", "ffn/linear_0", "ffn/linear_1")
_CROSS = ("attention/layer_norm", "attention/linear_0", "attention/linear_1", "attention/linear_2")
_LAYER_VARIABLES = {"encoder": _leaves(*_BLOCK, *_FFN), "decoder": _leaves(*_BLOCK, *_CROSS, *_FFN)}


def _count_layers(names: dict[str, np.ndarray], stack: str) -> int:
    count = 0
    while f"{stack}/layer_{count}/ffn/linear_0/weight" in names:
        count += 1
    return count


def _weights(model: CTranslate2Model) -> dict[str, np.ndarray]:
    """The variables under the dotted names :class:`~spawnml_models.bert.TransformerBuilder` uses
    (``a/b/gamma`` as ``a.b.weight``, ``beta`` as ``bias``)."""
    renamed = {}
    for name, value in model.variables.items():
        scope, _, leaf = name.rpartition("/")
        leaf = {"gamma": "weight", "beta": "bias"}.get(leaf, leaf)
        renamed[f"{scope.replace('/', '.')}.{leaf}"] = value
    return renamed


class _WhisperBuilder(TransformerBuilder):
    """The BERT port's builder with Whisper's blocks: split projections, attention, GELU MLP."""

    def __init__(self, model: CTranslate2Model, name: str) -> None:
        super().__init__(_weights(model), name, OPSET)
        self.config = WhisperConfig.from_model(model)
        width = self.config.width
        self.thirds = self.ints([width] * 3, "split_3")
        self.halves = self.ints([width] * 2, "split_2")

    def split(self, x: str, sizes: str, outputs: list[str]) -> list[str]:
        return self.add_node("Split", [x, sizes], [self.claim(name) for name in outputs], {"axis": -1})

    def split_projection(self, x: str, prefix: str, parts: int) -> list[str]:
        """The ``parts`` equal slices of ``linear(x, prefix)``: query, key, value or key, value."""
        sizes = self.thirds if parts == 3 else self.halves
        fused = self.linear(x, prefix)
        return self.split(fused, sizes, [f"{fused}.{i}" for i in range(parts)])

    def attention(self, q: str, k: str, v: str, layer: int | None = None, **attrs: int) -> str:
        """Multi-head attention of 3-D ``q`` over ``k`` / ``v``; with ``layer``, also over that
        decoder layer's past keys and values, giving its present ones."""
        output = self.fresh("attention")
        heads = {"q_num_heads": self.config.heads, "kv_num_heads": self.config.heads}
        inputs, outputs = [q, k, v], [output]
        if layer is not None:
            inputs += ["", *past_names(layer)]
            outputs += [self.claim(name) for name in present_names(layer)]
        self.add_node("Attention", inputs, outputs, {**heads, **attrs})
        return output

    def feed_forward(self, x: str, prefix: str) -> str:
        """``x + linear_1(gelu(linear_0(layer_norm(x))))``."""
        h = self.layer_norm(x, f"{prefix}.layer_norm", LAYER_NORM_EPSILON)
        return self.op(
            "Add", x, self.linear(self.op("Gelu", self.linear(h, f"{prefix}.linear_0")), f"{prefix}.linear_1")
        )

    def output(self, x: str, name: str, shape: tuple[int | str, ...]) -> None:
        self.emit("Identity", [x], output=self.claim(name))
        self.graph.outputs.append(Value(name, FLOAT32, shape))


def build_encoder_graph(model: CTranslate2Model) -> Graph:
    """The encoder graph, with the decoder's cross-attention keys and values (see the module doc)."""
    b = _WhisperBuilder(model, "whisper-encoder")
    config = b.config
    b.graph.inputs = [
        Value("features", FLOAT32, ("batch", b.weights["encoder.conv1.weight"].shape[1], 2 * config.frames))
    ]
    x = b.op(
        "Gelu",
        b.op(
            "Conv", "features", b.weight("encoder.conv1.weight"), b.weight("encoder.conv1.bias"), pads=[1, 1]
        ),
    )
    x = b.op(
        "Gelu",
        b.op(
            "Conv",
            x,
            b.weight("encoder.conv2.weight"),
            b.weight("encoder.conv2.bias"),
            pads=[1, 1],
            strides=[2],
        ),
    )
    x = b.op("Add", b.op("Transpose", x, perm=[0, 2, 1]), b.weight("encoder.position_encodings.encodings"))
    for layer in range(config.encoder_layers):
        p = f"encoder.layer_{layer}"
        h = b.layer_norm(x, f"{p}.self_attention.layer_norm", LAYER_NORM_EPSILON)
        q, k, v = b.split_projection(h, f"{p}.self_attention.linear_0", 3)
        x = b.op("Add", x, b.linear(b.attention(q, k, v), f"{p}.self_attention.linear_1"))
        x = b.feed_forward(x, f"{p}.ffn")
    x = b.layer_norm(x, "encoder.layer_norm", LAYER_NORM_EPSILON)
    shape = ("batch", config.frames, config.width)
    b.output(x, ENCODER_OUTPUT, shape)
    for layer in range(config.layers):
        key, value = b.split_projection(x, f"decoder.layer_{layer}.attention.linear_1", 2)
        for part, name in zip((key, value), cross_names(layer), strict=True):
            b.output(part, name, shape)
    return b.graph


def build_decoder_graph(model: CTranslate2Model) -> Graph:
    """The decoder graph, one or more tokens per run over a self-attention cache (see the module doc)."""
    b = _WhisperBuilder(model, "whisper-decoder")
    config = b.config
    cache_shape = ("batch", config.heads, "past", config.head_dim)
    b.graph.inputs = [Value(name, INT64, ("batch", "sequence")) for name in ("input_ids", "position_ids")]
    b.graph.inputs += [
        Value(name, FLOAT32, ("batch", config.frames, config.width))
        for layer in range(config.layers)
        for name in cross_names(layer)
    ]
    embeddings = b.weight("decoder.embeddings.weight")
    x = b.op(
        "Add",
        b.op("Gather", embeddings, "input_ids"),
        b.op("Gather", b.weight("decoder.position_encodings.encodings"), "position_ids"),
    )
    for layer in range(config.layers):
        p = f"decoder.layer_{layer}"
        b.graph.inputs += [Value(name, FLOAT32, cache_shape) for name in past_names(layer)]
        h = b.layer_norm(x, f"{p}.self_attention.layer_norm", LAYER_NORM_EPSILON)
        q, k, v = b.split_projection(h, f"{p}.self_attention.linear_0", 3)
        attended = b.attention(q, k, v, layer, is_causal=1)
        x = b.op("Add", x, b.linear(attended, f"{p}.self_attention.linear_1"))
        h = b.layer_norm(x, f"{p}.attention.layer_norm", LAYER_NORM_EPSILON)
        attended = b.attention(b.linear(h, f"{p}.attention.linear_0"), *cross_names(layer))
        x = b.op("Add", x, b.linear(attended, f"{p}.attention.linear_2"))
        x = b.feed_forward(x, f"{p}.ffn")
    x = b.layer_norm(x, "decoder.layer_norm", LAYER_NORM_EPSILON)
    logits = b.op("MatMul", x, b.weight("decoder.embeddings.weight", transpose=True))
    b.output(logits, "logits", ("batch", "sequence", config.vocab))
    for layer in range(config.layers):
        for name in present_names(layer):
            b.graph.outputs.append(Value(name, FLOAT32, ("batch", config.heads, "total", config.head_dim)))
    return b.graph
