"""GGUF's block-quantized weights: ``spawnml.gguf::QuantizedMatMul``.

``Y = A @ dequantize(W)^T`` where ``A`` is ``[..., cols]`` and ``W`` holds a ``[rows, cols]``
weight as raw GGUF blocks, a ``uint8`` array ``[rows, cols / block_size * block_bytes]`` of
the ``quant_type`` named by its GGML spelling (``"Q4_0"``, ``"Q8_0"``, ``"Q4_K"``, ...). This is
ggml's ``mul_mat`` with a GGUF weight loaded as the format loader leaves it: GGUF's dimension
``ne[0]`` (the fastest, ``cols``) last. ``Y`` is ``[..., rows]`` in ``A``'s type.
"""

from __future__ import annotations

from ..schema import REQUIRED, Attribute, InferenceContext, OpSchema, TensorType

DOMAIN = "spawnml.gguf"


def _infer_quantized_matmul(ctx: InferenceContext) -> list[TensorType]:
    a = ctx.input(0) or TensorType(None, None)
    shape = None if a.shape is None else (*a.shape[:-1], ctx.attrs["rows"])
    return [TensorType(a.dtype, shape)]


SCHEMAS: list[OpSchema] = [
    OpSchema(
        "QuantizedMatMul",
        domain=DOMAIN,
        inputs=(2, 2),
        attributes=(
            Attribute("quant_type", "string", REQUIRED),
            Attribute("rows", "int", REQUIRED),
            Attribute("cols", "int", REQUIRED),
        ),
        infer=_infer_quantized_matmul,
        doc=__doc__ or "",
    ),
]
