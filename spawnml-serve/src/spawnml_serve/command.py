"""``spawnml serve MODEL [MODEL ...]``: serve models over HTTP with uvicorn."""

from __future__ import annotations

import argparse
import sys

from spawnml.cli import Command
from spawnml.errors import InvalidArgumentError

from .config import ServeConfig


def configure_serve(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``spawnml serve``."""
    defaults = ServeConfig()
    parser.add_argument(
        "models",
        nargs="+",
        metavar="MODEL",
        help="[NAME=]SOURCE: a registered text-generation or sentence-embedding model, a GGUF file, "
        "or any model file (served through the KServe v2 protocol)",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    parser.add_argument(
        "--providers",
        type=lambda text: [name.strip() for name in text.split(",") if name.strip()],
        help="comma-separated providers in order of preference, e.g. webgpu,cpu",
    )
    parser.add_argument("--max-concurrency", type=int, default=defaults.max_concurrency)
    parser.add_argument("--max-queue", type=int, default=defaults.max_queue)
    parser.add_argument(
        "--timeout", type=float, default=defaults.request_timeout_s, help="seconds per request"
    )
    parser.add_argument("--max-batch", type=int, default=defaults.max_batch)
    parser.add_argument(
        "--batch-window-ms",
        type=float,
        default=defaults.batch_window_s * 1000,
        help="dynamic batching window",
    )


def run_serve(args: argparse.Namespace) -> int:
    """Load every model, then serve until interrupted."""
    import uvicorn

    from .app import create_app
    from .served import load_served_model

    served = {}
    for spec in args.models:
        model = load_served_model(spec, args.providers)
        if model.name in served:
            raise InvalidArgumentError(f"two models are named {model.name!r}; name them with NAME=SOURCE")
        served[model.name] = model
        print(f"loaded {model.name} ({model.kind})", file=sys.stderr)
    config = ServeConfig(
        max_concurrency=args.max_concurrency,
        max_queue=args.max_queue,
        request_timeout_s=args.timeout,
        max_batch=args.max_batch,
        batch_window_s=args.batch_window_ms / 1000,
    )
    uvicorn.run(create_app(served, config), host=args.host, port=args.port, log_level="info")
    return 0


SERVE = Command(
    name="serve",
    help="serve models over HTTP: OpenAI-compatible /v1 and KServe v2 /v2 endpoints",
    configure=configure_serve,
    run=run_serve,
)
