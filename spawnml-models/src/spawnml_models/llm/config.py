"""The hyper-parameters of a llama-family GGUF file (llama, qwen2), read from its metadata."""

from __future__ import annotations

from dataclasses import dataclass

from spawnml import InvalidArgumentError

#: Architectures whose GGUF tensors and metadata follow llama's names and layout -> whether their
#: Q and K rows are stored permuted for ggml's interleaved ("normal") RoPE. llama.cpp's converter
#: permutes llama's; qwen2 keeps the halves layout that NeoX-style RoPE rotates. Qwen2 also adds
#: biases to Q, K and V, which the graph builder picks up wherever the file has them.
ARCHITECTURES = {"llama": True, "qwen2": False}


@dataclass(frozen=True)
class LlamaConfig:
    """What the graph builder needs to know about a llama-family model."""

    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    rotary_dim: int
    context_length: int
    rope_base: float
    rms_epsilon: float
    rope_interleaved: bool = True

    @classmethod
    def from_metadata(cls, metadata: dict[str, str]) -> LlamaConfig:
        """The configuration under ``<architecture>.*`` keys of GGUF ``metadata``."""
        arch = metadata.get("general.architecture", "")
        if arch not in ARCHITECTURES:
            raise InvalidArgumentError(
                f"GGUF architecture {arch!r} is not supported for text generation; supported: "
                f"{sorted(ARCHITECTURES)}"
            )

        def number(key: str, default: str | None = None) -> str:
            value = metadata.get(f"{arch}.{key}", default)
            if value is None:
                raise InvalidArgumentError(f"GGUF metadata lacks {arch}.{key}")
            return value

        hidden, heads = int(number("embedding_length")), int(number("attention.head_count"))
        head_dim = int(number("attention.key_length", str(hidden // heads)))
        return cls(
            layers=int(number("block_count")),
            hidden=hidden,
            heads=heads,
            kv_heads=int(number("attention.head_count_kv", str(heads))),
            head_dim=head_dim,
            rotary_dim=int(number("rope.dimension_count", str(head_dim))),
            context_length=int(number("context_length")),
            rope_base=float(number("rope.freq_base", "10000")),
            rms_epsilon=float(number("attention.layer_norm_rms_epsilon")),
            rope_interleaved=ARCHITECTURES[arch],
        )
