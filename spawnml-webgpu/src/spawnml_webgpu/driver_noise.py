"""Known harmless messages that native drivers write to stderr, kept out of SpawnML's output.

Vulkan drivers write straight to file descriptor 2 from native code while wgpu enumerates
adapters, so Python cannot intercept them: :func:`filtered_stderr` points descriptor 2 at a
temporary file around the probe, then writes back every line that is not listed in
:data:`KNOWN_NOISE`, so real errors still come through (after the probe rather than during
it; this includes anything another thread writes to descriptor 2 meanwhile).
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager

#: Whole lines (without their line end) that are dropped. Each is harmless for compute.
KNOWN_NOISE = frozenset(
    {
        # Mesa's Wayland/X11 window-system code (lavapipe and the hardware drivers) looks for a
        # desktop session when the Vulkan instance starts; SpawnML presents nothing to a screen.
        "error: XDG_RUNTIME_DIR is invalid or not set in the environment.",
    }
)


@contextmanager
def filtered_stderr(noise: frozenset[str] = KNOWN_NOISE) -> Iterator[None]:
    """Run the block with descriptor 2 captured; then pass on every line that is not ``noise``."""
    _flush()
    try:
        saved = os.dup(2)
    except OSError:  # no descriptor 2: nothing to filter
        saved = None
    if saved is None:
        yield
        return
    with tempfile.TemporaryFile() as capture:
        os.dup2(capture.fileno(), 2)
        try:
            yield
        finally:
            _flush()  # Python's own writes in the block belong to the capture
            os.dup2(saved, 2)
            os.close(saved)
            capture.seek(0)
            kept = b"".join(line for line in capture if _decoded(line) not in noise)
            while kept:
                kept = kept[os.write(2, kept) :]


def _flush() -> None:
    with contextlib.suppress(AttributeError, OSError, ValueError):  # no sys.stderr, or a closed one
        sys.stderr.flush()


def _decoded(line: bytes) -> str:
    return line.rstrip(b"\r\n").decode("utf-8", "replace")
