"""One-output models run on SpawnML's CPU backend and on onnxruntime's CPU provider, each with its
graph optimizations off unless asked, so that a kernel is compared with a kernel."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import spawnml


def run_spawnml(
    model: bytes, feeds: dict[str, np.ndarray], level: str = "disable", threads: int = 0
) -> np.ndarray:
    """The output on ``threads`` threads (0: the backend's default)."""
    options = spawnml.SessionOptions(graph_optimization_level=level, intra_op_num_threads=threads)
    (output,) = spawnml.InferenceSession(model, options, providers=["cpu"]).run(None, feeds)
    return output


def run_onnxruntime(model: bytes, feeds: dict[str, np.ndarray]) -> np.ndarray:
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
    return session.run(None, feeds)[0]
