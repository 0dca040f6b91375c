"""A llama-family decoder (llama, qwen2) as a SpawnML graph, built from a weights-only GGUF graph.

Inputs: ``input_ids`` and ``position_ids`` (int64 ``[batch, sequence]``) and, per layer ``i``,
``past_key.i`` / ``past_value.i`` (``[batch, kv_heads, past, head_dim]``; ``past`` may be 0).
Outputs: ``logits`` (float32 ``[batch, sequence, vocab]``) and ``present_key.i`` /
``present_value.i``, the past with this call's keys and values appended.

GGUF stores llama's Q and K projections with the rows of each head permuted so that the
rotary pairs are adjacent (ggml's "normal" RoPE); RotaryEmbedding with ``interleaved=1`` rotates
exactly those pairs, so the weights are used as stored. Qwen2's are stored unpermuted and rotated
as halves (``interleaved=0``). A projection with a ``.bias`` tensor in the file gets it added.
Quantized weights stay as raw blocks under ``spawnml.gguf::QuantizedMatMul`` unless asked
otherwise; the token embedding table, which Gather indexes, is dequantized once here. The Q, K
and V projections, and the gate and up ones, run as one product each where their weights share
a block type, split after.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from spawnml import InvalidArgumentError
from spawnml.ir import Graph, Node, Value
from spawnml.ops.defs.quant_gguf import DOMAIN as GGUF_DOMAIN
from spawnml_formats.gguf.loader import quant_type

from .config import LlamaConfig

OPSET = 23
FLOAT32 = np.dtype(np.float32)
INT64 = np.dtype(np.int64)


def past_names(layer: int) -> tuple[str, str]:
    """The past key and value input names of ``layer``."""
    return f"past_key.{layer}", f"past_value.{layer}"


def present_names(layer: int) -> tuple[str, str]:
    """The present key and value output names of ``layer``."""
    return f"present_key.{layer}", f"present_value.{layer}"


def rope_tables(config: LlamaConfig) -> tuple[np.ndarray, np.ndarray]:
    """RotaryEmbedding's cos and sin caches ``[context_length, rotary_dim / 2]`` for llama's
    frequencies ``base ** (-2i / rotary_dim)``."""
    inv_freq = 1.0 / config.rope_base ** (
        np.arange(0, config.rotary_dim, 2, dtype=np.float64) / config.rotary_dim
    )
    angles = np.outer(np.arange(config.context_length, dtype=np.float64), inv_freq)
    return np.cos(angles).astype(FLOAT32), np.sin(angles).astype(FLOAT32)


@dataclass
class _Builder:
    """Appends nodes and initializers to ``graph``, taking weights from the GGUF ``weights``."""

    weights: Graph
    dequantize: bool
    graph: Graph = field(default_factory=Graph)

    def node(self, op: str, inputs: list[str], output: str, domain: str = "", **attrs: object) -> str:
        self.graph.nodes.append(Node(op, inputs, [output], attrs, name=output, domain=domain))
        return output

    def weight(self, name: str) -> str:
        """A float weight, cast to float32, as an initializer of the same name."""
        if name not in self.graph.initializers:
            self.graph.initializers[name] = np.asarray(self.weights.initializers[name], FLOAT32)
        return name

    def linear(self, x: str, name: str, output: str) -> str:
        """``x @ W^T (+ b)`` for the GGUF weight ``name`` (``[rows, cols]``) and its bias if the file
        has one: QuantizedMatMul on the raw blocks if quantized and kept so, else MatMul on float32."""
        return self.linears(x, [name], [output])[0]

    def linears(self, x: str, names: list[str], outputs: list[str]) -> list[str]:
        """:meth:`linear` for several weights of one input: one product over their rows, split,
        where they share a block type and all or none have a bias (a decode step then makes one
        kernel call, with more rows to share between threads, instead of several)."""
        kinds = {quant_type(self.weights, name) for name in names}
        biases = [name.removesuffix(".weight") + ".bias" for name in names]
        with_bias = {bias in self.weights.initializers for bias in biases}
        if len(names) > 1 and (len(kinds) > 1 or len(with_bias) > 1):
            return [self.linear(x, name, output) for name, output in zip(names, outputs, strict=True)]
        merged = "+".join(names)
        product = outputs[0] if len(names) == 1 else merged + ".product"
        if with_bias == {True}:
            product = self.node(
                "Add", [self._product(x, names, product + ".unbiased"), self._bias(biases, merged)], product
            )
        else:
            self._product(x, names, product)
        if len(names) == 1:
            return outputs
        rows = [self.weights.initializers[name].shape[0] for name in names]
        self.graph.initializers[merged + ".split"] = np.asarray(rows, INT64)
        self.graph.nodes.append(
            Node("Split", [product, merged + ".split"], outputs, {"axis": -1}, name=merged)
        )
        return outputs

    def _product(self, x: str, names: list[str], output: str) -> str:
        """``x @ W^T`` for the weights ``names`` stacked by rows (one block type, or all float)."""
        merged = "+".join(names)
        kind = quant_type(self.weights, names[0])
        if kind is None or self.dequantize:
            stacked = np.concatenate([float32_weight(self.weights, name) for name in names])
            self.graph.initializers[merged + ".T"] = np.ascontiguousarray(stacked.T)
            return self.node("MatMul", [x, merged + ".T"], output)
        data = [self.weights.initializers[name] for name in names]
        self.graph.initializers[merged] = data[0] if len(data) == 1 else np.concatenate(data)
        rows, cols = _quantized_shape(self.graph.initializers[merged], kind)
        return self.node(
            "QuantizedMatMul", [x, merged], output, domain=GGUF_DOMAIN, quant_type=kind, rows=rows, cols=cols
        )

    def _bias(self, biases: list[str], merged: str) -> str:
        """The float32 biases ``biases`` end to end, as one initializer."""
        if len(biases) == 1:
            return self.weight(biases[0])
        name = merged + ".bias"
        self.graph.initializers[name] = np.concatenate(
            [np.asarray(self.weights.initializers[bias], FLOAT32) for bias in biases]
        )
        return name

    def rms_norm(self, x: str, name: str, epsilon: float, output: str) -> str:
        return self.node("RMSNormalization", [x, self.weight(name)], output, axis=-1, epsilon=epsilon)


def build_llama_graph(weights: Graph, dequantize: bool = False) -> Graph:
    """The decoder graph of the llama GGUF file loaded as ``weights`` (see the module doc).

    ``dequantize`` turns every quantized weight into float32 MatMul weights once, here: about
    eight times the memory of 4-bit blocks, for speed where no kernel multiplies blocks fast.
    """
    config = LlamaConfig.from_metadata(weights.metadata)
    b = _Builder(weights, dequantize)
    graph = b.graph
    graph.name, graph.metadata = weights.name, dict(weights.metadata)
    graph.opset_imports = {"": OPSET, GGUF_DOMAIN: 1}
    graph.inputs = [
        Value("input_ids", INT64, ("batch", "sequence")),
        Value("position_ids", INT64, ("batch", "sequence")),
    ]
    graph.initializers["token_embd"] = float32_weight(weights, "token_embd.weight")
    graph.initializers["rope.cos"], graph.initializers["rope.sin"] = rope_tables(config)
    x = b.node("Gather", ["token_embd", "input_ids"], "embedded", axis=0)
    for layer in range(config.layers):
        x = _decoder_layer(b, config, layer, x)
    x = b.rms_norm(x, "output_norm.weight", config.rms_epsilon, "final_norm")
    head = "output.weight" if "output.weight" in weights.initializers else "token_embd.weight"
    b.linear(x, head, "logits")
    vocab = weights.initializers[head].shape[0]
    graph.outputs = [Value("logits", FLOAT32, ("batch", "sequence", vocab))]
    for layer in range(config.layers):
        graph.outputs += [
            Value(name, FLOAT32, _cache_shape(config, "total")) for name in present_names(layer)
        ]
    return graph


def _decoder_layer(b: _Builder, config: LlamaConfig, layer: int, x: str) -> str:
    """One pre-norm block: x + attention(norm(x)), then + SwiGLU MLP(norm(.))."""
    p = f"blk.{layer}."
    past_key, past_value = past_names(layer)
    present_key, present_value = present_names(layer)
    b.graph.inputs += [Value(name, FLOAT32, _cache_shape(config, "past")) for name in (past_key, past_value)]
    h = b.rms_norm(x, p + "attn_norm.weight", config.rms_epsilon, p + "attn_in")
    q, k, v = b.linears(h, [p + f"attn_{part}.weight" for part in "qkv"], [p + part for part in "qkv"])
    rope = ["rope.cos", "rope.sin", "position_ids"]
    rotary: dict[str, Any] = {
        "interleaved": int(config.rope_interleaved),
        "rotary_embedding_dim": config.rotary_dim,
    }
    q = b.node("RotaryEmbedding", [q, *rope], p + "q_rot", num_heads=config.heads, **rotary)
    k = b.node("RotaryEmbedding", [k, *rope], p + "k_rot", num_heads=config.kv_heads, **rotary)
    b.graph.nodes.append(
        Node(
            "Attention",
            [q, k, v, "", past_key, past_value],
            [p + "attn", present_key, present_value],
            {"is_causal": 1, "q_num_heads": config.heads, "kv_num_heads": config.kv_heads},
            name=p + "attn",
        )
    )
    attended = b.linear(p + "attn", p + "attn_output.weight", p + "attn_out")
    x = b.node("Add", [x, attended], p + "attn_res")
    h = b.rms_norm(x, p + "ffn_norm.weight", config.rms_epsilon, p + "ffn_in")
    gate, up = b.linears(h, [p + "ffn_gate.weight", p + "ffn_up.weight"], [p + "gate", p + "up"])
    silu = b.node("Mul", [gate, b.node("Sigmoid", [gate], p + "gate_sigmoid")], p + "gate_silu")
    down = b.linear(b.node("Mul", [silu, up], p + "ffn_hidden"), p + "ffn_down.weight", p + "down")
    return b.node("Add", [x, down], p + "out")


def _cache_shape(config: LlamaConfig, length: str) -> tuple[str | int, ...]:
    return ("batch", config.kv_heads, length, config.head_dim)


def float32_weight(weights: Graph, name: str) -> np.ndarray:
    """The GGUF tensor ``name`` as float32, dequantized if it is held as blocks."""
    data = weights.initializers[name]
    kind = quant_type(weights, name)
    if kind is None:
        return np.asarray(data, FLOAT32)
    from gguf import GGMLQuantizationType  # the gguf package loads slowly; only GGUF models need it
    from gguf.quants import dequantize as gguf_dequantize

    return gguf_dequantize(np.asarray(data), GGMLQuantizationType[kind]).astype(FLOAT32, copy=False)


def _quantized_shape(data: np.ndarray, kind: str) -> tuple[int, int]:
    """``(rows, cols)`` of the weight held as ``kind`` blocks ``[rows, row_bytes]``."""
    from gguf import GGML_QUANT_SIZES, GGMLQuantizationType

    block_size, block_bytes = GGML_QUANT_SIZES[GGMLQuantizationType[kind]]
    if data.ndim != 2 or data.shape[1] % block_bytes:
        raise InvalidArgumentError(f"a {kind} weight of shape {list(data.shape)} is not whole rows of blocks")
    return data.shape[0], data.shape[1] // block_bytes * block_size
