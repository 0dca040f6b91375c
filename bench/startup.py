"""Start-up: ``import spawnml``, then a session on a 10-node model and its first run, vs onnxruntime.

Every figure comes from a fresh process (the median of ``--runs``): the wall time of
``python -c "import <runtime>"``, and inside one process the import, the session's creation and
the first run of a 10-node float32 chain (Relu, Add, Mul, Sigmoid, Tanh, Add, Mul, Relu, Abs,
Neg over 8x64). The processes write and read ``.pyc`` files in a cache folder of their own, as
installed packages have them, even where ``PYTHONDONTWRITEBYTECODE`` is set (compiling every module
from source would add about a second to SpawnML's start and nothing to onnxruntime's); one
untimed process per runtime fills the cache first.

Usage: python bench/startup.py [--runs R]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

OPS = ("Relu", "Add", "Mul", "Sigmoid", "Tanh", "Add", "Mul", "Relu", "Abs", "Neg")

#: Run in a fresh process: prints import, session and first-run seconds.
TIMED = """
import time
start = time.perf_counter()
import numpy as np
import {module} as runtime
imported = time.perf_counter()
session = runtime.InferenceSession({path!r}, providers=["CPUExecutionProvider"])
created = time.perf_counter()
session.run(None, {{"x": np.ones((8, 64), np.float32)}})
ran = time.perf_counter()
print(imported - start, created - imported, ran - created)
"""


def write_model(path: Path) -> None:
    """The 10-node chain, its Add and Mul taking a [1, 64] initializer."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    nodes, initializers, previous = [], [], "x"
    for k, op in enumerate(OPS):
        output = "y" if k == len(OPS) - 1 else f"t{k}"
        inputs = [previous]
        if op in ("Add", "Mul"):
            initializers.append(numpy_helper.from_array(np.full((1, 64), 0.5, np.float32), f"w{k}"))
            inputs.append(f"w{k}")
        nodes.append(helper.make_node(op, inputs, [output]))
        previous = output
    graph = helper.make_graph(
        nodes,
        "startup",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [8, 64])],
        initializers,
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "chain.onnx"
        write_model(path)
        env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
        env["PYTHONPYCACHEPREFIX"] = str(Path(folder) / "pycache")
        walls: dict[str, list[float]] = {"spawnml": [], "onnxruntime": []}
        parts: dict[str, list[list[float]]] = {"spawnml": [], "onnxruntime": []}
        for module in walls:  # fills the .pyc cache
            script = TIMED.format(module=module, path=str(path))
            subprocess.run([sys.executable, "-c", script], check=True, capture_output=True, env=env)
        for _ in range(args.runs):  # the runtimes take turns, so that the host's load hits both
            for module in walls:
                start = time.perf_counter()
                subprocess.run([sys.executable, "-c", f"import {module}"], check=True, env=env)
                walls[module].append(time.perf_counter() - start)
                script = TIMED.format(module=module, path=str(path))
                command = [sys.executable, "-c", script]
                out = subprocess.run(command, check=True, capture_output=True, text=True, env=env)
                parts[module].append([float(word) for word in out.stdout.split()])
    print("runtime      python -c import   import   session   first run   import+session")
    for module in walls:
        imported, created, ran = (statistics.median(p[k] for p in parts[module]) for k in range(3))
        print(
            f"{module:12s} {statistics.median(walls[module]):14.2f} s {imported:6.2f} s {created:7.3f} s"
            f" {ran:9.3f} s {imported + created:12.2f} s"
        )


if __name__ == "__main__":
    main()
