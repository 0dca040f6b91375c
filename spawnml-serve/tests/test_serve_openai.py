"""OpenAI's own client against ``spawnml serve``'s ``/v1``: streamed and whole completions equal
``spawnml generate``'s text (greedy), embeddings equal the pipeline's (float32, exactly)."""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

import httpx
import numpy as np
import openai
import pytest
from spawnml.cli import main
from spawnml_serve.served import load_served_model

from tests.model_files import require

pytestmark = pytest.mark.real_model
CHAT, EMBED = "smollm2-135m-instruct", "all-minilm-l6-v2"
PROMPT = "Name three primary colors."


@pytest.fixture(scope="module")
def server(serve_module: Callable[..., Any]) -> Any:
    chat = require(lambda: load_served_model(CHAT))
    return serve_module({CHAT: chat, EMBED: load_served_model(EMBED)})


@pytest.fixture(scope="module")
def client(server: Any) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0)


def spawnml_generate(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    assert main(["generate", CHAT, *args]) == 0
    return capsys.readouterr().out.removesuffix("\n")


def test_streamed_chat_equals_spawnml_generate(client, capsys):
    expected = spawnml_generate(capsys, PROMPT, "--max-tokens", "24")
    stream = client.chat.completions.create(
        model=CHAT, messages=[{"role": "user", "content": PROMPT}], max_tokens=24, temperature=0, stream=True
    )
    chunks = list(stream)
    text = "".join(chunk.choices[0].delta.content or "" for chunk in chunks if chunk.choices)
    assert text == expected
    assert chunks[0].choices[0].delta.role == "assistant"
    assert chunks[-1].choices[0].finish_reason in ("length", "stop")


def test_whole_chat_and_completion_equal_spawnml_generate(client, capsys):
    expected = spawnml_generate(capsys, PROMPT, "--max-tokens", "12")
    answer = client.chat.completions.create(
        model=CHAT, messages=[{"role": "user", "content": PROMPT}], max_tokens=12, temperature=0
    )
    assert answer.choices[0].message.content == expected
    assert answer.usage.completion_tokens <= 12 and answer.usage.prompt_tokens > 0
    raw = "def fibonacci(n):"
    expected = spawnml_generate(capsys, raw, "--raw", "--max-tokens", "12")
    completion = client.completions.create(model=CHAT, prompt=raw, max_tokens=12, temperature=0)
    assert completion.choices[0].text == expected
    assert completion.choices[0].finish_reason == (
        "length" if completion.usage.completion_tokens == 12 else "stop"
    )


def test_streamed_completion_with_usage(client, capsys):
    raw = "The capital of France is"
    expected = spawnml_generate(capsys, raw, "--raw", "--max-tokens", "8")
    stream = client.completions.create(
        model=CHAT,
        prompt=raw,
        max_tokens=8,
        temperature=0,
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    assert "".join(chunk.choices[0].text for chunk in chunks if chunk.choices) == expected
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens <= 8


def test_embeddings_equal_the_pipelines(client, server):
    sentences = ["A man is playing a guitar.", "Someone strums a guitar.", "The stock market fell."]
    pipeline = server.models[EMBED].pipeline
    expected = pipeline(sentences)
    answer = client.embeddings.create(model=EMBED, input=sentences)  # base64 on the wire, as the client asks
    vectors = np.array([item.embedding for item in answer.data], dtype=np.float32)
    np.testing.assert_array_equal(vectors, expected)
    answer = client.embeddings.create(model=EMBED, input=sentences[0], encoding_format="float")
    alone = pipeline(sentences[:1])[0]  # a batch pads to its longest sentence: compare like with like
    np.testing.assert_array_equal(np.array(answer.data[0].embedding, np.float32), alone)
    assert answer.usage.prompt_tokens > 0


def test_concurrent_embedding_requests_are_batched_and_each_gets_its_own(server):
    import concurrent.futures

    sentences = [f"sentence number {i} about topic {i % 3}" for i in range(24)]
    pipeline = server.models[EMBED].pipeline
    calls: list[int] = []
    original = pipeline.__class__.__call__

    def counted(self, texts, *args, **kwargs):
        calls.append(len(texts))
        return original(self, texts, *args, **kwargs)

    pipeline.__class__.__call__ = counted
    try:
        with (
            httpx.Client(base_url=server.url, timeout=60) as http,
            concurrent.futures.ThreadPoolExecutor(12) as pool,
        ):
            answers = list(
                pool.map(
                    lambda text: http.post(
                        "/v1/embeddings", json={"model": EMBED, "input": text, "encoding_format": "base64"}
                    ),
                    sentences,
                )
            )
    finally:
        pipeline.__class__.__call__ = original
    expected = pipeline(sentences)
    for text_index, answer in enumerate(answers):
        assert answer.status_code == 200
        vector = np.frombuffer(base64.b64decode(answer.json()["data"][0]["embedding"]), "<f4")
        np.testing.assert_allclose(vector, expected[text_index], rtol=0, atol=2e-6)
    assert len(calls) < len(sentences)  # some requests shared a pipeline call


def test_models_are_listed(client):
    assert sorted(model.id for model in client.models.list()) == sorted([CHAT, EMBED])


def test_openai_errors_name_the_problem(client):
    with pytest.raises(openai.NotFoundError, match="no model 'absent'"):
        client.embeddings.create(model="absent", input="x")
    with pytest.raises(openai.BadRequestError, match="not one this endpoint serves"):
        client.embeddings.create(model=CHAT, input="x")
    with pytest.raises(openai.BadRequestError, match="max_tokens"):
        client.completions.create(model=CHAT, prompt="x", max_tokens=0)
