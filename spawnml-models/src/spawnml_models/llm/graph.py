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
otherwise, the token embedding table too (``spawnml.gguf::QuantizedGather`` dequantizes the rows
it looks up; the table is also the output head where the file ties them). The Q, K
and V projections, and the gate and up ones, run as one product each where their weights share
a block type, split after.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import pairwise
from typing import Any

import numpy as np
from spawnml import InvalidArgumentError
from spawnml.graph_builder import GraphBuilder
from spawnml.ir import Graph, Value
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


class _Builder(GraphBuilder):
    """The decoder graph under construction, taking weights from the GGUF ``weights``. Nodes are
    named after their first output, which keeps the name asked for (the graph inputs' names are
    claimed first, so no node takes one)."""

    def __init__(self, weights: Graph, dequantize: bool) -> None:
        super().__init__(Graph())
        self.weights, self.dequantize = weights, dequantize

    def node(self, op: str, inputs: list[str], output: str, domain: str = "", **attrs: object) -> str:
        return self.emit(op, inputs, attrs, output=self.claim(output), domain=domain)

    def constant(self, name: str, value: Callable[[], np.ndarray]) -> str:
        """The initializer ``name``, made by ``value()`` the first time it is asked for (a weight
        that two nodes read, such as a tied embedding table and output head, is stored once)."""
        if name in self.graph.initializers:
            return name
        return self.initializer(value(), name=self.claim(name))

    def weight(self, name: str) -> str:
        """A float weight, cast to float32, as an initializer of the same name."""
        return self.constant(name, lambda: np.asarray(self.weights.initializers[name], FLOAT32))

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
        split = self.constant(merged + ".split", lambda: np.asarray(rows, INT64))
        return self.add_node(
            "Split", [product, split], [self.claim(output) for output in outputs], {"axis": -1}
        )

    def _product(self, x: str, names: list[str], output: str) -> str:
        """``x @ W^T`` for the weights ``names`` stacked by rows (one block type, or all float)."""
        merged = "+".join(names)
        kind = quant_type(self.weights, names[0])
        if kind is None or self.dequantize:
            transposed = self.constant(
                merged + ".T",
                lambda: np.ascontiguousarray(
                    np.concatenate([float32_weight(self.weights, n) for n in names]).T
                ),
            )
            return self.node("MatMul", [x, transposed], output)
        blocks = self.constant(merged, lambda: stacked_rows([self.weights.initializers[n] for n in names]))
        rows, cols = _quantized_shape(self.graph.initializers[blocks], kind)
        return self.node(
            "QuantizedMatMul", [x, blocks], output, domain=GGUF_DOMAIN, quant_type=kind, rows=rows, cols=cols
        )

    def _bias(self, biases: list[str], merged: str) -> str:
        """The float32 biases ``biases`` end to end, as one initializer."""
        if len(biases) == 1:
            return self.weight(biases[0])
        return self.constant(
            merged + ".bias",
            lambda: np.concatenate([np.asarray(self.weights.initializers[bias], FLOAT32) for bias in biases]),
        )

    def embedding(self, name: str, ids: str, output: str) -> str:
        """The rows ``ids`` of the table ``name``: looked up in its blocks if it is quantized and
        kept so, else in float32."""
        kind = quant_type(self.weights, name)
        if kind is None or self.dequantize:
            table = self.constant(name + ".float", lambda: float32_weight(self.weights, name))
            return self.node("Gather", [table, ids], output, axis=0)
        table = self.constant(name, lambda: self.weights.initializers[name])
        rows, cols = _quantized_shape(self.graph.initializers[table], kind)
        return self.node(
            "QuantizedGather", [table, ids], output, domain=GGUF_DOMAIN, quant_type=kind, rows=rows, cols=cols
        )

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
    head = "output.weight" if "output.weight" in weights.initializers else "token_embd.weight"
    vocab = weights.initializers[head].shape[0]
    graph.inputs = [
        Value("input_ids", INT64, ("batch", "sequence")),
        Value("position_ids", INT64, ("batch", "sequence")),
    ]
    graph.outputs = [Value("logits", FLOAT32, ("batch", "sequence", vocab))]
    for layer in range(config.layers):
        graph.inputs += [Value(name, FLOAT32, _cache_shape(config, "past")) for name in past_names(layer)]
        graph.outputs += [
            Value(name, FLOAT32, _cache_shape(config, "total")) for name in present_names(layer)
        ]
    for value in graph.inputs:
        b.claim(value.name)
    cos, sin = rope_tables(config)
    rope = (b.constant("rope.cos", lambda: cos), b.constant("rope.sin", lambda: sin), "position_ids")
    x = b.embedding("token_embd.weight", "input_ids", "embedded")
    for layer in range(config.layers):
        x = _decoder_layer(b, config, layer, x, rope)
    x = b.rms_norm(x, "output_norm.weight", config.rms_epsilon, "final_norm")
    b.linear(x, head, "logits")
    return graph


