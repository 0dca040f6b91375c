"""Triton's own client and plain httpx against ``/v2``: metadata, readiness, and inference
(JSON and binary tensors) equal to a SpawnML session's run on the same feeds; concurrent
requests to a model with an open first dimension are batched, each getting its own rows."""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
import spawnml
import tritonclient.http as triton
from onnx import TensorProto, helper, numpy_helper
from spawnml.formats import save_onnx
from spawnml_models.assets import asset_file
from spawnml_models.mobilenet import INPUT, OUTPUT, WEIGHTS_ASSET, WEIGHTS_FILE, mobilenet_v2_graph
from spawnml_serve import GraphModel

from tests.model_files import require


def scorer(path: Path) -> Path:
    """``probabilities = Softmax(x @ w + b)``, ``ids = ArgMax``: float32 rows on an open batch dimension."""
    rng = np.random.default_rng(7)
    weights = numpy_helper.from_array(rng.standard_normal((6, 4)).astype(np.float32), "w")
    bias = numpy_helper.from_array(rng.standard_normal(4).astype(np.float32), "b")
    graph = helper.make_graph(
        [
            helper.make_node("MatMul", ["x", "w"], ["xw"]),
            helper.make_node("Add", ["xw", "b"], ["logits"]),
            helper.make_node("Softmax", ["logits"], ["probabilities"], axis=-1),
            helper.make_node("ArgMax", ["logits"], ["ids"], axis=-1, keepdims=0),
        ],
        "scorer",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 6])],
        [
            helper.make_tensor_value_info("probabilities", TensorProto.FLOAT, ["batch", 4]),
            helper.make_tensor_value_info("ids", TensorProto.INT64, ["batch"]),
        ],
        [weights, bias],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    path.write_bytes(model.SerializeToString())
    return path


@pytest.fixture(scope="module")
def server(serve_module: Callable[..., Any], tmp_path_factory: pytest.TempPathFactory) -> Any:
    folder = tmp_path_factory.mktemp("kserve")
    models = {"scorer": GraphModel("scorer", spawnml.InferenceSession(str(scorer(folder / "scorer.onnx"))))}
    return serve_module(models)


@pytest.fixture(scope="module")
def client(server: Any) -> triton.InferenceServerClient:
    return triton.InferenceServerClient(server.url.removeprefix("http://"))


def infer_body(x: np.ndarray) -> dict[str, Any]:
    """A JSON infer request feeding ``x`` as input ``x``."""
    return {"inputs": [{"name": "x", "shape": list(x.shape), "datatype": "FP32", "data": x.ravel().tolist()}]}


def session_of(server: Any, name: str) -> spawnml.InferenceSession:
    return server.models[name].session


def test_health_and_metadata(client):
    assert client.is_server_live() and client.is_server_ready() and client.is_model_ready("scorer")
    metadata = client.get_model_metadata("scorer")
    assert metadata["inputs"] == [{"name": "x", "datatype": "FP32", "shape": [-1, 6]}]
    assert [output["datatype"] for output in metadata["outputs"]] == ["FP32", "INT64"]
    assert client.get_server_metadata()["name"] == "spawnml"


@pytest.mark.parametrize("binary", [True, False])
def test_triton_client_infers_like_a_session(client, server, binary):
    x = np.random.default_rng(0).standard_normal((3, 6)).astype(np.float32)
    fed = triton.InferInput("x", list(x.shape), "FP32")
    fed.set_data_from_numpy(x, binary_data=binary)
    wanted = [triton.InferRequestedOutput(name, binary_data=binary) for name in ("probabilities", "ids")]
    result = client.infer("scorer", [fed], outputs=wanted)
    expected = session_of(server, "scorer").run(None, {"x": x})
    np.testing.assert_array_equal(result.as_numpy("probabilities"), expected[0])
    np.testing.assert_array_equal(result.as_numpy("ids"), expected[1])


def test_concurrent_requests_are_batched_and_each_gets_its_rows(server):
    rows = [np.random.default_rng(i).standard_normal((1 + i % 3, 6)).astype(np.float32) for i in range(16)]
    session = session_of(server, "scorer")
    runs: list[int] = []
    original = session.run

    def counted(names, feeds, *args):
        runs.append(len(feeds["x"]))
        return original(names, feeds, *args)

    session.run = counted  # type: ignore[method-assign]
    try:
        with (
            httpx.Client(base_url=server.url, timeout=60) as http,
            concurrent.futures.ThreadPoolExecutor(8) as pool,
        ):
            answers = list(pool.map(lambda x: http.post("/v2/models/scorer/infer", json=infer_body(x)), rows))
    finally:
        del session.run
    for x, answer in zip(rows, answers, strict=True):
        assert answer.status_code == 200, answer.text
        outputs = {output["name"]: output for output in answer.json()["outputs"]}
        expected = original(None, {"x": x})
        got = np.array(outputs["probabilities"]["data"], np.float32).reshape(
            outputs["probabilities"]["shape"]
        )
        np.testing.assert_allclose(got, expected[0], rtol=1e-6, atol=1e-7)
        np.testing.assert_array_equal(outputs["ids"]["data"], expected[1])
    assert len(runs) < len(rows) and sum(runs) == sum(len(x) for x in rows)


@pytest.mark.real_model
def test_a_real_classifier_over_triton(serve, tmp_path):
    weights = require(lambda: asset_file(WEIGHTS_ASSET, WEIGHTS_FILE))
    path = tmp_path / "mobilenet.onnx"
    save_onnx(mobilenet_v2_graph(spawnml.load(str(weights)).initializers), path)
    running = serve({"mobilenet": GraphModel("mobilenet", spawnml.InferenceSession(str(path)))})
    client = triton.InferenceServerClient(running.url.removeprefix("http://"))
    images = np.random.default_rng(1).standard_normal((2, 3, 224, 224)).astype(np.float32)
    fed = triton.InferInput(INPUT, list(images.shape), "FP32")
    fed.set_data_from_numpy(images)
    result = client.infer("mobilenet", [fed])
    expected = running.models["mobilenet"].session.run(None, {INPUT: images})[0]
    np.testing.assert_array_equal(result.as_numpy(OUTPUT), expected)
