"""``SessionOptions.intra_op_num_threads`` sets the threads of one session's runs: on one thread no
part goes to the pool and BLAS runs every product on one thread; on two, large passes and products
use both. Two sessions with different counts run side by side, each on its own. The results are
onnxruntime's, and where the CPU backend's rules say so (elementwise passes, matrix-vector
products) the same bits on any count. What ran where is observed through the pool and the BLAS
regions, never through timing."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from typing import Any

import numpy as np
import pytest
import spawnml
from onnx import TensorProto, helper, numpy_helper
from spawnml_cpu.kernels import elementwise, threads, workers

ort = pytest.importorskip("onnxruntime")

#: A matrix-vector product over more than BLAS_THREADS_WORK multiply-adds (one BLAS thread on any
#: count), a Tanh over more than MIN_SPLIT_ELEMENTS (cut over the threads) and a GEMM large enough
#: for BLAS's threads.
DEPTH, WIDTH = 1024, 8192
ROWS = 2 * elementwise.MIN_SPLIT_ELEMENTS // 1024


def _model() -> bytes:
    rng = np.random.default_rng(0)
    weights = rng.standard_normal((DEPTH, WIDTH)).astype(np.float32)
    square = rng.standard_normal((512, 512)).astype(np.float32)
    graph = helper.make_graph(
        [
            helper.make_node("MatMul", ["v", "w"], ["mv"]),
            helper.make_node("Tanh", ["big"], ["tanh"]),
            helper.make_node("MatMul", ["a", "s"], ["gemm"]),
        ],
        "threads",
        [
            helper.make_tensor_value_info("v", TensorProto.FLOAT, [1, DEPTH]),
            helper.make_tensor_value_info("big", TensorProto.FLOAT, [ROWS, 1024]),
            helper.make_tensor_value_info("a", TensorProto.FLOAT, [256, 512]),
        ],
        [helper.make_tensor_value_info(name, TensorProto.FLOAT, None) for name in ("mv", "tanh", "gemm")],
        [numpy_helper.from_array(weights, "w"), numpy_helper.from_array(square, "s")],
    )
    return helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8
    ).SerializeToString()


MODEL = _model()
FEEDS = {
    "v": np.random.default_rng(1).standard_normal((1, DEPTH)).astype(np.float32),
    "big": np.random.default_rng(2).standard_normal((ROWS, 1024)).astype(np.float32),
    "a": np.random.default_rng(3).standard_normal((256, 512)).astype(np.float32),
}
assert threads.BLAS_THREADS_WORK <= DEPTH * WIDTH <= 256 * 512 * 512


class Seen:
    """Parts handed to the pool, and BLAS's thread count inside each BLAS region, by the thread that
    ran them."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.pool: list[tuple[int, int]] = []
        self.blas: list[tuple[int, int]] = []

    def add(self, kind: list[tuple[int, int]], count: int) -> None:
        with self.lock:
            kind.append((threading.get_ident(), count))


@pytest.fixture
def seen(monkeypatch: pytest.MonkeyPatch) -> Iterator[Seen]:
    record = Seen()
    submit, enter = workers.Workers.submit, threads._BlasThreads.__enter__

    def counted_submit(self: workers.Workers, fn: Callable[[], None], copies: int) -> list[Future[None]]:
        record.add(record.pool, copies)
        return submit(self, fn, copies)

    def counted_enter(self: Any) -> None:
        enter(self)
        blas = threads._blas()
        if blas is not None:
            record.add(record.blas, blas.get_num_threads())

    monkeypatch.setattr(workers.Workers, "submit", counted_submit)
    monkeypatch.setattr(threads._BlasThreads, "__enter__", counted_enter)
    yield record


def _session(count: int | None) -> spawnml.InferenceSession:
    options = (
        spawnml.SessionOptions() if count is None else spawnml.SessionOptions(intra_op_num_threads=count)
    )
    return spawnml.InferenceSession(MODEL, options, providers=["cpu"])


def _reference() -> list[np.ndarray]:
    return ort.InferenceSession(MODEL, providers=["CPUExecutionProvider"]).run(None, FEEDS)


def test_one_thread_hands_nothing_to_other_threads(seen: Seen) -> None:
    outputs = _session(1).run(None, FEEDS)
    assert seen.pool == [] and seen.blas and {count for _, count in seen.blas} == {1}
    for ours, reference in zip(outputs, _reference(), strict=True):
        np.testing.assert_allclose(np.asarray(ours), reference, rtol=1e-4, atol=1e-3)


def test_two_threads_cut_passes_and_run_products_on_two_blas_threads(seen: Seen) -> None:
    outputs = _session(2).run(None, FEEDS)
    assert seen.pool and all(copies == 1 for _, copies in seen.pool)
    assert 2 in {count for _, count in seen.blas}
    for ours, reference in zip(outputs, _reference(), strict=True):
        np.testing.assert_allclose(np.asarray(ours), reference, rtol=1e-4, atol=1e-3)


def test_one_thread_gives_the_defaults_bits_where_the_rules_say_so() -> None:
    """Elementwise passes and matrix-vector products: the same bits on one thread as on the
    default count (and on three, more threads than this machine may have)."""
    answers = [_session(count).run(["mv", "tanh"], FEEDS) for count in (1, None, 3)]
    for other in answers[1:]:
        for one, many in zip(answers[0], other, strict=True):
            np.testing.assert_array_equal(one, many)


def test_sessions_with_different_counts_run_side_by_side_on_their_own(seen: Seen) -> None:
    one, two = _session(1), _session(2)
    done: dict[int, int] = {}
    barrier = threading.Barrier(2)

    def run(session: spawnml.InferenceSession, count: int) -> None:
        barrier.wait()
        for _ in range(3):
            session.run(None, FEEDS)
        done[threading.get_ident()] = count

    workers_ = [threading.Thread(target=run, args=(s, c)) for s, c in ((one, 1), (two, 2))]
    for worker in workers_:
        worker.start()
    for worker in workers_:
        worker.join()
    by_count = {count: ident for ident, count in done.items()}
    assert not [1 for ident, _ in seen.pool if ident == by_count[1]]
    assert {count for ident, count in seen.blas if ident == by_count[1]} == {1}
    assert 2 in {count for ident, count in seen.blas if ident == by_count[2]}
    assert [1 for ident, _ in seen.pool if ident == by_count[2]]


@pytest.mark.parametrize("count", [-1, 1.5, "2", True])
def test_a_bad_count_is_refused_naming_the_option(count: object) -> None:
    with pytest.raises(spawnml.InvalidArgumentError, match="intra_op_num_threads"):
        _session(count)  # type: ignore[arg-type]
