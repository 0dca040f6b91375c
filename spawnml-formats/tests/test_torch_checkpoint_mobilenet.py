"""torchvision's MobileNetV2 ImageNet weights, a legacy (pre-zip) checkpoint, read without torch.

Every tensor must equal, bit for bit, what ``torch.load(weights_only=True)`` gives.
Needs ``scripts/fetch-models mobilenet-v2-pth``; skips without it unless ``SPAWNML_REQUIRE_MODELS=1``.
"""

from __future__ import annotations

import numpy as np
import pytest
import spawnml
import spawnml_models.assets as assets
import torch

from tests.model_files import require

pytestmark = pytest.mark.real_model


def test_mobilenet_v2_weights_equal_torch_load():
    path = require(lambda: assets.asset_file("mobilenet-v2-pth", "mobilenet_v2-b0353104.pth"))
    assert path.read_bytes()[:2] == b"\x80\x02"  # the legacy format, not a zip archive
    graph = spawnml.load(path)
    want = torch.load(path, weights_only=True)
    assert list(graph.initializers) == list(want)
    assert len(want) == 314
    for name, tensor in want.items():
        got = graph.initializers[name]
        assert got.dtype == tensor.numpy().dtype and got.shape == tuple(tensor.shape), name
        np.testing.assert_array_equal(got, tensor.numpy(), err_msg=name)
    assert graph.initializers["classifier.1.weight"].shape == (1000, 1280)
