"""The GGUF magic, apart from the reader: recognising a file must not import the gguf package."""

from __future__ import annotations

MAGIC = b"GGUF"
