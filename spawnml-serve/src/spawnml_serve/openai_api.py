"""OpenAI's ``/v1`` endpoints: chat and text completions (streamed as server-sent events) and
embeddings, answered in the shapes OpenAI's own client parses."""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from typing import Any

import numpy as np
from spawnml_models.llm.sampling import Sampler
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from .errors import RequestError
from .requests import field
from .served import ChatModel, EmbeddingModel, Generation
from .state import ServerState


async def chat_completions(state: ServerState, request: Request) -> Response:
    body = await state.json(request)
    model = state.model(field(body, "model", str), ChatModel)
    messages = _messages(field(body, "messages", list))
    return await _complete(state, model, body, messages, raw=False, chat=True)


async def completions(state: ServerState, request: Request) -> Response:
    body = await state.json(request)
    model = state.model(field(body, "model", str), ChatModel)
    prompt = field(body, "prompt", (str, list))
    if isinstance(prompt, list):
        if len(prompt) != 1 or not isinstance(prompt[0], str):
            raise RequestError(400, "field 'prompt' must be a string or a list of one string", "prompt")
        prompt = prompt[0]
    if field(body, "echo", bool, False):
        raise RequestError(400, "'echo' is not supported", "echo")
    return await _complete(state, model, body, prompt, raw=True, chat=False)


async def embeddings(state: ServerState, request: Request) -> Response:
    body = await state.json(request)
    model = state.model(field(body, "model", str), EmbeddingModel)
    sentences = field(body, "input", (str, list))
    sentences = [sentences] if isinstance(sentences, str) else sentences
    if not sentences or not all(isinstance(text, str) for text in sentences):
        raise RequestError(400, "field 'input' must be a string or a non-empty list of strings", "input")
    encoding = field(body, "encoding_format", str, "float")
    if encoding not in ("float", "base64"):
        raise RequestError(
            400, f"encoding_format must be 'float' or 'base64', not {encoding!r}", "encoding_format"
        )
    async with state.admitted():
        vectors = await state.timed(state.embedding_batcher.submit(model.name, (model, sentences)))
    dimensions = field(body, "dimensions", int, vectors.shape[1])
    if dimensions != vectors.shape[1]:
        raise RequestError(400, f"the model's embeddings have {vectors.shape[1]} dimensions", "dimensions")
    tokens = model.token_count(sentences)
    data = [
        {"object": "embedding", "index": i, "embedding": _encoded(vector, encoding)}
        for i, vector in enumerate(vectors)
    ]
    usage = {"prompt_tokens": tokens, "total_tokens": tokens}
    return JSONResponse({"object": "list", "data": data, "model": model.name, "usage": usage})


def run_embedding_batch(items: list[tuple[EmbeddingModel, list[str]]]) -> list[np.ndarray]:
    """One pipeline call for the sentences of every request of a batch, split back per request."""
    model = items[0][0]
    vectors = model.embed([text for _, sentences in items for text in sentences])
    bounds = np.cumsum([0, *(len(sentences) for _, sentences in items)])
    return [vectors[start:stop] for start, stop in itertools.pairwise(bounds)]


def list_models(state: ServerState) -> JSONResponse:
    data = [
        {"id": name, "object": "model", "created": state.started, "owned_by": "spawnml"}
        for name in state.models
    ]
    return JSONResponse({"object": "list", "data": data})


# -- completions ------------------------------------------------------------------------------------
async def _complete(
    state: ServerState, model: ChatModel, body: dict[str, Any], prompt: Any, raw: bool, chat: bool
) -> Response:
    if field(body, "n", int, 1) != 1:
        raise RequestError(400, "only n=1 is supported", "n")
    limit = state.config.max_new_tokens
    max_tokens = field(
        body, "max_completion_tokens", int, field(body, "max_tokens", int, 16 if not chat else limit)
    )
    if not 1 <= max_tokens <= limit:
        raise RequestError(400, f"max_tokens must be between 1 and {limit}, not {max_tokens}", "max_tokens")
    stop = field(body, "stop", (str, list), [])
    stop = [stop] if isinstance(stop, str) else stop
    if not all(isinstance(text, str) for text in stop):
        raise RequestError(400, "field 'stop' must be a string or a list of strings", "stop")
    sampler = _sampler(body)
    stream = field(body, "stream", bool, False)
    options = field(body, "stream_options", dict, {})
    reply = _Reply(model.name, chat, include_usage=bool(options.get("include_usage")))
    await state.admission.enter()
    generation = Generation()
    pieces = _generate(
        state, lambda cancelled: model.generate(prompt, max_tokens, sampler, stop, raw, cancelled, generation)
    )
    if stream:
        return StreamingResponse(
            _events(state, reply, pieces, generation),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache"},
        )
    try:
        text = "".join([piece async for piece in pieces])
    finally:
        state.admission.leave()
    state.metrics.generated(model.name, generation)
    return JSONResponse(reply.whole(text, generation))


def _sampler(body: dict[str, Any]) -> Sampler:
    temperature = float(field(body, "temperature", (int, float), 1.0))
    top_p = float(field(body, "top_p", (int, float), 1.0))
    if not 0 <= temperature <= 2:
        raise RequestError(400, f"temperature must be between 0 and 2, not {temperature}", "temperature")
    if not 0 < top_p <= 1:
        raise RequestError(400, f"top_p must be in (0, 1], not {top_p}", "top_p")
    return Sampler(temperature, 0, top_p, field(body, "seed", int, None))


