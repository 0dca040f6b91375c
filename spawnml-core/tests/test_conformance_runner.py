"""The conformance kit on mock plugins: outcomes, onnxruntime as reference, the suite, the CLI
and the pytest plugin.

Core's tests install no format plugin, so this module registers a minimal ONNX reader and
a ``tiny`` backend (numpy kernels for Add, a deliberately wrong Mul, and a failing mock
operator) next to conftest's mock plugins.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.backend.test.case.test_case import TestCase
from spawnml import InvalidArgumentError, PluginError, SpawnMLError, dtypes, plugins
from spawnml.backend import KernelTable
from spawnml.cli import main
from spawnml.conformance import Case, ExpectedFailures, SpawnMLTarget, Status, Verdict, load_cases, run_case
from spawnml.conformance.case import KINDS, MissingModelError, run_feeds
from spawnml.conformance.onnx_cases import RANDOM_DRAWS, RANDOM_REASON, light_case
from spawnml.conformance.properties import PROPERTIES, example, property_cases, variants
from spawnml.conformance.pytest_plugin import check_case, suite_params
from spawnml.conformance.references import reference_cases
from spawnml.conformance.runner import OnnxRuntimeTarget, Refusal, operators_of, reference_runs
from spawnml.conformance.suite import check_expectations, lane, run_suite
from spawnml.formats import FormatLoader, ModelSource
from spawnml.ir import Graph, Node, Value
from spawnml.models import ReferenceModel

MOCK_DOMAIN = "test.mock"
TINY_KERNELS = KernelTable()


@TINY_KERNELS.register("Add", since=7)
def _add(ctx, a, b):
    return a + b


@TINY_KERNELS.register("Mul", since=7)
def _wrong_mul(ctx, a, b):
    return a * b + np.ones((), a.dtype)


@TINY_KERNELS.register("Fails", MOCK_DOMAIN)
def _fails(ctx, x):
    raise ValueError("deliberate failure")


class MiniOnnx(FormatLoader):
    """Reads the one-graph ONNX models of these tests (no subgraphs, no external data)."""

    name = "mini-onnx"

    def sniff(self, head: bytes) -> bool:
        return True

    def load(self, source: ModelSource, limits) -> Graph:
        model = onnx.load_from_string(source.read(limits))
        graph = model.graph
        return Graph(
            nodes=[
                Node(
                    n.op_type,
                    list(n.input),
                    list(n.output),
                    {a.name: helper.get_attribute_value(a) for a in n.attribute},
                    n.name,
                    n.domain,
                )
                for n in graph.node
            ],
            inputs=[_value(v) for v in graph.input],
            outputs=[Value(v.name) for v in graph.output],
            initializers={t.name: numpy_helper.to_array(t) for t in graph.initializer},
            opset_imports={o.domain: o.version for o in model.opset_import},
        )


def _value(info: onnx.ValueInfoProto) -> Value:
    tensor = info.type.tensor_type
    return Value(info.name, dtypes.from_onnx(tensor.elem_type), tuple(d.dim_value for d in tensor.shape.dim))


def model_file(tmp_path: Path, op: str = "Add") -> Path:
    path = tmp_path / f"{op.lower()}.onnx"
    path.write_bytes(binary_model(op))
    return path


def drive_twice(session) -> list[np.ndarray]:
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    return [*session.run(None, {"a": a, "b": a}), *session.run(None, {"a": -a, "b": a})]


@pytest.fixture
def tiny(mock_plugins, tmp_path):
    """conftest's mock plugins plus the ``tiny`` backend, the ONNX reader and three reference models."""
    mock_class = type(plugins.backends()["mock"])

    class TinyBackend(mock_class):
        name = "tiny"
        kernels = TINY_KERNELS

    add_file = model_file(tmp_path, "Add")

    def unfetched() -> Path:
        raise SpawnMLError("asset not fetched: run scripts/fetch-models")

    class TinyPlugin:
        @plugins.hookimpl
        def register_backends(self, register):
            register(TinyBackend)

        @plugins.hookimpl
        def register_formats(self, register):
            register(MiniOnnx())

        @plugins.hookimpl
        def register_reference_models(self, register):
            register(ReferenceModel("tiny-add", lambda: add_file, drive_twice))
            register(ReferenceModel("tiny-gone", lambda: tmp_path / "gone.onnx", drive_twice))
            register(ReferenceModel("tiny-unfetched", unfetched, drive_twice))

    plugins.get_plugin_manager().register(TinyPlugin(), name="tiny")
    plugins.refresh()
    return TinyBackend


