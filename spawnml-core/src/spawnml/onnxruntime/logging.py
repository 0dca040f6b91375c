"""onnxruntime's process-wide logger settings, kept so code that sets them runs.

SpawnML logs through Python's ``logging``; these values are stored and read back only.
"""

from __future__ import annotations

_settings = {"severity": 2, "verbosity": 0}


def set_default_logger_severity(severity: int) -> None:
    """Store the default log severity (0 verbose .. 4 fatal); SpawnML's logging is unchanged."""
    _settings["severity"] = int(severity)


def set_default_logger_verbosity(verbosity: int) -> None:
    _settings["verbosity"] = int(verbosity)


def default_logger_severity() -> int:
    return _settings["severity"]
