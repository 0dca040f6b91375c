"""MobileNetV2 on SpawnML against the same weights in PyTorch, on scikit-image's photos.

torchvision is not installable here, so the reference is torchvision's MobileNetV2 written
out in plain torch with its module names: ``load_state_dict(strict=True)`` takes the
checkpoint as it is. Both sides get the same preprocessed pixels. Tolerance: logits of
float32 networks 53 layers deep summed in different orders, about 10 in magnitude, agree
within 2e-4 absolute; probabilities within 1e-5.
On WebGPU the whole network is placed on the GPU and held to the same tolerances on one photo.
The real-weight tests need ``scripts/fetch-models mobilenet-v2-pth imagenet-labels``.
"""

from __future__ import annotations

import collections

import numpy as np
import pytest
import skimage.data
import spawnml
import torch
from spawnml_models.assets import asset_file
from spawnml_models.classification import ImageClassificationPipeline, preprocess, softmax
from spawnml_models.imagenet_labels import LABELS_ASSET, LABELS_FILE
from spawnml_models.mobilenet import INPUT, WEIGHTS_ASSET, WEIGHTS_FILE, mobilenet_v2_graph
from torch import nn

from tests.backends import backend_or_skip
from tests.model_files import require
from tests.torch_mobilenet import MobileNetV2

LOGITS_ATOL, PROBABILITY_ATOL = 2e-4, 1e-5
#: scikit-image photos and the ImageNet class each must rank first.
PHOTOS = {"chelsea": "Egyptian cat", "coffee": "espresso", "astronaut": None, "rocket": None}


def torch_logits(model: MobileNetV2, batch: np.ndarray) -> np.ndarray:
    with torch.no_grad():
        return model(torch.from_numpy(batch)).numpy()


def state_dict_arrays(model: nn.Module) -> dict[str, np.ndarray]:
    return {name: tensor.numpy() for name, tensor in model.state_dict().items()}


def test_graph_matches_torch_on_random_weights_and_sizes():
    torch.manual_seed(0)
    model = MobileNetV2(classes=10).eval()
    for module in model.modules():  # non-trivial normalisation statistics
        if isinstance(module, nn.BatchNorm2d):
            module.running_mean.uniform_(-0.5, 0.5)
            module.running_var.uniform_(0.5, 2.0)
            module.weight.data.uniform_(0.5, 1.5)
            module.bias.data.uniform_(-0.5, 0.5)
    session = spawnml.InferenceSession(mobilenet_v2_graph(state_dict_arrays(model)))
    rng = np.random.default_rng(3)
    for shape in ((1, 3, 224, 224), (2, 3, 96, 128), (3, 3, 33, 65)):
        batch = rng.standard_normal(shape, dtype=np.float32)
        np.testing.assert_allclose(
            session.run(None, {INPUT: batch})[0], torch_logits(model, batch), rtol=1e-4, atol=1e-4
        )


@pytest.fixture(scope="module")
def reference() -> MobileNetV2:
    path = require(lambda: asset_file(WEIGHTS_ASSET, WEIGHTS_FILE))
    model = MobileNetV2()
    model.load_state_dict(torch.load(path, weights_only=True), strict=True)
    return model.eval()


@pytest.fixture(scope="module")
def pipeline() -> ImageClassificationPipeline:
    require(lambda: asset_file(WEIGHTS_ASSET, WEIGHTS_FILE))
    require(lambda: asset_file(LABELS_ASSET, LABELS_FILE))
    return ImageClassificationPipeline()


@pytest.mark.real_model
@pytest.mark.parametrize("photo", sorted(PHOTOS))
def test_top5_and_probabilities_match_torch(photo, reference, pipeline):
    assert_matches_torch(pipeline, reference, photo)


def assert_matches_torch(pipeline: ImageClassificationPipeline, reference: MobileNetV2, photo: str) -> None:
    """Logits, the top 5 and their probabilities of ``photo`` within tolerance of PyTorch's."""
    image = getattr(skimage.data, photo)()
    expected_logits = torch_logits(reference, preprocess(image)[None])
    logits = pipeline.session.run(None, {INPUT: preprocess(image)[None]})[0]
    np.testing.assert_allclose(logits, expected_logits, rtol=0, atol=LOGITS_ATOL)
    expected = softmax(expected_logits)[0]
    predictions = pipeline(image, top_k=5)
    assert [p.index for p in predictions] == list(np.argsort(-expected)[:5])
    np.testing.assert_allclose(
        [p.probability for p in predictions], np.sort(expected)[::-1][:5], rtol=0, atol=PROBABILITY_ATOL
    )
    if PHOTOS[photo] is not None:
        assert predictions[0].label == PHOTOS[photo]


@pytest.mark.real_model
def test_batch_probabilities_match_torch(reference, pipeline):
    images = [getattr(skimage.data, photo)() for photo in sorted(PHOTOS)]
    expected = softmax(torch_logits(reference, np.stack([preprocess(image) for image in images])))
    probabilities = pipeline.probabilities(images)
    np.testing.assert_allclose(probabilities, expected, rtol=0, atol=PROBABILITY_ATOL)
    np.testing.assert_allclose(probabilities.sum(axis=1), 1, rtol=1e-5)


@pytest.mark.real_model
def test_whole_pipeline_on_webgpu_matches_torch(reference):
    """Every node on WebGPU (no CPU node); chelsea's logits and top 5 as PyTorch's, as on the CPU."""
    backend_or_skip("webgpu")
    require(lambda: asset_file(LABELS_ASSET, LABELS_FILE))
    gpu = ImageClassificationPipeline(providers=["webgpu"])
    placed = collections.Counter(provider for _, _, provider in gpu.session.placement())
    assert set(placed) == {"webgpu"}, placed
    assert_matches_torch(gpu, reference, "chelsea")