def binary_model(op: str, domain: str = "", inputs: int = 2) -> bytes:
    names = ["a", "b"][:inputs]
    graph = helper.make_graph(
        [helper.make_node(op, names, ["y"], domain=domain)],
        op.lower(),
        [helper.make_tensor_value_info(name, TensorProto.FLOAT, [2, 3]) for name in names],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
    )
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid(MOCK_DOMAIN, 1)]
    return helper.make_model(graph, opset_imports=opsets, ir_version=8).SerializeToString()


A = np.arange(6, dtype=np.float32).reshape(2, 3)
FEEDS = {"a": A, "b": A}


def case(name: str, model, expected=None, feeds=FEEDS) -> Case:
    source = model if callable(model) else (lambda: model)
    return Case(name, "node", source, run_feeds(lambda: [feeds]), expected, 1e-6, 0.0)


# -- one case -----------------------------------------------------------------------------


def test_outcomes_of_one_case(tiny):
    target = SpawnMLTarget("tiny")
    add = binary_model("Add")

    passed = run_case(case("add", add, lambda: [[A + A]]), target)
    assert (passed.status, passed.operators, passed.target) == (Status.PASS, ("Add",), "tiny")

    failed = run_case(case("add_wrong", add, lambda: [[A + A + 1]]), target)
    assert failed.status is Status.FAIL and "output 0" in failed.message and "Mismatched" in failed.message

    refused = run_case(case("sub", binary_model("Sub"), lambda: [[A - A]]), target)
    assert (refused.status, refused.refused) == (Status.REFUSED, ("Sub",))
    assert "ai.onnx::Sub (opset 17, 1 node): tiny: no tiny kernel" in refused.message

    broken = run_case(case("fails", binary_model("Fails", MOCK_DOMAIN, 1), lambda: [[A]], {"a": A}), target)
    assert broken.status is Status.ERROR
    assert (
        broken.message.startswith("run failed: ExecutionError: ") and "deliberate failure" in broken.message
    )

    unreadable = run_case(case("garbage", b"garbage", lambda: [[A]]), target)
    assert unreadable.status is Status.ERROR and unreadable.message.startswith("unreadable model: ")


def test_a_fallback_provider_runs_what_the_backend_refuses(tiny):
    plus = case("plus", binary_model("Plus", MOCK_DOMAIN), lambda: [[A + A]])
    assert run_case(plus, SpawnMLTarget("tiny")).status is Status.REFUSED
    assert run_case(plus, SpawnMLTarget("tiny", "mock")).status is Status.PASS


def test_missing_model_files_are_skipped(tiny):
    def missing() -> Path:
        raise MissingModelError("model x.onnx is not here")

    outcome = run_case(case("missing", missing, lambda: [[A]]), SpawnMLTarget("tiny"))
    assert (outcome.status, outcome.message) == (Status.SKIPPED, "model x.onnx is not here")


class RefusingTarget:
    name = "refusing"

    def __init__(self, operators):
        self.operators = operators

    def open(self, model):
        raise Refusal("no thanks", self.operators)


@pytest.mark.parametrize(
    ("named", "status", "message"),
    [
        (("Add",), Status.REFUSED, "no thanks"),
        (("Conv",), Status.ERROR, "refusal names ['Conv'], which the case does not use: no thanks"),
        ((), Status.ERROR, "refusal names no operator: no thanks"),
    ],
)
def test_refusals_must_name_operators_the_case_uses(named, status, message):
    outcome = run_case(case("add", binary_model("Add"), lambda: [[A]]), RefusingTarget(named))
    assert (outcome.status, outcome.message) == (status, message)


def test_operators_of_walks_subgraphs_and_functions():
    branch = helper.make_graph(
        [helper.make_node("Mul", ["x", "x"], ["z"])], "b", [], [helper.make_value_info("z", onnx.TypeProto())]
    )
    nodes = [
        helper.make_node("If", ["c"], ["y"], then_branch=branch, else_branch=branch),
        helper.make_node("Twice", ["y"], ["w"], domain="local"),
    ]
    function = helper.make_function(
        "local", "Twice", ["t"], ["u"], [helper.make_node("Add", ["t", "t"], ["u"])], []
    )
    graph = helper.make_graph(nodes, "g", [], [])
    model = helper.make_model(graph, functions=[function], opset_imports=[helper.make_opsetid("", 17)])
    assert operators_of(model.SerializeToString()) == ("Add", "If", "Mul", "local::Twice")


