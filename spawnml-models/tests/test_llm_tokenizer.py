"""The GGUF tokenizer on a tiny byte-level BPE vocabulary, and chat template rendering."""

from __future__ import annotations

import json

import pytest
from spawnml import InvalidArgumentError
from spawnml_models.llm import ChatTemplate, tokenizer_from_gguf
from tokenizers import pre_tokenizers

BYTES = list(pre_tokenizers.ByteLevel.alphabet())
MERGES = ["h e", "l l", "he ll", "Ġ w", "o r", "Ġw or"]
TOKENS = ["<|end|>", "<|start|>", *sorted(BYTES), "he", "ll", "hell", "Ġw", "or", "Ġwor"]


def _metadata(**extra: str) -> dict[str, str]:
    return {
        "tokenizer.ggml.model": "gpt2",
        "tokenizer.ggml.pre": "smollm",
        "tokenizer.ggml.tokens": json.dumps(TOKENS),
        "tokenizer.ggml.token_type": json.dumps([3, 3] + [1] * (len(TOKENS) - 2)),
        "tokenizer.ggml.merges": json.dumps(MERGES),
        "tokenizer.ggml.bos_token_id": "1",
        "tokenizer.ggml.eos_token_id": "0",
        **extra,
    }


@pytest.mark.parametrize(
    "text", ["hello world", "héllo wörld 123!", "<|start|>hell<|end|>", "  tabs\tand\nnewlines "]
)
def test_round_trip(text: str) -> None:
    tokenizer = tokenizer_from_gguf(_metadata())
    assert tokenizer.decode(tokenizer.encode(text)) == text


def test_merges_special_tokens_digits_and_bos() -> None:
    tokenizer = tokenizer_from_gguf(_metadata())
    ids = tokenizer.encode("<|start|>hello world 42")
    assert [tokenizer.token(i) for i in ids] == ["<|start|>", "hell", "o", "Ġwor", "l", "d", "Ġ", "4", "2"]
    assert tokenizer.decode(ids, skip_special_tokens=True) == "hello world 42"
    with_bos = tokenizer_from_gguf(_metadata(**{"tokenizer.ggml.add_bos_token": "true"}))
    assert with_bos.encode("he")[0] == 1 and tokenizer.eos_id == 0


def test_other_tokenizer_models_are_refused() -> None:
    with pytest.raises(InvalidArgumentError, match="'llama' is not supported"):
        tokenizer_from_gguf(_metadata(**{"tokenizer.ggml.model": "llama"}))


def test_chat_template() -> None:
    template = ChatTemplate(
        "{{ bos_token }}{% for m in messages %}[{{ m['role'] }}]{{ m['content'] }}{{ eos_token }}\n"
        "{% endfor %}"
        "{% if add_generation_prompt %}[assistant]{% endif %}",
        bos_token="<s>",
        eos_token="</s>",
    )
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
    assert template.render(messages) == "<s>[system]Be brief.</s>\n[user]Hi</s>\n[assistant]"
    assert template.render(messages, add_generation_prompt=False).endswith("Hi</s>\n")


def test_chat_template_is_sandboxed_and_errors_are_reported() -> None:
    with pytest.raises(InvalidArgumentError, match="no system"):
        ChatTemplate("{{ raise_exception('no system') }}").render([])
    with pytest.raises(Exception, match=r"unsafe|not safely|access"):
        ChatTemplate("{{ messages.__class__.__mro__[1].__subclasses__() }}").render([])
