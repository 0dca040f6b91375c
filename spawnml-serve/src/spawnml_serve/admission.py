"""Bounded concurrency with a bounded queue: a full queue refuses at once rather than piling up."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from .errors import RequestError


class Admission:
    """At most ``concurrency`` requests run; at most ``queue`` more wait; the rest get 503."""

    def __init__(self, concurrency: int, queue: int) -> None:
        self._slots = asyncio.Semaphore(concurrency)
        self._queue = queue
        self.waiting = 0
        self.running = 0

    async def enter(self) -> None:
        """Wait for a slot, or refuse at once with 503 when the queue is full."""
        if self._slots.locked() and self.waiting >= self._queue:
            raise RequestError(
                503, f"the server is busy: {self.waiting} requests already wait; retry shortly"
            )
        self.waiting += 1
        try:
            await self._slots.acquire()
        finally:
            self.waiting -= 1
        self.running += 1

    def leave(self) -> None:
        """Give the slot back (a stream does when its last byte is sent)."""
        self.running -= 1
        self._slots.release()

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        """Hold a slot for the request's work."""
        await self.enter()
        try:
            yield
        finally:
            self.leave()