def test_onnxruntime_is_the_reference_when_a_case_has_no_expected_outputs(tiny):
    target = SpawnMLTarget("tiny")
    assert run_case(case("add", binary_model("Add")), target).status is Status.PASS
    wrong = run_case(case("mul", binary_model("Mul")), target)
    assert wrong.status is Status.FAIL and "Mismatched elements: 6 / 6" in wrong.message


# -- cases ------------------------------------------------------------------------------------


def test_property_cases_are_named_once_and_reproducible():
    first, second = property_cases(), property_cases()
    names = [c.name for c in first]
    assert len(names) == len(set(names)) > 400
    assert all(c.kind == "property" and c.expected is None for c in first)
    assert [c.model() for c in first] == [c.model() for c in second]
    assert {
        "property_Add_float32_broadcast",
        "property_MatMul_int64_empty",
        "property_Gather_bool_random",
    } <= set(names)
    assert not any(name.endswith("_special") and "int" in name for name in names)


def test_special_variants_hold_special_values():
    specials = [
        (prop, dtype) for prop in PROPERTIES for dtype, variant in variants(prop) if variant == "special"
    ]
    assert len(specials) > 100
    for prop, dtype in specials:
        operands, _ = example(prop, dtype, "special")
        floats = [array for array, constant in operands if array.dtype.kind == "f" and not constant]
        assert all((~np.isfinite(array) | (array == 0)).any() for array in floats), (prop.op, dtype)


def test_onnxruntime_runs_every_property_case():
    for found in property_cases():
        assert reference_runs(found, found.model()), found.name


def test_reference_models_become_cases(tiny):
    cases = {found.name: found for found in reference_cases()}
    assert list(cases) == ["tiny-add", "tiny-gone", "tiny-unfetched"]
    target = SpawnMLTarget("tiny")
    assert run_case(cases["tiny-add"], target).status is Status.PASS
    gone = run_case(cases["tiny-gone"], target)
    assert gone.status is Status.SKIPPED and gone.message.endswith("gone.onnx does not exist")
    unfetched = run_case(cases["tiny-unfetched"], target)
    assert unfetched.status is Status.SKIPPED and "run scripts/fetch-models" in unfetched.message


def test_load_cases_by_kind_and_name(tiny):
    assert [c.name for c in load_cases(["model"])] == ["tiny-add", "tiny-gone", "tiny-unfetched"]
    picked = load_cases(["model", "property"], match="^(tiny-add|property_Add_float32_random)$")
    assert [c.name for c in picked] == ["property_Add_float32_random", "tiny-add"]
    with pytest.raises(InvalidArgumentError, match=r"unknown case kind\(s\) \['nodes'\]"):
        load_cases(["nodes"])


def test_node_cases_with_random_expected_outputs_are_not_judged(tiny):
    cases = {found.name: found for found in load_cases(["node"], match="bernoulli|dropout")}
    assert {name for name, found in cases.items() if found.skip} == RANDOM_DRAWS
    outcome = run_case(cases["test_bernoulli"], SpawnMLTarget("tiny"))
    assert (outcome.status, outcome.message, outcome.operators) == (
        Status.SKIPPED,
        RANDOM_REASON,
        ("Bernoulli",),
    )
    assert not cases["test_training_dropout_zero_ratio"].skip


def test_onnx_cases_load_by_kind():
    simple = load_cases(["simple"])
    assert len(simple) == len(onnx.backend.test.loader.load_model_tests(kind="simple"))
    real = {c.name: c for c in load_cases(["real"])}
    light = real["test_squeezenet"]
    assert isinstance(light.model(), Path) and light.model().is_file()
    (outputs,) = light.expected()
    assert outputs[0].dtype == np.float32


def test_light_models_without_stored_outputs_are_checked_against_the_reference_evaluator(tmp_path):
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])],
        "light",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 4])],
    )
    folder = tmp_path / "onnx/backend/test/data/light"
    folder.mkdir(parents=True)
    onnx.save(
        helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), folder / "light_relu.onnx"
    )
    test = TestCase(
        "test_relu",
        "relu",
        "onnx/backend/test/data/light/light_relu.onnx",
        None,
        None,
        None,
        "real",
        1e-3,
        1e-7,
    )
    light = light_case(test, root=tmp_path)
    feeds = np.arange(4, dtype=np.float32).reshape(1, 4) / 4
    (outputs,) = light.expected()
    np.testing.assert_array_equal(outputs[0], feeds)
    assert run_case(light, OnnxRuntimeTarget()).status is Status.PASS


