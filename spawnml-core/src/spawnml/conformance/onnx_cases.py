"""The ONNX backend test cases of the installed onnx wheel, as conformance cases.

``node`` cases live in memory; ``simple`` and ``pytorch-*`` cases are folders with
``model.onnx`` and ``test_data_set_*/{input,output}_N.pb``; ``real`` cases are the light
models in ``onnx/backend/test/data/light``, which store no inputs: like onnx's runner, the
kit feeds every float input ``arange(n) / n`` in its declared shape (unknown dims 1) and
compares with the stored ``light_*_output_N.pb`` (or, where a model stores none, with
onnx's reference evaluator, as onnx's runner does).
"""

from __future__ import annotations

import functools
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper
from onnx.backend.test.case.test_case import TestCase
from onnx.backend.test.loader import load_model_tests

from .case import Case, Runs, run_feeds

#: Where ``real`` cases' URLs (``onnx/backend/test/data/light/...``) are relative to.
ONNX_ROOT = Path(onnx.__file__).resolve().parent.parent
#: Node cases whose expected outputs are random draws of onnx's numpy reference, which no
#: other implementation reproduces (onnxruntime's runner of these tests excludes them too).
RANDOM_DRAWS = frozenset(
    {f"test_bernoulli{variant}{form}" for variant in ("", "_double", "_seed") for form in ("", "_expanded")}
    | {f"test_training_dropout{ratio}{mask}" for ratio in ("", "_default") for mask in ("", "_mask")}
)
RANDOM_REASON = (
    "expected outputs are random draws of onnx's reference, which no other implementation reproduces"
)


def onnx_cases(kind: str) -> list[Case]:
    """Every ONNX backend test case of one kind, by name."""
    build = {"node": node_case, "real": light_case}.get(kind, stored_case)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # numpy's warnings while onnx computes its expected outputs
        tests = load_model_tests(kind=kind)
    return [build(test) for test in sorted(tests, key=lambda test: test.name)]


def node_case(test: TestCase) -> Case:
    """A case held in memory: its model and data sets come with the onnx wheel's code."""
    assert test.model is not None and test.data_sets is not None
    names = feed_names(test.model)
    feeds = [dict(zip(names, map(normalize, inputs), strict=False)) for inputs, _ in test.data_sets]
    expected = [[normalize(value) for value in outputs] for _, outputs in test.data_sets]
    return Case(
        test.name,
        test.kind,
        test.model.SerializeToString,
        run_feeds(lambda: feeds),
        lambda: expected,
        test.rtol,
        test.atol,
        RANDOM_REASON if test.name in RANDOM_DRAWS else "",
    )


def stored_case(test: TestCase) -> Case:
    """A case stored as a folder: ``model.onnx`` and ``test_data_set_*``."""
    assert test.model_dir is not None
    folder = Path(test.model_dir)
    data = functools.cache(lambda: read_data_sets(folder))
    return Case(
        test.name,
        test.kind,
        lambda: folder / "model.onnx",
        run_feeds(lambda: data()[0]),
        lambda: data()[1],
        test.rtol,
        test.atol,
    )


def light_case(test: TestCase, root: Path = ONNX_ROOT) -> Case:
    """A light real model: generated inputs, stored (or reference-evaluated) outputs."""
    assert test.url is not None
    path = (root / test.url).resolve()
    model = functools.cache(lambda: onnx.load(path))
    feeds = functools.cache(lambda: dummy_feeds(model()))
    return Case(
        test.name,
        test.kind,
        lambda: path,
        run_feeds(lambda: [feeds()]),
        lambda: [light_outputs(path, model(), feeds())],
        test.rtol,
        test.atol,
    )


def feed_names(model: onnx.ModelProto) -> list[str]:
    """The graph inputs a caller feeds, in order (inputs with an initializer are optional)."""
    initialized = {tensor.name for tensor in model.graph.initializer}
    return [value.name for value in model.graph.input if value.name not in initialized]


def normalize(value: Any) -> Any:
    """A test value as sessions take and return it: arrays, lists of them, or None."""
    if isinstance(value, onnx.TensorProto):
        return numpy_helper.to_array(value)
    if isinstance(value, np.generic):
        return np.asarray(value)
    if isinstance(value, list | tuple):
        return [normalize(item) for item in value]
    return value


def read_data_sets(folder: Path) -> tuple[list[dict[str, Any]], Runs]:
    """The feeds and expected outputs of every ``test_data_set_*`` in a case folder."""
    model = onnx.load(folder / "model.onnx", load_external_data=False)
    names = feed_names(model)
    inputs = {value.name: value for value in model.graph.input}
    feeds, expected = [], []
    for data_set in sorted(folder.glob("test_data_set_*")):
        values = [
            read_value(path, inputs[name].type)
            for name, path in zip(names, _numbered(data_set, "input"), strict=False)
        ]
        feeds.append(dict(zip(names, values, strict=False)))
        outputs = zip(model.graph.output, _numbered(data_set, "output"), strict=False)
        expected.append([read_value(path, value.type) for value, path in outputs])
    return feeds, expected


def _numbered(folder: Path, prefix: str) -> list[Path]:
    count = len(list(folder.glob(f"{prefix}_*.pb")))
    return [folder / f"{prefix}_{index}.pb" for index in range(count)]


def read_value(path: Path, value_type: onnx.TypeProto) -> Any:
    """A stored tensor, sequence or optional, read as the declared ``value_type`` says."""
    data = path.read_bytes()
    if value_type.HasField("sequence_type"):
        sequence = onnx.SequenceProto.FromString(data)
        return [normalize(item) for item in numpy_helper.to_list(sequence)]
    if value_type.HasField("optional_type"):
        return normalize(numpy_helper.to_optional(onnx.OptionalProto.FromString(data)))
    if value_type.HasField("tensor_type"):
        return numpy_helper.to_array(onnx.TensorProto.FromString(data))
    raise ValueError(f"{path}: values of type {value_type.WhichOneof('value')} cannot be read")


def dummy_feeds(model: onnx.ModelProto) -> dict[str, np.ndarray]:
    """onnx's inputs for light models: ``arange(n) / n`` as float32, unknown dims as 1."""
    initialized = {tensor.name for tensor in model.graph.initializer}
    feeds = {}
    for value in model.graph.input:
        if value.name in initialized:
            continue
        if value.type.tensor_type.elem_type != onnx.TensorProto.FLOAT:
            raise ValueError(f"light model input {value.name!r} is not a float tensor")
        shape = tuple(
            dim.dim_value if dim.HasField("dim_value") else 1 for dim in value.type.tensor_type.shape.dim
        )
        count = int(np.prod(shape))
        feeds[value.name] = (np.arange(count).reshape(shape) / count).astype(np.float32)
    return feeds


def light_outputs(path: Path, model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[Any]:
    """The stored outputs ``<model>_output_N.pb`` of a light model, or the reference evaluator's."""
    stored = [path.with_name(f"{path.stem}_output_{index}.pb") for index in range(len(model.graph.output))]
    if all(file.is_file() for file in stored):
        return [read_value(file, value.type) for file, value in zip(stored, model.graph.output, strict=True)]
    from onnx.reference import ReferenceEvaluator

    return list(ReferenceEvaluator(model).run(None, feeds))
