"""Reading request bodies: bounded in size, JSON objects only, fields checked by name."""

from __future__ import annotations

import json
from typing import Any

from starlette.requests import Request

from .errors import RequestError


async def read_body(request: Request, limit: int) -> bytes:
    """The whole body, refused with 413 as soon as it passes ``limit`` bytes."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise RequestError(413, f"the body's {declared} bytes exceed the server's limit of {limit}")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise RequestError(413, f"the body exceeds the server's limit of {limit} bytes")
    return bytes(body)


def parse_object(body: bytes) -> dict[str, Any]:
    """``body`` as a JSON object, or 400 naming what is wrong with it."""
    try:
        value = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise RequestError(400, f"the body is not valid JSON: {error}") from None
    if not isinstance(value, dict):
        raise RequestError(400, f"the body must be a JSON object, not {type(value).__name__}")
    return value


def field(body: dict[str, Any], name: str, kind: type | tuple[type, ...], default: Any = ...) -> Any:
    """``body[name]`` checked to be of ``kind`` (bool is never a number), or its default."""
    if name not in body or body[name] is None:
        if default is ...:
            raise RequestError(400, f"missing required field {name!r}", name)
        return default
    value = body[name]
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if (isinstance(value, bool) and bool not in kinds) or not isinstance(value, kinds):
        names = " or ".join(k.__name__ for k in kinds)
        raise RequestError(400, f"field {name!r} must be {names}, not {type(value).__name__}", name)
    return value