# -- the suite ------------------------------------------------------------------------------


def test_suite_applies_expected_failures_and_counts_onnxruntime(tiny):
    cases = [
        case("test_add", binary_model("Add"), lambda: [[A + A]]),
        case("test_mul", binary_model("Mul"), lambda: [[A * A]]),
        case("test_add_listed", binary_model("Add"), lambda: [[A + A]]),
        case("property_mul", binary_model("Mul")),
        Case(
            "random",
            "node",
            lambda: binary_model("Add"),
            run_feeds(lambda: [FEEDS]),
            lambda: [[A]],
            0,
            0,
            "why",
        ),
    ]
    expected = ExpectedFailures({"test_mul": "tiny's Mul adds one", "test_add_listed": "stale"}, "test")
    heard = []
    results = run_suite("tiny", cases, expected, True, lambda index, result: heard.append(index))
    assert heard == [0, 1, 2, 3, 4]
    verdicts = [Verdict.PASS, Verdict.EXPECTED, Verdict.UNEXPECTED_PASS, Verdict.FAIL, Verdict.SKIPPED]
    assert [r.verdict for r in results] == verdicts
    assert results[1].reason == "tiny's Mul adds one"
    assert [r.onnxruntime and r.onnxruntime.status for r in results] == [Status.PASS] * 3 + [None, None]


def test_command_prints_tables_and_writes_reports(tiny, tmp_path, capsys):
    out = tmp_path / "report"
    args = [
        "conformance",
        "--backend",
        "tiny",
        "--kind",
        "property",
        "--out",
        str(out),
        "--compare-onnxruntime",
    ]
    assert main([*args, "--match", "^property_Add_float32_"]) == 0
    captured = capsys.readouterr()
    assert "4 cases on backend tiny" in captured.err and "wrote " in captured.err
    assert captured.out.splitlines()[-1].startswith("PASSED: 4 cases: 4 pass")
    assert "onnxruntime pass" in captured.out
    assert (out / "conformance-tiny.json").is_file() and (out / "conformance-tiny.md").is_file()

    assert main([*args, "--match", "^property_(Add|Mul)_float32_random$"]) == 1
    assert "property/property_Mul_float32_random: fail:" in capsys.readouterr().out


def test_command_refuses_unavailable_backends(tiny, capsys):
    assert main(["conformance", "--backend", "absent"]) == 1
    assert "provider 'absent' is installed but unavailable: no absent device here" in capsys.readouterr().err


def test_command_names_missing_dependencies(tiny, capsys, monkeypatch):
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name: None if name == "onnxruntime" else real_find_spec(name)
    )
    assert main(["conformance", "--backend", "tiny"]) == 1
    err = capsys.readouterr().err
    assert "the conformance kit needs ['onnxruntime']: pip install 'spawnml-core[conformance]'" in err


# -- the pytest plugin ------------------------------------------------------------------------


def test_check_case_passes_skips_and_fails(tiny, monkeypatch):
    monkeypatch.delenv("SPAWNML_REQUIRE_MODELS", raising=False)  # CI sets it; set below on purpose
    check_case("tiny", case("add", binary_model("Add"), lambda: [[A + A]]))
    with pytest.raises(
        pytest.skip.Exception,
        match=r"refused: 1 operator\(s\) not supported by providers \['tiny'\]: ai\.onnx::Sub",
    ):
        check_case("tiny", case("sub", binary_model("Sub")))
    with pytest.raises(pytest.fail.Exception, match="fail: Not equal to tolerance"):
        check_case("tiny", case("mul", binary_model("Mul")))
    missing = next(c for c in reference_cases() if c.name == "tiny-gone")
    with pytest.raises(pytest.skip.Exception, match="does not exist"):
        check_case("tiny", missing)
    monkeypatch.setenv("SPAWNML_REQUIRE_MODELS", "1")
    with pytest.raises(pytest.fail.Exception, match=r"SPAWNML_REQUIRE_MODELS=1 and .*does not exist"):
        check_case("tiny", missing)
    unjudged = Case(
        "random", "node", lambda: binary_model("Add"), run_feeds(lambda: [FEEDS]), None, 0, 0, "why"
    )
    with pytest.raises(pytest.skip.Exception, match="why"):
        check_case("tiny", unjudged)


