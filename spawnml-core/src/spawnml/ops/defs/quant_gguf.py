"""GGUF's block-quantized weights: ``spawnml.gguf::QuantizedMatMul`` and ``QuantizedGather``.

``QuantizedMatMul``: ``Y = A @ dequantize(W)^T`` where ``A`` is ``[..., cols]`` and ``W`` holds a
``[rows, cols]`` weight as raw GGUF blocks, a ``uint8`` array ``[rows, cols / block_size *
block_bytes]`` of the ``quant_type`` named by its GGML spelling (``"Q4_0"``, ``"Q8_0"``,
``"Q4_K"``, ...). This is ggml's ``mul_mat`` with a GGUF weight loaded as the format loader
leaves it: GGUF's dimension ``ne[0]`` (the fastest, ``cols``) last. ``Y`` is ``[..., rows]`` in ``A``'s type.

``QuantizedGather``: ``Y = dequantize(W)[indices]``, float32 ``[*indices.shape, cols]``, for int64
``indices`` in ``[0, rows)``: a token embedding table read as ``Gather`` reads it, only the rows
looked up dequantized (the table stays blocks, and may be the output head's weight too).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ...ir import Node
from ..schema import REQUIRED, Attribute, InferenceContext, OpSchema, TensorType
from ..shapes import as_text

DOMAIN = "spawnml.gguf"


def _infer_quantized_matmul(ctx: InferenceContext) -> list[TensorType]:
    a = ctx.input(0) or TensorType(None, None)
    shape = None if a.shape is None else (*a.shape[:-1], ctx.attrs["rows"])
    return [TensorType(a.dtype, shape)]


def _infer_quantized_gather(ctx: InferenceContext) -> list[TensorType]:
    indices = ctx.input(1) or TensorType(None, None)
    shape = None if indices.shape is None else (*indices.shape, ctx.attrs["cols"])
    return [TensorType(np.dtype(np.float32), shape)]


def block_problem(node: Node, block_sizes: Mapping[str, int], reader: str) -> str | None:
    """Why ``reader``, which reads the block types of ``block_sizes`` (elements a block), cannot run
    ``node``, or None: its block type, and sizes that are positive with ``cols`` whole blocks."""
    quant_type = as_text(node.attrs.get("quant_type", ""))
    if quant_type not in block_sizes:
        return f"quant_type={quant_type!r}: {reader} reads {', '.join(block_sizes)} blocks"
    cols, rows = node.attrs.get("cols", 0), node.attrs.get("rows", 0)
    if rows <= 0 or cols <= 0 or cols % block_sizes[quant_type]:
        return f"rows={rows}, cols={cols}: need positive sizes, cols whole {quant_type} blocks"
    return None


_SHAPE = (
    Attribute("quant_type", "string", REQUIRED),
    Attribute("rows", "int", REQUIRED),
    Attribute("cols", "int", REQUIRED),
)

SCHEMAS: list[OpSchema] = [
    OpSchema(
        "QuantizedMatMul",
        domain=DOMAIN,
        inputs=(2, 2),
        attributes=_SHAPE,
        infer=_infer_quantized_matmul,
        doc=__doc__ or "",
    ),
    OpSchema(
        "QuantizedGather",
        domain=DOMAIN,
        inputs=(2, 2),
        attributes=_SHAPE,
        infer=_infer_quantized_gather,
        doc=__doc__ or "",
    ),
]
