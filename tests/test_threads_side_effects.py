"""Loading the CPU plugin and running sessions change nothing process-wide: numpy's BLAS keeps the
thread count the process set (read through threadpoolctl), and every thread that existed before
(the main one and OpenBLAS's own) keeps its CPU affinity (``os.sched_getaffinity`` of each thread).
Each case runs in a fresh process; BLAS is first set to a count other than the backend's, so that a
backend that put its own there would be seen. glibc's allocator: tests/test_cpu_allocator.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

#: Prints the BLAS count and every thread's CPUs after numpy loads, after the plugin loads and after
#: sessions on one, two and the default number of threads ran products large enough for BLAS's threads.
SCRIPT = """
import json, os
import numpy as np
from threadpoolctl import threadpool_info, threadpool_limits

def state():
    blas = [entry["num_threads"] for entry in threadpool_info() if entry["user_api"] == "blas"]
    threads = {tid: sorted(os.sched_getaffinity(int(tid))) for tid in os.listdir("/proc/self/task")}
    return {"blas": blas, "threads": threads}

threadpool_limits(OUTSIDE, user_api="blas")
states = {"numpy": state()}
import spawnml
from spawnml import plugins
plugins.backends()
states["plugin"] = state()
from onnx import TensorProto, helper
graph = helper.make_graph(
    [helper.make_node("MatMul", ["a", "b"], ["c"]), helper.make_node("Tanh", ["c"], ["y"])],
    "products",
    [helper.make_tensor_value_info(n, TensorProto.FLOAT, [512, 512]) for n in "ab"],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
model = model.SerializeToString()
feeds = {n: np.ones((512, 512), np.float32) for n in "ab"}
for count in (1, 2, 0):
    options = spawnml.SessionOptions(intra_op_num_threads=count)
    spawnml.InferenceSession(model, options, providers=["cpu"]).run(None, feeds)
states["runs"] = state()
print(json.dumps(states))
"""


def states(outside: int) -> dict[str, dict]:
    env = {k: v for k, v in os.environ.items() if k != "SPAWNML_CPU_ALLOCATOR"}
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT.replace("OUTSIDE", str(outside))],
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="reads threads' CPU affinity")
@pytest.mark.parametrize("outside", [1, 3])
def test_plugin_and_runs_leave_blas_count_and_thread_affinity_as_they_were(outside: int) -> None:
    seen = states(outside)
    before = seen["numpy"]
    assert before["blas"] and set(before["blas"]) == {outside}
    for stage in ("plugin", "runs"):
        assert seen[stage]["blas"] == before["blas"], stage
        for tid, cpus in before["threads"].items():
            assert seen[stage]["threads"].get(tid) == cpus, (stage, tid)
