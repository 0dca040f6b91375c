"""A BERT encoder built as an ai.onnx graph from a Hugging Face ``config.json`` and SafeTensors weights.

:func:`bert_graph` takes ``input_ids``, ``attention_mask`` and ``token_type_ids`` (int64,
``[batch, sequence]``) to ``last_hidden_state`` (float32, ``[batch, sequence, hidden]``),
as ``transformers``' ``BertModel`` does, with GELU written exactly (with Erf). Any
backend that runs the standard operators runs it through :class:`spawnml.InferenceSession`.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import spawnml
from spawnml import InvalidArgumentError
from spawnml.graph_builder import GraphBuilder
from spawnml.ir import Graph, Value

from .assets import asset_file

WEIGHTS_ASSET = "minilm-safetensors"
OPSET = 17  # LayerNormalization
INPUTS = ("input_ids", "attention_mask", "token_type_ids")
OUTPUT = "last_hidden_state"


@dataclass(frozen=True)
class BertConfig:
    """The fields of a BERT ``config.json`` the encoder needs."""

    hidden_size: int
    num_attention_heads: int
    num_hidden_layers: int
    layer_norm_eps: float

    @classmethod
    def from_file(cls, path: str | Path) -> BertConfig:
        config = json.loads(Path(path).read_text(encoding="utf-8"))
        if config.get("model_type") != "bert" or config.get("hidden_act") != "gelu":
            raise InvalidArgumentError(f"{path} is not a BERT config with exact GELU")
        if config.get("position_embedding_type", "absolute") != "absolute":
            raise InvalidArgumentError(
                f"{path} asks for {config['position_embedding_type']} position embeddings"
            )
        return cls(
            config["hidden_size"],
            config["num_attention_heads"],
            config["num_hidden_layers"],
            config["layer_norm_eps"],
        )


class TransformerBuilder(GraphBuilder):
    """A graph over named weights, with the linear and normalization layers of transformer encoders.

    Outputs are named after their operator; weights keep their state-dict names.
    """

    def __init__(self, weights: dict[str, np.ndarray], name: str, opset: int) -> None:
        super().__init__(Graph(opset_imports={"": opset}, name=name))
        self.weights = weights

    def output_base(self, op_type: str, inputs: list[str]) -> str:
        return op_type.lower()

    def weight(self, name: str, transpose: bool = False) -> str:
        """The weight ``name`` as a float32 initializer of that name (``name.T`` transposed)."""
        stored = name + (".T" if transpose else "")
        if stored in self.graph.initializers:
            return stored
        array = np.asarray(self.weights[name], dtype=np.float32)
        value = np.ascontiguousarray(array.T) if transpose else array
        return self.initializer(value, name=self.claim(stored))

    def op(self, op_type: str, *inputs: str, **attrs: object) -> str:
        """Append one node, its attributes as keywords."""
        return self.emit(op_type, list(inputs), attrs)

    def linear(self, x: str, prefix: str) -> str:
        return self.op(
            "Add",
            self.op("MatMul", x, self.weight(f"{prefix}.weight", transpose=True)),
            self.weight(f"{prefix}.bias"),
        )

    def layer_norm(self, x: str, prefix: str, eps: float) -> str:
        return self.op(
            "LayerNormalization",
            x,
            self.weight(f"{prefix}.weight"),
            self.weight(f"{prefix}.bias"),
            axis=-1,
            epsilon=eps,
        )


def bert_graph(config: BertConfig, weights: dict[str, np.ndarray]) -> Graph:
    """The encoder's graph; ``weights`` are named as in ``BertModel``'s state dict."""
    b = TransformerBuilder(weights, "bert", OPSET)
    heads, hidden = config.num_attention_heads, config.hidden_size
    head_size = hidden // heads
    ids, mask, types = INPUTS
    b.graph.inputs = [Value(name, np.dtype(np.int64), ("batch", "sequence")) for name in INPUTS]

    one = b.initializer(np.array(1, np.int64), "one")
    length = b.op("Gather", b.op("Shape", ids), one, axis=0)
    positions = b.op("Range", b.initializer(np.array(0, np.int64), "zero"), length, one)
    x = b.op(
        "Add",
        b.op(
            "Add",
            b.op("Gather", b.weight("embeddings.word_embeddings.weight"), ids),
            b.op("Gather", b.weight("embeddings.token_type_embeddings.weight"), types),
        ),
        b.op("Gather", b.weight("embeddings.position_embeddings.weight"), positions),
    )
    x = b.layer_norm(x, "embeddings.LayerNorm", config.layer_norm_eps)

    # 0 where attended, the most negative float where masked: [batch, 1, 1, sequence]
    keep = b.op("Cast", b.op("Unsqueeze", mask, b.ints([1, 2], "axes_1_2")), to=1)
    lowest = b.initializer(np.array(np.finfo(np.float32).min, np.float32), "lowest")
    one_f = b.initializer(np.array(1, np.float32), "one_f")
    bias = b.op("Mul", b.op("Sub", one_f, keep), lowest)
    split_heads = b.ints([0, 0, heads, head_size], "split_heads")
    merge_heads = b.ints([0, 0, hidden], "merge_heads")
    scale = b.initializer(np.array(1 / math.sqrt(head_size), np.float32), "scale")
    root_half = b.initializer(np.array(1 / math.sqrt(2), np.float32), "root_half")
    half = b.initializer(np.array(0.5, np.float32), "half")

    for layer in range(config.num_hidden_layers):
        p = f"encoder.layer.{layer}"

        query, key, value = (
            b.op(
                "Transpose",
                b.op("Reshape", b.linear(x, f"{p}.attention.self.{name}"), split_heads),
                perm=perm,
            )
            for name, perm in (("query", [0, 2, 1, 3]), ("key", [0, 2, 3, 1]), ("value", [0, 2, 1, 3]))
        )
        probs = b.op("Softmax", b.op("Add", b.op("Mul", b.op("MatMul", query, key), scale), bias), axis=-1)
        context = b.op("MatMul", probs, value)
        context = b.op("Reshape", b.op("Transpose", context, perm=[0, 2, 1, 3]), merge_heads)
        attended = b.op("Add", b.linear(context, f"{p}.attention.output.dense"), x)
        x = b.layer_norm(attended, f"{p}.attention.output.LayerNorm", config.layer_norm_eps)

        inner = b.linear(x, f"{p}.intermediate.dense")
        gelu = b.op(
            "Mul", b.op("Mul", inner, half), b.op("Add", b.op("Erf", b.op("Mul", inner, root_half)), one_f)
        )
        x = b.layer_norm(
            b.op("Add", b.linear(gelu, f"{p}.output.dense"), x),
            f"{p}.output.LayerNorm",
            config.layer_norm_eps,
        )

    b.emit("Identity", [x], output=b.claim(OUTPUT))
    b.graph.outputs = [Value(OUTPUT, np.dtype(np.float32), ("batch", "sequence", hidden))]
    return b.graph


def load_bert(
    weights: str | Path | None = None, config: str | Path | None = None, providers: list[str] | None = None
) -> spawnml.InferenceSession:
    """A session running the BERT encoder of a ``model.safetensors`` and its ``config.json``.

    Both default to the cached all-MiniLM-L6-v2 files.
    """
    weights = weights if weights is not None else asset_file(WEIGHTS_ASSET, "model.safetensors")
    config = config if config is not None else asset_file(WEIGHTS_ASSET, "config.json")
    tensors = spawnml.load(os.fspath(weights)).initializers
    return spawnml.InferenceSession(bert_graph(BertConfig.from_file(config), tensors), providers=providers)
