"""Bad requests get a 4xx naming what is wrong and the server lives on; a full queue answers 503
with Retry-After, a slow request 504; /metrics counts it all; a bounded load test loses nothing;
fuzzed requests never crash the server while valid ones keep succeeding."""

from __future__ import annotations

import concurrent.futures
import json
import statistics
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
import spawnml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from spawnml_serve import GraphModel, ServeConfig

from .test_serve_kserve import infer_body, scorer


@pytest.fixture(scope="module")
def scorer_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return scorer(tmp_path_factory.mktemp("robust") / "scorer.onnx")


def scorer_model(path: Path) -> GraphModel:
    return GraphModel("scorer", spawnml.InferenceSession(str(path)))


@pytest.fixture(scope="module")
def server(serve_module: Callable[..., Any], scorer_path: Path) -> Any:
    return serve_module({"scorer": scorer_model(scorer_path)}, ServeConfig(max_body_bytes=1 << 16))


@pytest.fixture(scope="module")
def http(server: Any) -> httpx.Client:
    return httpx.Client(base_url=server.url, timeout=60)


X = np.arange(12, dtype=np.float32).reshape(2, 6) / 10


def assert_valid_request_succeeds(http: httpx.Client, server: Any) -> None:
    answer = http.post("/v2/models/scorer/infer", json=infer_body(X))
    assert answer.status_code == 200, answer.text
    expected = server.models["scorer"].session.run(["ids"], {"x": X})[0]
    assert ids_of(answer) == expected.tolist()


def ids_of(answer: httpx.Response) -> list[int]:
    return {output["name"]: output for output in answer.json()["outputs"]}["ids"]["data"]


def mutated(old: str, new: str) -> bytes:
    """A valid infer request for ``X`` with ``old`` replaced by ``new`` in its JSON."""
    return json.dumps(infer_body(X)).replace(old, new).encode()


INFER = "/v2/models/scorer/infer"


@pytest.mark.parametrize(
    ("path", "content", "status", "says"),
    [
        (INFER, b"{not json", 400, "not valid JSON"),
        (INFER, b"[1, 2]", 400, "must be a JSON object"),
        (INFER, b"{}", 400, "missing required field 'inputs'"),
        ("/v2/models/absent/infer", b"{}", 404, "no model 'absent'"),
        (INFER, mutated('"FP32"', '"INT32"'), 400, "is FP32, not INT32"),
        (INFER, mutated("[2, 6]", "[3, 6]"), 400, "12 values for shape [3, 6]"),
        (INFER, mutated("[2, 6]", "[2, 2, 3]"), 400, "rank"),
        (INFER, mutated('"x"', '"y"'), 400, "no input 'y'"),
        (INFER, b" " * 70_000, 413, "exceed"),
        ("/v1/embeddings", b'{"model": "scorer", "input": "x"}', 400, "not one this endpoint serves"),
        ("/v1/chat/completions", b'{"model": 3}', 400, "field 'model' must be str"),
        ("/v9/nothing", b"{}", 404, "Not Found"),
    ],
)
def test_bad_requests_get_4xx_naming_the_problem(http, server, path, content, status, says):
    answer = http.post(path, content=content, headers={"content-type": "application/json"})
    assert answer.status_code == status
    assert says in json.dumps(answer.json())
    assert_valid_request_succeeds(http, server)


def test_binary_extension_errors(http):
    header = json.dumps(
        {
            "inputs": [
                {"name": "x", "shape": [2, 6], "datatype": "FP32", "parameters": {"binary_data_size": 40}}
            ]
        }
    ).encode()
    answer = http.post(
        "/v2/models/scorer/infer",
        content=header + X.tobytes(),
        headers={"Inference-Header-Content-Length": str(len(header))},
    )
    assert answer.status_code == 400 and "binary_data_size 40" in answer.json()["error"]
    answer = http.post(
        "/v2/models/scorer/infer", content=header, headers={"Inference-Header-Content-Length": "99999"}
    )
    assert answer.status_code == 400 and "does not fit" in answer.json()["error"]


def slowed(model: GraphModel, seconds: float, started: threading.Event | None = None) -> GraphModel:
    """``model`` whose runs take ``seconds`` longer (to fill the queue, or pass the timeout)."""
    run = model.session.run

    def slow(*args: Any) -> Any:
        if started is not None:
            started.set()
        time.sleep(seconds)
        return run(*args)

    model.session.run = slow  # type: ignore[method-assign]
    return model


