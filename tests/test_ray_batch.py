"""Batch inference on a local Ray cluster (two CPUs): a pipeline and a session as Dataset
transforms, one per actor, give the vectors and outputs SpawnML gives in the test process."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import spawnml
from onnx import TensorProto, helper

ray = pytest.importorskip("ray", reason="Ray is an extra: pip install 'spawnml-models[ray]'")

from spawnml.errors import InvalidArgumentError  # noqa: E402
from spawnml_models.embeddings import SentenceEmbeddingPipeline  # noqa: E402
from spawnml_models.ray import map_pipeline, map_session  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cluster() -> Iterator[None]:
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def sentences(count: int) -> list[str]:
    subjects = ["The cat", "A engineer", "My neighbour", "The orchestra", "A small robot", "The river"]
    verbs = ["watches", "builds", "forgets", "paints", "follows", "measures"]
    objects = ["the moon", "a bridge", "old letters", "the harbour", "twelve lanterns", "a quiet song"]
    return [
        f"{subjects[i % 6]} {verbs[(i // 6) % 6]} {objects[(i // 36) % 6]} on day {i}." for i in range(count)
    ]


@pytest.mark.real_model
def test_embedding_pipeline_per_actor_equals_the_pipeline(cluster):
    texts = sentences(400)
    dataset = ray.data.from_items([{"text": text} for text in texts], override_num_blocks=4)
    embedded = map_pipeline(dataset, "all-minilm-l6-v2", "text", "embedding", actors=2, batch_size=50)
    rows = {row["text"]: row["embedding"] for row in embedded.iter_rows()}
    expected = SentenceEmbeddingPipeline()(texts, batch_size=50)
    got = np.stack([rows[text] for text in texts])
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-5)  # batches pad to their longest sentence


def test_session_per_actor_equals_the_session(cluster, tmp_path: Path):
    graph = helper.make_graph(
        [helper.make_node("Softmax", ["x"], ["p"], axis=-1)],
        "softmax",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 5])],
        [helper.make_tensor_value_info("p", TensorProto.FLOAT, ["batch", 5])],
    )
    path = tmp_path / "softmax.onnx"
    path.write_bytes(
        helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()
    )
    x = np.random.default_rng(0).standard_normal((300, 5)).astype(np.float32)
    dataset = ray.data.from_items([{"features": row} for row in x], override_num_blocks=3)
    scored = map_session(dataset, str(path), {"x": "features"}, actors=2, batch_size=64)
    rows = list(scored.iter_rows())  # one pass: the actors may hand rows back in another order each time
    got = np.stack([row["p"] for row in rows])
    order = np.stack([row["features"] for row in rows])
    expected = spawnml.InferenceSession(str(path)).run(None, {"x": order})[0]
    np.testing.assert_array_equal(got, expected)


def test_gpu_providers_without_a_gpu_are_refused(cluster):
    dataset = ray.data.from_items([{"text": "x"}])
    with pytest.raises(InvalidArgumentError, match="Ray sees no GPU"):
        map_pipeline(dataset, "all-minilm-l6-v2", "text", "embedding", providers=["webgpu"])
