"""The ASGI application: OpenAI's ``/v1``, KServe v2's ``/v2`` and Prometheus' ``/metrics``."""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from . import kserve_api, openai_api
from .config import ServeConfig
from .errors import RequestError, kserve_error, openai_error
from .served import ServedModel
from .state import ServerState

log = logging.getLogger(__name__)
Handler = Callable[[Request], Awaitable[Response] | Response]


def create_app(models: dict[str, ServedModel], config: ServeConfig | None = None) -> Starlette:
    """An application serving ``models`` (by name) within ``config``'s bounds."""
    state = ServerState(models, config or ServeConfig())
    state.metrics.queue_depth.set_function(lambda: state.admission.waiting)
    state.metrics.running.set_function(lambda: state.admission.running)

    def endpoint(
        name: str, handle: Handler, refuse: Callable[[RequestError], Response]
    ) -> Callable[..., Any]:
        async def answer(request: Request) -> Response:
            start = time.perf_counter()
            try:
                response = handle(request)
                if not isinstance(response, Response):
                    response = await response
            except RequestError as error:
                response = refuse(error)
            except Exception as error:  # a bug of ours: the client gets a 500 naming it, the server lives on
                log.exception("request to %s failed", request.url.path)
                response = refuse(RequestError(500, f"{type(error).__name__}: {error}"))
            state.metrics.requests.labels(name, str(response.status_code)).inc()
            state.metrics.latency.labels(name).observe(time.perf_counter() - start)
            return response

        return answer

    def v1(name: str, handle: Callable[[ServerState, Request], Any]) -> Callable[..., Any]:
        return endpoint(name, lambda request: handle(state, request), openai_error)

    def v2(name: str, handle: Callable[..., Any]) -> Callable[..., Any]:
        return endpoint(name, lambda request: handle(state, **request.path_params), kserve_error)

    routes = [
        Route("/v1/models", v1("models", lambda s, r: openai_api.list_models(s)), methods=["GET"]),
        Route("/v1/chat/completions", v1("chat", openai_api.chat_completions), methods=["POST"]),
        Route("/v1/completions", v1("completions", openai_api.completions), methods=["POST"]),
        Route("/v1/embeddings", v1("embeddings", openai_api.embeddings), methods=["POST"]),
        Route("/v2", v2("server", kserve_api.server_metadata), methods=["GET"]),
        Route("/v2/health/live", v2("live", lambda s: JSONResponse({"live": True})), methods=["GET"]),
        Route("/v2/health/ready", v2("ready", lambda s: JSONResponse({"ready": True})), methods=["GET"]),
        Route("/v2/models/{name}", v2("metadata", kserve_api.model_metadata), methods=["GET"]),
        Route("/v2/models/{name}/ready", v2("model_ready", kserve_api.model_ready), methods=["GET"]),
        Route(
            "/v2/models/{name}/infer",
            endpoint("infer", lambda r: kserve_api.infer(state, r, r.path_params["name"]), kserve_error),
            methods=["POST"],
        ),
        Route(
            "/metrics",
            lambda request: Response(state.metrics.exposition(), media_type="text/plain"),
            methods=["GET"],
        ),
    ]
    app = Starlette(routes=routes, exception_handlers={HTTPException: _http_error})
    app.state.serving = state
    return app


async def _http_error(request: Request, error: Exception) -> Response:
    """Unknown paths and methods, answered in JSON like every other refusal."""
    assert isinstance(error, HTTPException)
    return JSONResponse(
        {"error": f"{error.detail}: {request.method} {request.url.path}"}, status_code=error.status_code
    )
