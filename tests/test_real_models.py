"""Real models on the CPU backend against onnxruntime running the same file on the same inputs.

Each model is one of ``spawnml_models``' reference models: its driver runs both sessions
over several deterministic inputs of varying shape (and carried state) and the outputs
must agree within the model's stated ``rtol`` / ``atol``. Needs ``scripts/fetch-models``;
skips without the files unless ``SPAWNML_REQUIRE_MODELS=1``.
"""

from __future__ import annotations

import numpy as np
import onnxruntime
import pytest
import spawnml
from spawnml.models import ReferenceModel
from spawnml_models.reference_models import REFERENCE_MODELS

from tests.model_files import require

pytestmark = pytest.mark.real_model


@pytest.mark.parametrize("model", REFERENCE_MODELS, ids=lambda model: model.name)
def test_cpu_matches_onnxruntime(model: ReferenceModel):
    path = require(model.path)
    got = model.drive(spawnml.InferenceSession(path, providers=["cpu"]))
    want = model.drive(onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"]))
    assert len(got) == len(want)
    for index, (ours, theirs) in enumerate(zip(got, want, strict=True)):
        where = f"{model.name} output {index}"
        assert (ours.dtype, ours.shape) == (theirs.dtype, theirs.shape), where
        np.testing.assert_allclose(ours, theirs, rtol=model.rtol, atol=model.atol, err_msg=where)
    difference = max(float(np.abs(ours - theirs).max()) for ours, theirs in zip(got, want, strict=True))
    print(f"{model.name}: {len(got)} outputs, largest absolute difference {difference:.2e}")