def test_full_queue_answers_503_with_retry_after(serve, scorer_path):
    started = threading.Event()
    model = slowed(scorer_model(scorer_path), 2.0, started)
    running = serve({"scorer": model}, ServeConfig(max_concurrency=1, max_queue=0, batch_window_s=0))
    with (
        httpx.Client(base_url=running.url, timeout=60) as http,
        concurrent.futures.ThreadPoolExecutor(1) as pool,
    ):
        first = pool.submit(http.post, "/v2/models/scorer/infer", json=infer_body(X))
        assert started.wait(30)
        refused = http.post("/v2/models/scorer/infer", json=infer_body(X))
        assert refused.status_code == 503 and refused.headers["Retry-After"] == "1"
        assert "busy" in refused.json()["error"]
        assert first.result().status_code == 200


def test_slow_request_answers_504(serve, scorer_path):
    model = slowed(scorer_model(scorer_path), 1.0)
    running = serve({"scorer": model}, ServeConfig(request_timeout_s=0.2))
    with httpx.Client(base_url=running.url, timeout=60) as http:
        answer = http.post("/v2/models/scorer/infer", json=infer_body(X))
    assert answer.status_code == 504 and "longer than 0.2 s" in answer.json()["error"]


def test_metrics_count_requests_and_latency(http, server):
    assert_valid_request_succeeds(http, server)
    text = http.get("/metrics").text
    assert 'spawnml_requests_total{endpoint="infer",status="200"}' in text
    assert "spawnml_request_seconds_bucket" in text and "spawnml_queue_depth" in text


def test_bounded_load_loses_nothing(http, server):
    """8 clients for 5 s on the loopback: every answer right; throughput and percentiles printed."""
    rng = np.random.default_rng(3)
    session = server.models["scorer"].session
    latencies: list[float] = []
    failures: list[str] = []
    stop = time.monotonic() + 5

    def client() -> None:
        with httpx.Client(base_url=server.url, timeout=60) as own:
            while time.monotonic() < stop:
                x = rng.standard_normal((1 + len(latencies) % 4, 6)).astype(np.float32)
                start = time.perf_counter()
                answer = own.post("/v2/models/scorer/infer", json=infer_body(x))
                latencies.append(time.perf_counter() - start)
                ids = (
                    {o["name"]: o for o in answer.json()["outputs"]}["ids"]["data"]
                    if answer.is_success
                    else None
                )
                if ids != session.run(["ids"], {"x": x})[0].tolist():
                    failures.append(answer.text)

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        for done in [pool.submit(client) for _ in range(8)]:
            done.result()
    assert not failures and latencies
    p50, p99 = np.percentile(latencies, [50, 99]) * 1000
    mean = statistics.mean(latencies) * 1000
    rate = len(latencies) / 5
    print(f"load: {rate:.0f} requests/s, p50 {p50:.1f} ms, p99 {p99:.1f} ms, mean {mean:.1f} ms")


fuzzed = st.one_of(
    st.binary(max_size=300),
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
        max_leaves=12,
    ).map(lambda value: json.dumps(value).encode()),
    st.builds(
        lambda name, shape, datatype, data: json.dumps(
            {"inputs": [{"name": name, "shape": shape, "datatype": datatype, "data": data}]}
        ).encode(),
        st.sampled_from(["x", "y", ""]),
        st.lists(st.integers(-2, 8), max_size=4),
        st.sampled_from(["FP32", "INT64", "BOOL", "BYTES", "fp32"]),
        st.lists(st.floats(allow_nan=True) | st.integers(-(2**70), 2**70) | st.text(max_size=3), max_size=20),
    ),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(content=fuzzed, path=st.sampled_from(["/v2/models/scorer/infer", "/v1/embeddings", "/v1/completions"]))
def test_fuzzed_requests_never_crash_the_server(http, server, content, path):
    answer = http.post(path, content=content, headers={"content-type": "application/json"})
    assert answer.status_code < 500 or answer.status_code == 503, answer.text
    answer.json()  # every answer is JSON
    assert_valid_request_succeeds(http, server)
