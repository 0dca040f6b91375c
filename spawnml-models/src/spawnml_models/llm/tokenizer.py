"""A ``tokenizers.Tokenizer`` built from the vocabulary in GGUF metadata (``tokenizer.ggml.*``)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

from spawnml import InvalidArgumentError

if TYPE_CHECKING:  # tokenizers is imported where a tokenizer is built: registering the model must not load it
    from tokenizers import Tokenizer, pre_tokenizers
    from tokenizers.decoders import DecodeStream

#: GGUF token types (``tokenizer.ggml.token_type``) matched whole in text, never split by BPE.
CONTROL, USER_DEFINED = 3, 4
#: Splits applied before byte-level BPE, by ``tokenizer.ggml.pre`` (llama.cpp's pre-tokenizer names).
DIGITS_FIRST = ("smollm",)
#: Qwen2's pre-tokenizer pattern (its tokenizer.json): contractions, letter runs with one leading
#: non-letter, single digits, punctuation runs, newlines, spaces.
QWEN2_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+"
    r"|\s+(?!\S)|\s+"
)


@dataclass(frozen=True)
class GGUFTokenizer:
    """The tokenizer and the special token ids of a GGUF model."""

    tokenizer: Tokenizer
    bos_id: int | None
    eos_id: int | None
    add_bos: bool

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` (special tokens written in it are recognised), with BOS if the model asks."""
        ids = self.tokenizer.encode(text, add_special_tokens=False).ids
        return [self.bos_id, *ids] if self.add_bos and self.bos_id is not None else ids

    def decode(self, ids: list[int], skip_special_tokens: bool = False) -> str:
        """The text of ``ids``."""
        return self.tokenizer.decode(ids, skip_special_tokens=skip_special_tokens)

    def decode_stream(self) -> DecodeStream:
        """A streaming decoder of generated ids (``step(self.tokenizer, id)`` gives the new text, or
        None while a character is incomplete)."""
        from tokenizers.decoders import DecodeStream

        return DecodeStream(skip_special_tokens=False)

    def token(self, token_id: int) -> str:
        """The vocabulary entry of ``token_id``."""
        return self.tokenizer.id_to_token(token_id) or ""


def tokenizer_from_gguf(metadata: dict[str, str]) -> GGUFTokenizer:
    """The byte-level BPE tokenizer (``tokenizer.ggml.model == "gpt2"``) described by ``metadata``."""
    from tokenizers import AddedToken, Tokenizer, decoders, models

    kind = metadata.get("tokenizer.ggml.model")
    if kind != "gpt2":
        raise InvalidArgumentError(f"GGUF tokenizer model {kind!r} is not supported; supported: 'gpt2'")
    tokens: list[str] = json.loads(metadata["tokenizer.ggml.tokens"])
    merges = [tuple(merge.split(" ", 1)) for merge in json.loads(metadata.get("tokenizer.ggml.merges", "[]"))]
    types: list[int] = json.loads(metadata.get("tokenizer.ggml.token_type", "[]")) or [1] * len(tokens)
    tokenizer = Tokenizer(
        models.BPE(vocab={token: i for i, token in enumerate(tokens)}, merges=merges, fuse_unk=False)
    )
    tokenizer.pre_tokenizer = _pre_tokenizer(metadata.get("tokenizer.ggml.pre", "gpt2"))
    tokenizer.decoder = decoders.ByteLevel()
    if len(types) != len(tokens):
        raise InvalidArgumentError(f"GGUF lists {len(types)} token types for {len(tokens)} tokens")
    typed = list(zip(tokens, types, strict=True))
    tokenizer.add_special_tokens(
        [AddedToken(tok, special=True, normalized=False) for tok, t in typed if t == CONTROL]
    )
    tokenizer.add_tokens([AddedToken(tok, normalized=False) for tok, t in typed if t == USER_DEFINED])
    return GGUFTokenizer(
        tokenizer=tokenizer,
        bos_id=_optional_int(metadata.get("tokenizer.ggml.bos_token_id")),
        eos_id=_optional_int(metadata.get("tokenizer.ggml.eos_token_id")),
        add_bos=metadata.get("tokenizer.ggml.add_bos_token") == "true",
    )


def _pre_tokenizer(name: str) -> pre_tokenizers.PreTokenizer:
    from tokenizers import Regex, pre_tokenizers

    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    if name == "qwen2":
        return pre_tokenizers.Sequence(
            [
                pre_tokenizers.Split(Regex(QWEN2_SPLIT), behavior="isolated"),
                pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
            ]
        )
    if name in DIGITS_FIRST:
        return pre_tokenizers.Sequence(
            [pre_tokenizers.Split(Regex(r"\p{N}"), behavior="isolated"), byte_level]
        )
    return byte_level


def _optional_int(text: str | None) -> int | None:
    return None if text is None else int(text)
