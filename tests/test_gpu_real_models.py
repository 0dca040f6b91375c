"""PP-OCRv4 run whole on each GPU backend (no node on the CPU) against onnxruntime.

Inputs are small synthetic text pages and lines, so that CI on lavapipe and PoCL (both run on
the CPU) stays quick. Tolerances are absolute, on outputs in [0, 1]: the detector's text
probability after a sigmoid, the recogniser's per-step softmax. They cover float32 sums in
another order through some sixty convolutions and the GPU's few-ulp exp, division and
square root; the largest differences measured on lavapipe and PoCL are 2.5e-5 (detector)
and 6.5e-5 (recogniser).
"""

from __future__ import annotations

import collections
from collections.abc import Callable

import numpy as np
import onnxruntime
import pytest
import spawnml
from spawnml_models.assets import asset_file
from spawnml_models.reference_models import DETECTOR_MEAN, DETECTOR_STD, OCR_ASSET, nchw
from spawnml_models.synthetic import text_image

from tests.backends import GPU_BACKENDS, backend_or_skip
from tests.model_files import require

pytestmark = pytest.mark.real_model


def detector_pages() -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(41)
    shapes = [(1, 64, 96), (2, 96, 128)]
    return [
        {
            "x": nchw(
                (np.stack([text_image(rng, h, w, lines=2) for _ in range(n)]) - DETECTOR_MEAN) / DETECTOR_STD
            )
        }
        for n, h, w in shapes
    ]


def recogniser_lines() -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(42)
    return [
        {"x": nchw(np.stack([text_image(rng, 48, w) for _ in range(n)]) * 2 - 1)}
        for n, w in [(1, 80), (2, 160)]
    ]


MODELS: dict[str, tuple[str, Callable[[], list[dict[str, np.ndarray]]], float]] = {
    "pp-ocrv4-det": ("ch_PP-OCRv4_det_infer.onnx", detector_pages, 1e-4),
    "pp-ocrv4-rec": ("ch_PP-OCRv4_rec_infer.onnx", recogniser_lines, 2e-4),
}


@pytest.mark.parametrize("name", MODELS)
@pytest.mark.parametrize("provider", GPU_BACKENDS)
def test_pp_ocrv4_whole_on_the_gpu_matches_onnxruntime(provider, name):
    backend_or_skip(provider)
    filename, feeds, atol = MODELS[name]
    path = require(lambda: asset_file(OCR_ASSET, filename))
    session = spawnml.InferenceSession(path, providers=[provider])
    placed = collections.Counter(p for _, _, p in session.placement())
    assert set(placed) == {provider}, placed
    reference = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    worst = 0.0
    for feed in feeds():
        (got,), (want,) = session.run(None, feed), reference.run(None, feed)
        assert (got.dtype, got.shape) == (want.dtype, want.shape)
        np.testing.assert_allclose(got, want, rtol=0, atol=atol, err_msg=f"{name} on {provider}")
        worst = max(worst, float(np.abs(got - want).max()))
    print(f"{name} on {provider}: {placed[provider]} nodes, largest absolute difference {worst:.2e}")
