"""Prometheus metrics of one server, in a registry of its own (``/metrics``)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from .served import Generation


class Metrics:
    """Requests, latency, queue depth, running requests and generated tokens."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "spawnml_requests", "Requests answered", ["endpoint", "status"], registry=self.registry
        )
        self.latency = Histogram(
            "spawnml_request_seconds",
            "Time from a request's arrival to its answer (a stream's first byte)",
            ["endpoint"],
            registry=self.registry,
        )
        self.queue_depth = Gauge("spawnml_queue_depth", "Requests waiting for a slot", registry=self.registry)
        self.running = Gauge("spawnml_requests_running", "Requests holding a slot", registry=self.registry)
        self.tokens = Counter(
            "spawnml_generated_tokens", "Tokens generated", ["model"], registry=self.registry
        )
        self.tokens_per_second = Gauge(
            "spawnml_decode_tokens_per_second",
            "Decode speed of the model's last generation",
            ["model"],
            registry=self.registry,
        )

    def generated(self, model: str, generation: Generation) -> None:
        self.tokens.labels(model).inc(generation.completion_tokens)
        self.tokens_per_second.labels(model).set(generation.tokens_per_second)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)
