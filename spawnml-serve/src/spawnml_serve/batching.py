"""Dynamic batching: requests that arrive within a short window run as one batch."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Hashable, Sequence
from typing import Any

from starlette.concurrency import run_in_threadpool


class Batcher:
    """Gathers items by key for up to ``window_s`` (or until they hold ``max_batch`` units), runs
    ``run(items)`` on a worker thread, and hands each caller its own result. Items of one key must
    be able to share a batch (same model, same trailing shapes); ``size`` counts an item's units."""

    def __init__(
        self,
        run: Callable[[list[Any]], Sequence[Any]],
        max_batch: int,
        window_s: float,
        size: Callable[[Any], int] = lambda item: 1,
    ) -> None:
        self._run = run
        self._max_batch = max_batch
        self._window_s = window_s
        self._size = size
        self._pending: dict[Hashable, list[tuple[Any, asyncio.Future[Any]]]] = {}
        #: Batches running now (the event loop keeps only weak references to tasks).
        self._running: set[asyncio.Task[None]] = set()

    async def submit(self, key: Hashable, item: Any) -> Any:
        """``item``'s result, computed in a batch with the others of ``key`` that arrive meanwhile."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        group = self._pending.setdefault(key, [])
        group.append((item, future))
        if len(group) == 1:
            loop.call_later(self._window_s, self._flush, key, group)
        if sum(self._size(queued) for queued, _ in group) >= self._max_batch:
            self._flush(key, group)
        return await future

    def _flush(self, key: Hashable, group: list[tuple[Any, asyncio.Future[Any]]]) -> None:
        if self._pending.get(key) is not group:  # already sent by size, or by its timer
            return
        del self._pending[key]
        task = asyncio.ensure_future(self._complete(group))
        self._running.add(task)
        task.add_done_callback(self._running.discard)

    async def _complete(self, group: list[tuple[Any, asyncio.Future[Any]]]) -> None:
        try:
            results = await run_in_threadpool(self._run, [item for item, _ in group])
        except Exception as error:
            for _, future in group:
                if not future.done():
                    future.set_exception(error)
            return
        for (_, future), result in zip(group, results, strict=True):
            if not future.done():
                future.set_result(result)
