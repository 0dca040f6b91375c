"""onnxruntime's process-wide logger settings.

SpawnML logs through Python's ``logging`` (the ``spawnml`` logger). The default severity and
verbosity are stored and read back only; a callback set with :func:`set_default_logger_callback`
receives SpawnML's log records from that severity on, in onnxruntime's form.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from ..errors import InvalidArgumentError
from .exceptions import error

_settings = {"severity": 2, "verbosity": 0}

#: onnxruntime's severities (0 verbose .. 4 fatal) as Python's logging levels.
_LEVELS = (logging.DEBUG, logging.INFO, logging.WARNING, logging.ERROR, logging.CRITICAL)


def set_default_logger_severity(severity: int) -> None:
    """Store the default log severity (0 verbose .. 4 fatal); SpawnML's logging is unchanged."""
    _settings["severity"] = int(severity)


def set_default_logger_verbosity(verbosity: int) -> None:
    _settings["verbosity"] = int(verbosity)


def default_logger_severity() -> int:
    return _settings["severity"]


class _Callback(logging.Handler):
    """Hands each record to ``callback(severity, category, logid, code_location, message)``."""

    def __init__(self, callback: Callable[[int, str, str, str, str], Any], severity: int) -> None:
        super().__init__(_LEVELS[severity])
        self._callback = callback

    def emit(self, record: logging.LogRecord) -> None:
        severity = next(
            index for index, level in reversed(list(enumerate(_LEVELS))) if record.levelno >= level
        )
        try:
            self._callback(
                severity, "SpawnML", record.name, f"{record.pathname}:{record.lineno}", record.getMessage()
            )
        except Exception:  # a callback that raises must not break the run that logged
            self.handleError(record)


_installed: list[_Callback] = []


def set_default_logger_callback(
    callback: Callable[[int, str, str, str, str], Any] | None, severity: int = 2
) -> None:
    """Send SpawnML's log records from ``severity`` on to ``callback``; None stops it."""
    if callback is not None and not callable(callback):
        raise error(
            InvalidArgumentError, RuntimeError, f"the logger callback must be callable, not {callback!r}"
        )
    if not 0 <= int(severity) <= 4:
        raise error(
            InvalidArgumentError, RuntimeError, f"severity must be 0 (verbose) to 4 (fatal), not {severity}"
        )
    logger = logging.getLogger("spawnml")
    while _installed:
        logger.removeHandler(_installed.pop())
    if callback is not None:
        handler = _Callback(callback, int(severity))
        logger.addHandler(handler)
        _installed.append(handler)
