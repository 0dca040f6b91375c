"""ImageNet classification preprocessing, top-k and ``spawnml classify`` without the model files."""

from __future__ import annotations

import argparse

import numpy as np
import pytest
from PIL import Image
from spawnml import InvalidArgumentError
from spawnml_models import classification
from spawnml_models.classification import (
    CLASSIFY,
    MEAN,
    STD,
    ImageClassificationPipeline,
    Prediction,
    preprocess,
    softmax,
)


def test_preprocess_resizes_short_side_and_center_crops():
    """A 300x600 image with a marked centre column: resized to 256x512, the crop keeps the middle."""
    pixels = np.zeros((300, 600, 3), dtype=np.uint8)
    pixels[:, 290:310] = 255
    batch = preprocess(pixels)
    assert batch.shape == (3, 224, 224) and batch.dtype == np.float32
    rgb = batch.transpose(1, 2, 0) * STD + MEAN
    np.testing.assert_allclose(rgb[:, 112], 1, atol=1e-5)
    np.testing.assert_allclose(rgb[:, :90], 0, atol=1e-5)
    np.testing.assert_array_equal(preprocess(Image.fromarray(pixels)), batch)


def test_preprocess_grey_and_refusals(tmp_path):
    grey = np.full((230, 240), 128, dtype=np.uint8)
    np.testing.assert_allclose(preprocess(grey).transpose(1, 2, 0) * STD + MEAN, 128 / 255, atol=1e-5)
    with pytest.raises(InvalidArgumentError, match="uint8"):
        preprocess(np.zeros((4, 4, 3), dtype=np.float32))
    (tmp_path / "x.png").write_bytes(b"not an image")
    with pytest.raises(InvalidArgumentError, match="cannot read an image"):
        preprocess(tmp_path / "x.png")


def test_softmax():
    probabilities = softmax(np.array([[0.0, np.log(3.0)], [1000.0, 1000.0]], dtype=np.float32))
    np.testing.assert_allclose(probabilities, [[0.25, 0.75], [0.5, 0.5]], rtol=1e-6)


class FakeSession:
    def run(self, outputs, feeds):
        return [np.tile(np.array([1.0, 3.0, 2.0, 0.0], dtype=np.float32), (len(feeds["image"]), 1))]


def fake_pipeline(labels=("a", "b", "c", "d")) -> ImageClassificationPipeline:
    pipeline = ImageClassificationPipeline.__new__(ImageClassificationPipeline)
    pipeline.session, pipeline.labels = FakeSession(), tuple(labels)
    return pipeline


def test_top_k_with_labels():
    image = np.zeros((224, 224, 3), dtype=np.uint8)
    predictions = fake_pipeline()(image, top_k=2)
    expected = softmax(np.array([1.0, 3.0, 2.0, 0.0]))
    assert [(p.index, p.label) for p in predictions] == [(1, "b"), (2, "c")]
    np.testing.assert_allclose([p.probability for p in predictions], expected[[1, 2]], rtol=1e-6)
    with pytest.raises(InvalidArgumentError, match="top_k"):
        fake_pipeline()(image, top_k=5)
    with pytest.raises(InvalidArgumentError, match="4 classes but 3 labels"):
        fake_pipeline(labels="abc")(image, top_k=1)


def test_classify_command(monkeypatch, capsys):
    class FakePipeline:
        def __init__(self, providers=None):
            assert providers is None

        def __call__(self, image, top_k):
            assert (image, top_k) == ("cat.jpg", 2)
            return [Prediction(285, "Egyptian cat", 0.75), Prediction(281, "tabby", 0.125)]

    monkeypatch.setattr(classification, "ImageClassificationPipeline", FakePipeline)
    parser = argparse.ArgumentParser()
    CLASSIFY.configure(parser)
    assert CLASSIFY.run(parser.parse_args(["cat.jpg", "--top-k", "2"])) == 0
    assert capsys.readouterr().out.splitlines() == ["  0.7500   285  Egyptian cat", "  0.1250   281  tabby"]
