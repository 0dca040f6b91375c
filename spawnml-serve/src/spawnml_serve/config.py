"""How a server admits, batches and times requests."""

from __future__ import annotations

from dataclasses import dataclass

MIB = 1 << 20


@dataclass(frozen=True)
class ServeConfig:
    """Bounds and budgets of one server. The defaults suit a small machine serving a few clients."""

    #: Requests that run at once; more wait in the queue.
    max_concurrency: int = 4
    #: Requests that may wait for a slot; beyond it the server answers 503 with ``Retry-After``.
    max_queue: int = 64
    #: Seconds a request may take from admission to its last byte; then 504 (or the stream ends).
    request_timeout_s: float = 120.0
    #: Largest request body, in bytes (413 beyond it).
    max_body_bytes: int = 64 * MIB
    #: How long a batchable request waits for others to join its batch, in seconds.
    batch_window_s: float = 0.005
    #: Most items in one batch (sentences of embedding requests, rows of graph-model requests).
    max_batch: int = 32
    #: Largest ``max_tokens`` a completion may ask for.
    max_new_tokens: int = 2048