def _decoder_layer(b: _Builder, config: LlamaConfig, layer: int, x: str, rope: tuple[str, ...]) -> str:
    """One pre-norm block: x + attention(norm(x)), then + SwiGLU MLP(norm(.)); ``rope`` the
    RotaryEmbedding inputs after the first (cos and sin tables, positions)."""
    p = f"blk.{layer}."
    h = b.rms_norm(x, p + "attn_norm.weight", config.rms_epsilon, p + "attn_in")
    q, k, v = b.linears(h, [p + f"attn_{part}.weight" for part in "qkv"], [p + part for part in "qkv"])
    rotary: dict[str, Any] = {
        "interleaved": int(config.rope_interleaved),
        "rotary_embedding_dim": config.rotary_dim,
    }
    q = b.node("RotaryEmbedding", [q, *rope], p + "q_rot", num_heads=config.heads, **rotary)
    k = b.node("RotaryEmbedding", [k, *rope], p + "k_rot", num_heads=config.kv_heads, **rotary)
    b.add_node(
        "Attention",
        [q, k, v, "", *past_names(layer)],
        [b.claim(name) for name in (p + "attn", *present_names(layer))],
        {"is_causal": 1, "q_num_heads": config.heads, "kv_num_heads": config.kv_heads},
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


def stacked_rows(parts: list[np.ndarray]) -> np.ndarray:
    """``parts`` (C-ordered, the same row size) stacked by rows: a view where each lies right after
    the one before in one buffer (the GGUF file's map, where ggml's converter writes the gate and up
    projections one after the other), else a copy."""
    first = parts[0]
    rows = sum(len(part) for part in parts)
    adjacent = all(
        part.flags.c_contiguous and part.shape[1:] == first.shape[1:] and _root(part) is _root(first)
        for part in parts
    ) and all(a.ctypes.data + a.nbytes == b.ctypes.data for a, b in pairwise(parts))
    if len(parts) == 1 or not adjacent:
        return parts[0] if len(parts) == 1 else np.concatenate(parts)
    return np.lib.stride_tricks.as_strided(first, (rows, *first.shape[1:]), first.strides, writeable=False)


def _root(array: np.ndarray) -> object:
    """The object that owns ``array``'s memory."""
    root: object = array
    while getattr(root, "base", None) is not None:
        root = root.base  # type: ignore[attr-defined]
    return root


def _quantized_shape(data: np.ndarray, kind: str) -> tuple[int, int]:
    """``(rows, cols)`` of the weight held as ``kind`` blocks ``[rows, row_bytes]``."""
    from gguf import GGML_QUANT_SIZES, GGMLQuantizationType

    block_size, block_bytes = GGML_QUANT_SIZES[GGMLQuantizationType[kind]]
    if data.ndim != 2 or data.shape[1] % block_bytes:
        raise InvalidArgumentError(f"a {kind} weight of shape {list(data.shape)} is not whole rows of blocks")
    return data.shape[0], data.shape[1] // block_bytes * block_size
