"""Whisper's greedy decoding rules: which tokens may come next, and how timestamps pair up.

The rules are those of Whisper's ``ApplyTimestampRules`` as CTranslate2 applies them (and so
faster-whisper): ``<|notimestamps|>`` never; the first token is a timestamp no later than
``max_initial_timestamp``; timestamps come in pairs (a lone one only right before the end of
text), never decrease, and a segment closes later than it opens; when the timestamps together
are likelier than any single text token, a timestamp is taken. The suppressed tokens of the
model's ``config.json`` are banned at every step, and with ``suppress_blank`` a blank or the
end of text cannot come first.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from spawnml import ModelLoadError

if TYPE_CHECKING:
    import tokenizers

#: Seconds per timestamp token.
TIME_PRECISION = 0.02


@dataclass(frozen=True)
class SpecialTokens:
    """The ids of the control tokens of a Whisper vocabulary; timestamps run to the last id."""

    eot: int
    sot: int
    no_timestamps: int
    no_speech: int
    vocab: int

    @property
    def timestamp_begin(self) -> int:
        return self.no_timestamps + 1

    @classmethod
    def from_tokenizer(cls, tokenizer: tokenizers.Tokenizer, vocab: int) -> SpecialTokens:
        def find(*tokens: str) -> int:
            ids = [i for i in map(tokenizer.token_to_id, tokens) if i is not None]
            if not ids:
                raise ModelLoadError(f"the Whisper tokenizer has no token {' or '.join(tokens)}")
            return ids[0]

        return cls(
            eot=find("<|endoftext|>"),
            sot=find("<|startoftranscript|>"),
            no_timestamps=find("<|notimestamps|>"),
            no_speech=find("<|nospeech|>", "<|nocaptions|>"),
            vocab=vocab,
        )


@dataclass(frozen=True)
class TimestampRules:
    """Bans, for each decoding step, the tokens Whisper's rules forbid (see the module doc)."""

    tokens: SpecialTokens
    suppress: tuple[int, ...]
    suppress_begin: tuple[int, ...] = ()
    max_initial_timestamp: float = 1.0

    def apply(self, logits: np.ndarray, generated: list[int]) -> np.ndarray:
        """``logits`` of the next token after ``generated``, with banned tokens set to ``-inf``."""
        t = self.tokens
        begin = t.timestamp_begin
        banned = np.zeros(len(logits), bool)
        banned[list(self.suppress)] = True
        banned[t.no_timestamps] = True
        check_timestamp_mass = True
        if not generated:
            banned[list(self.suppress_begin)] = True
            banned[:begin] = True
            banned[begin + round(self.max_initial_timestamp / TIME_PRECISION) + 1 :] = True
            check_timestamp_mass = False
        else:
            last_is_time = generated[-1] >= begin
            before_is_time = len(generated) < 2 or generated[-2] >= begin
            if last_is_time and before_is_time:
                banned[begin:] = True  # a pair just closed: text or the end comes next
                check_timestamp_mass = False
            elif last_is_time:
                banned[: t.eot] = True  # a lone timestamp: its pair or the end comes next
            times = [token for token in generated if token >= begin]
            if times:  # no going back in time, nor closing a segment where it opened
                banned[begin : times[-1] + (0 if last_is_time and not before_is_time else 1)] = True
        masked = np.where(banned, -np.inf, logits)
        if check_timestamp_mass:
            log_probs = log_softmax(masked)
            if np.logaddexp.reduce(log_probs[begin:]) > log_probs[:begin].max():
                masked[:begin] = -np.inf
        return masked


def log_softmax(logits: np.ndarray) -> np.ndarray:
    """``log(softmax(logits))`` in float64, ``-inf`` where ``logits`` is."""
    shifted = logits.astype(np.float64) - np.max(logits)
    return shifted - np.log(np.exp(shifted).sum())
