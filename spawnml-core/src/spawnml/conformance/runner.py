"""Running one case on one target (a SpawnML backend, or onnxruntime) and saying how it went.

A case passes when every output matches; fails with the first mismatch; is refused when
the backend declines the model at load with :class:`~spawnml.UnsupportedOperatorError`
(a refusal must name operators the case uses, or it is an error); is an error when
anything else raises; and is skipped when its model file is not on this machine, or when
the case says why it cannot be judged.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

import onnx

from ..errors import UnsupportedOperatorError
from .case import Case, MissingModelError, ModelSource, Runs, Session
from .compare import compare_runs


class Status(StrEnum):
    """How one case went on one target."""

    PASS = "pass"
    FAIL = "fail"
    REFUSED = "refused"
    ERROR = "error"
    SKIPPED = "skipped"


@dataclass(frozen=True)
class Outcome:
    """The result of one case on one target, with the operators the case uses."""

    case: str
    kind: str
    target: str
    status: Status
    message: str = ""
    operators: tuple[str, ...] = ()
    refused: tuple[str, ...] = ()  # the operators a refusal names
    seconds: float = 0.0


class Refusal(Exception):
    """A target declined a model at load; ``operators`` are the ones it names."""

    def __init__(self, message: str, operators: tuple[str, ...]) -> None:
        super().__init__(message)
        self.operators = operators


class Target(Protocol):
    """Something that opens a model as a session: a SpawnML backend, or onnxruntime."""

    name: str

    def open(self, model: ModelSource) -> Session:
        """A session on ``model``; raises :class:`Refusal` for operators it does not run."""
        ...


class SpawnMLTarget:
    """A SpawnML session on one backend, with a fallback provider for what it refuses if given."""

    def __init__(self, backend: str, fallback: str | None = None) -> None:
        self.name = backend
        self.providers = [backend] if fallback is None else [backend, fallback]

    def open(self, model: ModelSource) -> Session:
        from ..session import InferenceSession

        try:
            return InferenceSession(model, providers=self.providers)
        except UnsupportedOperatorError as error:
            named = tuple(operator_label(op.domain, op.op_type) for op in error.operators)
            raise Refusal(str(error), named) from error


class OnnxRuntimeTarget:
    """An onnxruntime session on its CPU provider, with its log kept quiet."""

    name = "onnxruntime"

    def open(self, model: ModelSource) -> Session:
        import onnxruntime

        options = onnxruntime.SessionOptions()
        options.log_severity_level = 4  # fatal only: failures are reported as outcomes
        source = model if isinstance(model, bytes) else str(model)
        return onnxruntime.InferenceSession(source, options, providers=["CPUExecutionProvider"])


def run_case(case: Case, target: Target) -> Outcome:
    """Run ``case`` on ``target`` and classify what happened."""
    start = time.perf_counter()
    operators: tuple[str, ...] = ()
    refused: tuple[str, ...]
    try:
        model = case.model()
        operators = operators_of(model)
    except MissingModelError as error:
        status, message, refused = Status.SKIPPED, str(error), ()
    except Exception as error:
        status, message, refused = Status.ERROR, f"unreadable model: {describe(error)}", ()
    else:
        attempt = (Status.SKIPPED, case.skip, ()) if case.skip else _attempt(case, model, target, operators)
        status, message, refused = attempt
    seconds = time.perf_counter() - start
    return Outcome(case.name, case.kind, target.name, status, message, operators, refused, seconds)


def _attempt(
    case: Case, model: ModelSource, target: Target, operators: tuple[str, ...]
) -> tuple[Status, str, tuple[str, ...]]:
    try:
        session = target.open(model)
    except Refusal as refusal:
        return _refused(refusal, operators)
    except Exception as error:
        return Status.ERROR, f"load failed: {describe(error)}", ()
    try:
        got = case.drive(session)
    except Exception as error:
        return Status.ERROR, f"run failed: {describe(error)}", ()
    try:
        expected = case.expected() if case.expected is not None else reference_runs(case, model)
    except Exception as error:
        return Status.ERROR, f"no reference outputs: {describe(error)}", ()
    problem = compare_runs(expected, got, case.rtol, case.atol)
    return (Status.FAIL, problem, ()) if problem else (Status.PASS, "", ())


def _refused(refusal: Refusal, operators: tuple[str, ...]) -> tuple[Status, str, tuple[str, ...]]:
    """A refusal is fine only when it names operators, all of which the case uses."""
    stray = [name for name in refusal.operators if name not in operators]
    if not refusal.operators:
        return Status.ERROR, f"refusal names no operator: {refusal}", ()
    if stray:
        return Status.ERROR, f"refusal names {stray}, which the case does not use: {refusal}", ()
    return Status.REFUSED, str(refusal), refusal.operators


def reference_runs(case: Case, model: ModelSource) -> Runs:
    """What onnxruntime gives for a case whose reference is onnxruntime."""
    return case.drive(OnnxRuntimeTarget().open(model))


def describe(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"


def operator_label(domain: str, op_type: str) -> str:
    """``Add`` for ai.onnx operators, ``domain::Op`` for the others."""
    return op_type if domain in ("", "ai.onnx") else f"{domain}::{op_type}"


def operators_of(model: ModelSource) -> tuple[str, ...]:
    """The operators a model uses, sorted: graph, subgraphs and model-local functions."""
    if isinstance(model, bytes):
        proto = onnx.load_from_string(model)
    else:
        proto = onnx.load(str(model), load_external_data=False)
    nodes = [*_nodes(proto.graph.node), *(n for f in proto.functions for n in _nodes(f.node))]
    return tuple(sorted({operator_label(node.domain, node.op_type) for node in nodes}))


def _nodes(nodes: Iterable[onnx.NodeProto]) -> Iterator[onnx.NodeProto]:
    for node in nodes:
        yield node
        for attribute in node.attribute:
            if attribute.type == onnx.AttributeProto.GRAPH:
                yield from _nodes(attribute.g.node)
            elif attribute.type == onnx.AttributeProto.GRAPHS:
                for graph in attribute.graphs:
                    yield from _nodes(graph.node)
