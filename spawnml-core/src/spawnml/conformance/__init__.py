"""The conformance kit: one suite decides whether a backend is right, ours or a third party's.

Cases (:mod:`.case`) come in kinds: the ONNX backend test cases of the installed onnx
wheel (``node``, ``simple``, ``pytorch-converted``, ``pytorch-operator``, and ``real``:
onnx's light models), operator property tests against onnxruntime (``property``), and the
reference models that plugins register (``model``). :func:`run_case` runs one case on a
target (a SpawnML backend, or onnxruntime) and classifies the outcome; a backend's
expected failures (:class:`ExpectedFailures`) turn outcomes into verdicts; a
:class:`Report` counts verdicts per kind and per operator. Three ways in::

    spawnml conformance --backend cpu --compare-onnxruntime
    pytest --pyargs spawnml.conformance --backend cpu
    from spawnml.conformance import load_cases, run_case, SpawnMLTarget

Needs ``pip install 'spawnml-core[conformance]'`` (onnx, onnxruntime, pytest). Importing
this package imports neither onnx nor onnxruntime; the names below load on first use.
"""

from __future__ import annotations

import importlib
from typing import Any

from .case import KINDS, Case

#: Public name -> the module of this package that defines it.
_LAZY = {
    "ExpectedFailures": "expectations",
    "Verdict": "expectations",
    "OnnxRuntimeTarget": "runner",
    "Outcome": "runner",
    "SpawnMLTarget": "runner",
    "Status": "runner",
    "run_case": "runner",
    "Report": "report",
    "Result": "suite",
    "load_cases": "suite",
    "run_suite": "suite",
}

__all__ = ["KINDS", "Case", *_LAZY]


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
