"""Host overhead per node: a chain of small Add and Relu nodes on tiny tensors, SpawnML CPU vs
onnxruntime CPU, in microseconds per node (run time divided by the node count): the median run,
and the fastest one, which is what the overhead is where other processes share the cores.

Usage: python bench/overhead.py [--nodes N] [--runs R] [--size S]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np


def chain_model(nodes: int, size: int) -> bytes:
    """An ONNX model of ``nodes`` nodes alternating ``Add(x, bias)`` and ``Relu`` on ``(1, size)``."""
    from onnx import TensorProto, helper, numpy_helper

    bias = numpy_helper.from_array(np.full((1, size), 0.5, dtype=np.float32), "bias")
    chain = []
    for index in range(nodes):
        source, target = f"t{index}", f"t{index + 1}"
        if index % 2:
            chain.append(helper.make_node("Relu", [source], [target]))
        else:
            chain.append(helper.make_node("Add", [source, "bias"], [target]))
    graph = helper.make_graph(
        chain,
        "chain",
        [helper.make_tensor_value_info("t0", TensorProto.FLOAT, [1, size])],
        [helper.make_tensor_value_info(f"t{nodes}", TensorProto.FLOAT, [1, size])],
        [bias],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    return model.SerializeToString()


def sessions(model: bytes) -> dict:
    """Unoptimized single-threaded sessions of both runtimes, so that every node runs."""
    import onnxruntime as ort
    import spawnml

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    return {
        "spawnml": spawnml.InferenceSession(
            model, spawnml.SessionOptions(graph_optimization_level="disable"), providers=["cpu"]
        ),
        "onnxruntime": ort.InferenceSession(model, options, providers=["CPUExecutionProvider"]),
    }


def run_times(session, feeds: dict, runs: int) -> list[float]:
    """Seconds of each of ``runs`` runs after two warm-ups (SpawnML compiles a plan at its second run)."""
    for _ in range(2):
        session.run(None, feeds)
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        session.run(None, feeds)
        times.append(time.perf_counter() - start)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--size", type=int, default=16, help="elements per tensor")
    args = parser.parse_args()
    feeds = {"t0": np.ones((1, args.size), dtype=np.float32)}
    print(f"chain of {args.nodes} Add/Relu nodes on (1, {args.size}) float32, {args.runs} runs, one thread")
    print("| runtime | median ms | median us/node | fastest us/node |")
    print("|---|---:|---:|---:|")
    for name, session in sessions(chain_model(args.nodes, args.size)).items():
        times = run_times(session, feeds, args.runs)
        median, fastest = statistics.median(times), min(times)
        per_node = [seconds / args.nodes * 1e6 for seconds in (median, fastest)]
        print(f"| {name} | {median * 1e3:.2f} | {per_node[0]:.2f} | {per_node[1]:.2f} |")


if __name__ == "__main__":
    main()
