"""The benchmarks' PyTorch runner of ONNX graphs (``bench/torch_graph.py``) against onnxruntime.

``bench/cpu.py`` reports PyTorch's time on PP-OCRv4 det and rec (``bench/gpu.py`` on det) by
running their ONNX files node by node with PyTorch's operators; these tests hold that runner to
onnxruntime's outputs on the same inputs, so that the PyTorch column times the same network.
Tolerance: 1e-4 absolute on outputs in [0, 1] (float32 sums in another order; measured 3.6e-5
on det at 640x640, 5.5e-6 on rec).
Needs ``scripts/fetch-models pp-ocrv4``; skips without the files unless ``SPAWNML_REQUIRE_MODELS=1``.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnxruntime
import pytest
from spawnml_models.assets import asset_file
from spawnml_models.ocr.pipeline import ASSET, DETECTOR, RECOGNIZER

from tests.model_files import require

pytestmark = pytest.mark.real_model

TOLERANCE = 1e-4
TORCH_GRAPH = Path(__file__).resolve().parents[1] / "bench" / "torch_graph.py"


def torch_runner(path: Path) -> Callable[[dict[str, np.ndarray]], list[np.ndarray]]:
    """The runner of the ONNX file at ``path`` (the module is loaded by path: bench/ is no package)."""
    spec = importlib.util.spec_from_file_location("torch_graph", TORCH_GRAPH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.torch_runner(str(path), "cpu")


@pytest.mark.parametrize(("name", "shape"), [(DETECTOR, (1, 3, 160, 160)), (RECOGNIZER, (1, 3, 48, 320))])
def test_torch_runner_matches_onnxruntime(name: str, shape: tuple[int, ...]) -> None:
    path = require(lambda: asset_file(ASSET, name))
    image = np.random.default_rng(3).uniform(-1, 1, shape).astype(np.float32)
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    (expected,) = session.run(None, {"x": image})
    (actual,) = torch_runner(path)({"x": image})
    assert actual.shape == expected.shape
    np.testing.assert_allclose(actual, expected, rtol=0, atol=TOLERANCE)
