"""The hyper-parameters of a llama-architecture GGUF file, read from its metadata."""

from __future__ import annotations

from dataclasses import dataclass

from spawnml import InvalidArgumentError

#: Architectures whose GGUF tensors and metadata follow llama's names and layout.
ARCHITECTURES = ("llama",)


@dataclass(frozen=True)
class LlamaConfig:
    """What the graph builder needs to know about a llama model."""

    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    rotary_dim: int
    context_length: int
    rope_base: float
    rms_epsilon: float

    @classmethod
    def from_metadata(cls, metadata: dict[str, str]) -> LlamaConfig:
        """The configuration under ``<architecture>.*`` keys of GGUF ``metadata``."""
        arch = metadata.get("general.architecture", "")
        if arch not in ARCHITECTURES:
            raise InvalidArgumentError(
                f"GGUF architecture {arch!r} is not supported for text generation; supported: {ARCHITECTURES}"
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
        )