async def _generate(
    state: ServerState, generate: Callable[[threading.Event], Iterator[str]]
) -> AsyncIterator[str]:
    """The pieces of a generation that runs on a worker thread, within the request's time."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
    cancelled = threading.Event()

    def produce() -> None:
        try:
            for piece in generate(cancelled):
                loop.call_soon_threadsafe(queue.put_nowait, ("piece", piece))
        except Exception as error:
            loop.call_soon_threadsafe(queue.put_nowait, ("error", error))
        finally:
            loop.call_soon_threadsafe(queue.put_nowait, ("end", None))

    deadline = loop.time() + state.config.request_timeout_s
    worker = loop.run_in_executor(None, produce)
    try:
        while True:
            try:
                kind, value = await asyncio.wait_for(queue.get(), max(0.0, deadline - loop.time()))
            except TimeoutError:
                raise RequestError(
                    504, f"the request took longer than {state.config.request_timeout_s} s"
                ) from None
            if kind == "end":
                break
            if kind == "error":
                raise state.refusal(value)
            yield value
    finally:
        cancelled.set()
        del worker  # the thread ends at its next piece, seeing ``cancelled``


async def _events(
    state: ServerState, reply: _Reply, pieces: AsyncIterator[str], generation: Generation
) -> AsyncIterator[str]:
    """Server-sent events as OpenAI streams them, ending with ``data: [DONE]``."""
    try:
        yield _event(reply.chunk({"role": "assistant", "content": ""} if reply.chat else "", None))
        async for piece in pieces:
            yield _event(reply.chunk({"content": piece} if reply.chat else piece, None))
        yield _event(reply.chunk({} if reply.chat else "", generation.finish_reason))
        if reply.include_usage:
            yield _event(reply.usage_chunk(generation))
        state.metrics.generated(reply.model, generation)
    except RequestError as error:
        yield _event({"error": {"message": error.message, "type": "server_error", "code": error.status}})
    finally:
        state.admission.leave()
    yield "data: [DONE]\n\n"


def _event(payload: dict[str, Any]) -> str:
    return f"data: {json.dumps(payload, separators=(',', ':'))}\n\n"


class _Reply:
    """The envelope of one completion's answer: whole, or chunk by chunk."""

    def __init__(self, model: str, chat: bool, include_usage: bool) -> None:
        self.model = model
        self.chat = chat
        self.include_usage = include_usage
        self.id = f"{'chatcmpl' if chat else 'cmpl'}-{uuid.uuid4().hex}"
        self.created = int(time.time())

    def _envelope(self, kind: str, choices: list[dict[str, Any]]) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": kind,
            "created": self.created,
            "model": self.model,
            "choices": choices,
        }

    def whole(self, text: str, generation: Generation) -> dict[str, Any]:
        content = (
            {"message": {"role": "assistant", "content": text}}
            if self.chat
            else {"text": text, "logprobs": None}
        )
        kind = "chat.completion" if self.chat else "text_completion"
        answer = self._envelope(kind, [{"index": 0, **content, "finish_reason": generation.finish_reason}])
        return {**answer, "usage": _usage(generation)}

    def chunk(self, delta: dict[str, str] | str, finish_reason: str | None) -> dict[str, Any]:
        content = {"delta": delta} if self.chat else {"text": delta, "logprobs": None}
        kind = "chat.completion.chunk" if self.chat else "text_completion"
        return self._envelope(kind, [{"index": 0, **content, "finish_reason": finish_reason}])

    def usage_chunk(self, generation: Generation) -> dict[str, Any]:
        kind = "chat.completion.chunk" if self.chat else "text_completion"
        return {**self._envelope(kind, []), "usage": _usage(generation)}


def _usage(generation: Generation) -> dict[str, int]:
    total = generation.prompt_tokens + generation.completion_tokens
    return {
        "prompt_tokens": generation.prompt_tokens,
        "completion_tokens": generation.completion_tokens,
        "total_tokens": total,
    }


def _messages(messages: list[Any]) -> list[dict[str, str]]:
    """Chat messages with text content (a string, or a list of text parts)."""
    if not messages:
        raise RequestError(400, "field 'messages' must not be empty", "messages")
    checked = []
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise RequestError(400, f"messages[{i}] must be an object with a 'role'", "messages")
        checked.append({"role": message["role"], "content": _text(message.get("content"), i)})
    return checked


def _text(content: Any, index: int) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(isinstance(p, dict) and p.get("type") == "text" for p in content):
        return "".join(str(part.get("text", "")) for part in content)
    raise RequestError(400, f"messages[{index}].content must be text (a string or text parts)", "messages")


def _encoded(vector: np.ndarray, encoding: str) -> list[float] | str:
    if encoding == "base64":
        return base64.b64encode(vector.astype("<f4").tobytes()).decode("ascii")
    return [float(x) for x in vector]


__all__: Sequence[str] = [
    "chat_completions",
    "completions",
    "embeddings",
    "list_models",
    "run_embedding_batch",
]
