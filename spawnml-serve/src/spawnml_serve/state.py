"""What every endpoint shares: the models, the bounds, the batchers and the metrics."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable
from contextlib import asynccontextmanager
from typing import Any, TypeVar

from spawnml.errors import InvalidArgumentError, InvalidFeedError, SpawnMLError
from starlette.requests import Request

from .admission import Admission
from .batching import Batcher
from .config import ServeConfig
from .errors import RequestError
from .metrics import Metrics
from .requests import parse_object, read_body
from .served import ServedModel

T = TypeVar("T")
M = TypeVar("M")


class ServerState:
    """One server's models and machinery; endpoints take it as their first argument."""

    def __init__(self, models: dict[str, ServedModel], config: ServeConfig) -> None:
        from .kserve_api import run_graph_batch
        from .openai_api import run_embedding_batch

        self.models = models
        self.config = config
        self.admission = Admission(config.max_concurrency, config.max_queue)
        self.metrics = Metrics()
        self.started = int(time.time())
        self.embedding_batcher = Batcher(
            run_embedding_batch, config.max_batch, config.batch_window_s, size=lambda item: len(item[1])
        )
        self.graph_batcher = Batcher(
            run_graph_batch, config.max_batch, config.batch_window_s, size=lambda item: item.rows
        )

    async def json(self, request: Request) -> dict[str, Any]:
        return parse_object(await read_body(request, self.config.max_body_bytes))

    def model(self, name: str, kind: type[M]) -> M:
        """The served model ``name``, which must be of ``kind`` (404 otherwise)."""
        model = self.models.get(name)
        if model is None:
            raise RequestError(404, f"no model {name!r}; this server has {sorted(self.models)}", "model")
        if not isinstance(model, kind):
            raise RequestError(
                400, f"model {name!r} is a {model.kind} model, not one this endpoint serves", "model"
            )
        return model

    @asynccontextmanager
    async def admitted(self) -> AsyncIterator[None]:
        async with self.admission.slot():
            yield

    async def timed(self, work: Awaitable[T]) -> T:
        """``work``'s result within the request time (504 past it); SpawnML's errors as 4xx/5xx."""
        try:
            return await asyncio.wait_for(work, self.config.request_timeout_s)
        except TimeoutError:
            raise RequestError(
                504, f"the request took longer than {self.config.request_timeout_s} s"
            ) from None
        except SpawnMLError as error:
            raise self.refusal(error) from None

    @staticmethod
    def refusal(error: BaseException) -> RequestError:
        """A failure of the work as the answer to give: the caller's mistake (400) or ours (500)."""
        if isinstance(error, RequestError):
            return error
        if isinstance(error, InvalidFeedError | InvalidArgumentError):
            return RequestError(400, str(error))
        return RequestError(500, f"{type(error).__name__}: {error}")
