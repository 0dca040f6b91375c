"""Request errors: a status and a message naming what is wrong, in each protocol's JSON shape."""

from __future__ import annotations

from starlette.responses import JSONResponse


class RequestError(Exception):
    """A request the server refuses: ``status`` (4xx, or 503/504) and why."""

    def __init__(self, status: int, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param


#: OpenAI's error types by status.
_OPENAI_TYPES = {
    404: "not_found_error",
    413: "invalid_request_error",
    503: "server_overloaded",
    504: "timeout",
}


def openai_error(error: RequestError) -> JSONResponse:
    """OpenAI's error body: ``{"error": {"message", "type", "param", "code"}}``."""
    kind = _OPENAI_TYPES.get(error.status, "invalid_request_error" if error.status < 500 else "server_error")
    body = {"error": {"message": error.message, "type": kind, "param": error.param, "code": None}}
    return JSONResponse(body, status_code=error.status, headers=_retry_after(error))


def kserve_error(error: RequestError) -> JSONResponse:
    """The KServe v2 protocol's error body: ``{"error": message}``."""
    return JSONResponse({"error": error.message}, status_code=error.status, headers=_retry_after(error))


def _retry_after(error: RequestError) -> dict[str, str]:
    return {"Retry-After": "1"} if error.status == 503 else {}
