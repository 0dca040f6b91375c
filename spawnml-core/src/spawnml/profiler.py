"""Session profiling as onnxruntime has it: timed events written as a Chrome trace.

A :class:`Profiler` collects complete events (``"ph": "X"``) of the Trace Event Format —
session creation, each run, each node of each run — in microseconds from its start, and
writes them as a JSON list that Perfetto and ``chrome://tracing`` open. :func:`summarize`
reads such a list back as time per operator type and per node.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

#: Event categories, onnxruntime's: the session as a whole, and its nodes.
SESSION = "Session"
NODE = "Node"
#: Names of the session's own events.
MODEL_LOADING = "model_loading"
SESSION_INITIALIZATION = "session_initialization"
MODEL_RUN = "model_run"

#: A Chrome-trace event, as written.
Event = dict[str, Any]


@dataclass
class Profiler:
    """Events of one profiling period of a session; :meth:`write` ends the period in a file."""

    prefix: str = "spawnml_profile"
    #: Wall-clock nanoseconds since the epoch when profiling started (onnxruntime's start time).
    start_time_ns: int = field(default_factory=time.time_ns)
    origin_ns: int = field(default_factory=time.perf_counter_ns)
    events: list[Event] = field(default_factory=list)

    @staticmethod
    def now() -> int:
        """A monotonic clock reading in nanoseconds, to pass back as an event's start."""
        return time.perf_counter_ns()

    def record(self, name: str, category: str, start_ns: int, end_ns: int | None = None, **args: Any) -> None:
        """One complete event from ``start_ns`` to ``end_ns`` (now if omitted), on this thread."""
        end = time.perf_counter_ns() if end_ns is None else end_ns
        # list.append is atomic: runs on several threads record into one list safely
        self.events.append(
            {
                "cat": category,
                "pid": os.getpid(),
                "tid": threading.get_native_id(),
                "ts": (start_ns - self.origin_ns) / 1000,
                "dur": (end - start_ns) / 1000,
                "ph": "X",
                "name": name,
                "args": args,
            }
        )

    def write(self) -> str:
        """Write the events to ``{prefix}_{local time}.json`` (a new name) and return its path."""
        stamp = datetime.now().strftime("%Y-%m-%d_%H-%M-%S_%f")[:-3]  # milliseconds, as onnxruntime
        path = Path(f"{self.prefix}_{stamp}.json")
        serial = 0
        while path.exists():  # two sessions ending in the same millisecond keep both files
            serial += 1
            path = Path(f"{self.prefix}_{stamp}_{serial}.json")
        with path.open("x", encoding="utf-8") as file:
            json.dump(self.events, file, separators=(",", ":"))
        return str(path)


@dataclass(frozen=True)
class OpTypeTime:
    """The time one operator type took over the profiled runs."""

    op_type: str
    total_us: float
    share: float  # of the time of all top-level nodes
    nodes: int
    calls: int


@dataclass(frozen=True)
class NodeTime:
    """One node's time, averaged over the profiled runs."""

    name: str
    op_type: str
    provider: str
    mean_us: float  # per run
    calls: int


@dataclass(frozen=True)
class Summary:
    """What a trace says: runs, their time, and the node time by operator type and by node."""

    runs: int
    run_us: list[float]
    node_us: float  # the time of all top-level nodes, over all runs
    op_types: list[OpTypeTime]
    nodes: list[NodeTime]  # slowest first


def summarize(events: Sequence[Mapping[str, Any]]) -> Summary:
    """Time by operator type and by node from trace events (a loaded trace file).

    Only top-level nodes count: a node inside a subgraph (a Loop's body) is already in the
    time of the node that runs it.
    """
    runs = [float(e["dur"]) for e in events if e.get("cat") == SESSION and e.get("name") == MODEL_RUN]
    by_node: dict[tuple[str, str, str], list[float]] = {}
    for event in events:
        args = event.get("args", {})
        if event.get("cat") != NODE or args.get("depth", 0):
            continue
        key = (str(event["name"]), str(args.get("op_name", "")), str(args.get("provider", "")))
        by_node.setdefault(key, []).append(float(event["dur"]))
    total = sum(sum(times) for times in by_node.values())
    per_type: dict[str, tuple[float, int, int]] = {}
    for (_, op_type, _), times in by_node.items():
        time_us, count, calls = per_type.get(op_type, (0.0, 0, 0))
        per_type[op_type] = (time_us + sum(times), count + 1, calls + len(times))
    op_types = [
        OpTypeTime(op_type, time_us, time_us / total if total else 0.0, count, calls)
        for op_type, (time_us, count, calls) in per_type.items()
    ]
    divisor = max(len(runs), 1)
    nodes = [
        NodeTime(name, op_type, provider, sum(times) / divisor, len(times))
        for (name, op_type, provider), times in by_node.items()
    ]
    return Summary(
        len(runs),
        runs,
        total,
        sorted(op_types, key=lambda row: -row.total_us),
        sorted(nodes, key=lambda row: -row.mean_us),
    )
