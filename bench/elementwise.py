"""Elementwise passes on the CPU: SpawnML vs onnxruntime on one and two threads.

Graphs: SiLU (``x * sigmoid(x)``, fused into one chain) over 1x64x160x160, GELU over 8x128x1536
as one Gelu node (opset 20) and as its erf decomposition (Div, Erf, Add, Mul, Mul: one fused
chain), and Tanh, Exp and Sigmoid nodes alone over 1x64x160x160. Each run is timed after one
warm-up; the median of ``--runs`` runs in milliseconds is printed.

Usage: python bench/elementwise.py [--runs R] [--threads 1 2] [--cases silu gelu ...]
"""

from __future__ import annotations

import argparse
import math
import statistics
import time

import numpy as np

SMALL, LARGE = (1, 64, 160, 160), (8, 128, 1536)


def _model(nodes: list, shape: tuple[int, ...], opset: int = 17) -> bytes:
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        nodes,
        "elementwise",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(shape))],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=9)
    return model.SerializeToString()


def cases() -> dict[str, tuple[bytes, tuple[int, ...]]]:
    """Each benchmarked graph and its input shape, by name."""
    from onnx import helper

    node = helper.make_node
    erf_chain = [
        node("Div", ["x", "root"], ["a"]),
        node("Erf", ["a"], ["b"]),
        node("Add", ["b", "one"], ["c"]),
        node("Mul", ["x", "c"], ["d"]),
        node("Mul", ["d", "half"], ["y"]),
    ]
    constants = [
        node("Constant", [], [name], value_float=value)
        for name, value in (("root", math.sqrt(2)), ("one", 1.0), ("half", 0.5))
    ]
    return {
        "silu": (_model([node("Sigmoid", ["x"], ["s"]), node("Mul", ["x", "s"], ["y"])], SMALL), SMALL),
        "gelu": (_model([node("Gelu", ["x"], ["y"])], LARGE, opset=20), LARGE),
        "gelu-erf-chain": (_model(constants + erf_chain, LARGE), LARGE),
        "tanh": (_model([node("Tanh", ["x"], ["y"])], SMALL), SMALL),
        "exp": (_model([node("Exp", ["x"], ["y"])], SMALL), SMALL),
        "sigmoid": (_model([node("Sigmoid", ["x"], ["y"])], SMALL), SMALL),
    }


def median_ms(session, feeds: dict, runs: int) -> float:
    """The median of ``runs`` timed runs of ``session`` after one warm-up, in milliseconds."""
    session.run(None, feeds)
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        session.run(None, feeds)
        times.append(time.perf_counter() - start)
    return 1e3 * statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--cases", nargs="+", default=None)
    args = parser.parse_args()

    import onnxruntime as ort
    import spawnml

    table = cases()
    rng = np.random.default_rng(0)
    print("| case | threads | SpawnML ms | onnxruntime ms |")
    print("|---|---:|---:|---:|")
    for name in args.cases or table:
        data, shape = table[name]
        feeds = {"x": (rng.standard_normal(shape) * 3).astype(np.float32)}
        for threads in args.threads:
            ours = spawnml.InferenceSession(
                data, spawnml.SessionOptions(intra_op_num_threads=threads), providers=["cpu"]
            )
            options = ort.SessionOptions()
            options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
            theirs = ort.InferenceSession(data, options, providers=["CPUExecutionProvider"])
            mine = median_ms(ours, feeds, args.runs)
            reference = median_ms(theirs, feeds, args.runs)
            print(f"| {name} {'x'.join(map(str, shape))} | {threads} | {mine:.2f} | {reference:.2f} |")


if __name__ == "__main__":
    main()