def test_check_case_fails_on_unlisted_refusals_and_listed_refusals_that_load(tiny, tmp_path, monkeypatch):
    file = tmp_path / "expected.toml"
    file.write_text('[refusals]\nsub = "tiny has no Sub"\nadd = "stale"\n', encoding="utf-8")
    monkeypatch.setattr(tiny, "expected_failures", file)
    with pytest.raises(pytest.skip.Exception, match=r"refused: .*ai\.onnx::Sub"):
        check_case("tiny", case("sub", binary_model("Sub")))
    with pytest.raises(
        pytest.fail.Exception, match=r"refused, and not listed in .*expected\.toml \[refusals\]"
    ):
        check_case("tiny", case("div", binary_model("Div")))
    with pytest.raises(
        pytest.fail.Exception, match=r"pass; listed as an expected refusal \(stale\): remove it"
    ):
        check_case("tiny", case("add", binary_model("Add"), lambda: [[A + A]]))


def test_native_only_lanes_hold_the_cases_of_the_backends_own_operators(tiny):
    cases = [case("test_add", binary_model("Add")), case("test_sub", binary_model("Sub"))]
    backend = plugins.backends()["tiny"]
    native_only = ExpectedFailures.parse("[suite]\nnative_only = true\n", "test")
    assert [c.name for c in lane(backend, cases, native_only)] == ["test_add"]
    assert lane(backend, cases, ExpectedFailures()) == cases


def test_suite_params_mark_expected_failures_and_unavailable_backends(tiny, tmp_path, monkeypatch):
    file = tmp_path / "expected.toml"
    file.write_text('[cases]\ntiny-gone = "never fetched"\n', encoding="utf-8")
    monkeypatch.setattr(tiny, "expected_failures", file)
    params = list(suite_params(["absent", "tiny"], ["model"]))
    assert [p.id for p in params] == ["absent", "tiny-tiny-add", "tiny-tiny-gone", "tiny-tiny-unfetched"]
    (skip,) = params[0].marks
    assert skip.name == "skip" and skip.kwargs["reason"] == "absent: no absent device here"
    assert not params[1].marks
    (xfail,) = params[2].marks
    assert xfail.name == "xfail" and xfail.kwargs == {"strict": True, "reason": "never fetched"}
    with pytest.raises(pytest.UsageError, match="--backend 'nope' is not installed"):
        list(suite_params(["nope"]))


def run_pytest(folder: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "--rootdir",
        str(folder),
        *args,
    ]
    return subprocess.run(command, cwd=folder, capture_output=True, text=True, env=env, timeout=120)


def test_plugin_is_inert_in_other_pytest_runs(tmp_path):
    (tmp_path / "test_other.py").write_text(
        "import sys\n"
        "def test_nothing_of_the_kit_loaded():\n"
        "    assert 'spawnml.conformance.pytest_plugin' in sys.modules\n"
        "    assert not {'onnx', 'onnxruntime', 'spawnml.conformance.runner'} & set(sys.modules)\n",
        encoding="utf-8",
    )
    result = run_pytest(tmp_path, "--backend", "cpu")
    assert "1 passed" in result.stdout, result.stdout + result.stderr


def test_suite_without_a_backend_is_one_skip(tmp_path):
    result = run_pytest(tmp_path, "--pyargs", "spawnml.conformance", "-rs")
    assert "1 skipped" in result.stdout and "run the conformance suite with --backend NAME" in result.stdout


def test_entries_that_name_no_case_fail_the_suite(tiny, tmp_path, monkeypatch, capsys):
    file = tmp_path / "expected.toml"
    file.write_text('[cases]\ntest_add = "x"\ntest_mull = "misspelt"\n[refusals]\ntest_gone = "renamed"\n')
    monkeypatch.setattr(tiny, "expected_failures", file)
    expected = ExpectedFailures.read(file)
    cases = [case("test_add", binary_model("Add")), case("test_sub", binary_model("Sub"))]
    message = (
        f"expected-failures file {file}: 2 entries name no case of the suite: "
        "['test_gone', 'test_mull']; correct or remove them"
    )
    with pytest.raises(PluginError) as raised:
        check_expectations(expected, cases, KINDS)
    assert str(raised.value) == message
    check_expectations(expected, cases, ["node"])  # some kinds only: the others' names are unknown
    check_expectations(expected, cases, KINDS, "add")

    monkeypatch.setattr("spawnml.conformance.suite.load_cases", lambda kinds, match=None: cases)
    with pytest.raises(PluginError, match="2 entries name no case of the suite"):
        list(suite_params(["tiny"]))
    assert main(["conformance", "--backend", "tiny"]) == 1
    assert f"spawnml: error: {message}" in capsys.readouterr().err
