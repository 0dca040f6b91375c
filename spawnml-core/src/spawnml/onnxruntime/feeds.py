"""What onnxruntime does to feeds and outputs on the host that SpawnML's core session does not:
strings of any numpy kind, and outputs that are feeds passed through."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np


def string_feed(array: np.ndarray) -> np.ndarray:
    """A ``tensor(string)`` feed of numpy text (``str_``), bytes (``bytes_``, decoded as UTF-8) or
    raw (``void``) elements, as the object array of ``str`` SpawnML runs on."""
    if array.dtype.kind == "U":
        return array.astype(object)
    flat = [bytes(item).decode("utf-8") for item in array.reshape(-1)]
    strings = np.empty(len(flat), dtype=object)
    strings[:] = flat
    return strings.reshape(array.shape)


def unaliased(outputs: list[Any], feeds: Mapping[str, Any]) -> list[Any]:
    """``outputs`` with any array that shares memory with a host feed copied: an input passed
    through to an output must not change when the caller reuses its array (onnxruntime copies it)."""
    hosts = [feed for feed in feeds.values() if isinstance(feed, np.ndarray)]
    # an output can alias a feed only through the same underlying array: one lookup per output,
    # so models with many feeds and outputs (decoders' caches) pay no pairwise comparison
    roots = {id(_root(feed)) for feed in hosts}
    return [
        output.copy()
        if isinstance(output, np.ndarray)
        and id(_root(output)) in roots
        and any(np.may_share_memory(output, feed) for feed in hosts)
        else output
        for output in outputs
    ]


def _root(array: np.ndarray) -> np.ndarray:
    """The array that owns ``array``'s memory, through any chain of views."""
    while isinstance(array.base, np.ndarray):
        array = array.base
    return array
