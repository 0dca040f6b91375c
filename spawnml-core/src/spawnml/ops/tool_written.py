"""Operators that common tools write and SpawnML does not run yet, with the tool that writes each,
so that a refusal tells the user where the operator came from and what to change."""

from __future__ import annotations

MICROSOFT = "com.microsoft"
_TRANSFORMERS = "onnxruntime.transformers' optimizer"
_DIFFUSION = f"{_TRANSFORMERS} for Stable Diffusion models"
_GENERATION = "onnxruntime.transformers' convert_generation"
_GENAI = "onnxruntime-genai's model builder"

#: ``(domain, operator) -> the tool that typically writes it``.
WRITTEN_BY: dict[tuple[str, str], str] = {
    (MICROSOFT, "SparseAttention"): _GENAI,
    (MICROSOFT, "MatMulBnb4"): "bitsandbytes-style 4-bit weight quantization of onnxruntime",
    (MICROSOFT, "BiasSplitGelu"): _DIFFUSION,
    (MICROSOFT, "GroupNorm"): _DIFFUSION,
    (MICROSOFT, "SkipGroupNorm"): _DIFFUSION,
    (MICROSOFT, "NhwcConv"): _DIFFUSION,
    (MICROSOFT, "BiasDropout"): "onnxruntime-training's graph transformers",
    (MICROSOFT, "PackedAttention"): f"{_TRANSFORMERS} (packing mode)",
    (MICROSOFT, "PackedMultiHeadAttention"): f"{_TRANSFORMERS} (packing mode)",
    (MICROSOFT, "DecoderMaskedMultiHeadAttention"): _GENERATION,
    (MICROSOFT, "DecoderMaskedSelfAttention"): _GENERATION,
    (MICROSOFT, "BeamSearch"): _GENERATION,
    (MICROSOFT, "GreedySearch"): _GENERATION,
    (MICROSOFT, "Sampling"): _GENERATION,
    (MICROSOFT, "WhisperBeamSearch"): _GENERATION,
    (MICROSOFT, "LongformerAttention"): f"{_TRANSFORMERS} for Longformer",
    (MICROSOFT, "QOrderedMatMul"): "onnxruntime's ordered int8 quantization for CUDA",
    (MICROSOFT, "QOrderedAttention"): "onnxruntime's ordered int8 quantization for CUDA",
}


def missing_schema_reason(domain: str, op_type: str) -> str:
    """Why a node has no schema: that it has none, and where such nodes come from when known."""
    tool = WRITTEN_BY.get((domain, op_type))
    if tool is None:
        return "no operator schema registered"
    return f"no operator schema registered (written by {tool}; SpawnML does not run it yet)"
