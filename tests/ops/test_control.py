"""Control flow, sequences and optionals: against the ONNX node test data and onnxruntime.

Sequences are fed and returned as lists of arrays and an empty optional as None, as in
onnxruntime. Where onnxruntime has no kernel for an opset (the optional operators at
opset 28), the ONNX node test data is the reference.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable

import numpy as np
import onnx
import onnxruntime
import pytest
import spawnml
from onnx import TensorProto, helper, numpy_helper
from onnx.backend.test.loader import load_model_tests
from onnx.reference import ReferenceEvaluator
from spawnml.ir import OPTIONAL, SEQUENCE

from tests.ops.conftest import assert_inferred_shapes

FLOAT, INT64, BOOL = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL
RTOL, ATOL = 1e-6, 1e-7  # float32 sums and products in a few orders of evaluation

# ---------------------------------------------------------------------------- helpers


def tensor(name: str, elem: int = FLOAT, shape=None) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, elem, shape)


def sequence(name: str, elem: int = FLOAT, shape=None) -> onnx.ValueInfoProto:
    return helper.make_tensor_sequence_value_info(name, elem, shape)


def optional(name: str, inner: onnx.TypeProto) -> onnx.ValueInfoProto:
    return helper.make_value_info(name, helper.make_optional_type_proto(inner))


def graph(nodes, inputs, outputs, initializers=None, name="g") -> onnx.GraphProto:
    initial = [numpy_helper.from_array(array, key) for key, array in (initializers or {}).items()]
    return helper.make_graph(nodes, name, inputs, outputs, initial)


def model(nodes, inputs, outputs, initializers=None, opset: int = 17) -> onnx.ModelProto:
    body = graph(nodes, inputs, outputs, initializers)
    return helper.make_model(body, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


def run_spawnml(proto: onnx.ModelProto, feeds: dict) -> list:
    return spawnml.InferenceSession(proto.SerializeToString()).run(None, feeds)


def run_onnxruntime(proto: onnx.ModelProto, feeds: dict) -> list:
    session = onnxruntime.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def run_reference(proto: onnx.ModelProto, feeds: dict) -> list:
    """onnx's reference evaluator, for cases onnxruntime gets wrong."""
    return ReferenceEvaluator(proto).run(None, feeds)


def assert_same(got, want, rtol: float = RTOL, atol: float = ATOL) -> None:
    """Equal values: arrays of the same dtype and shape, lists item by item, None for None."""
    if want is None or isinstance(want, list):
        assert type(got) is type(want), f"got {type(got).__name__}, expected {type(want).__name__}"
        assert want is None or len(got) == len(want), f"{len(got)} items, expected {len(want)}"
        for item, expected in zip(got or [], want or [], strict=True):
            assert_same(item, expected, rtol, atol)
        return
    got, want = np.asarray(got), np.asarray(want)
    assert (got.dtype, got.shape) == (want.dtype, want.shape), (
        f"{got.dtype}{got.shape} != {want.dtype}{want.shape}"
    )
    if want.dtype.kind in "fc":
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)
    else:
        np.testing.assert_array_equal(got, want)


def compare(proto: onnx.ModelProto, feeds: dict, reference: Callable = run_onnxruntime) -> list:
    """Run on SpawnML and a reference (onnxruntime unless given); outputs and inferred types must agree."""
    ours, expected = run_spawnml(proto, feeds), reference(proto, feeds)
    assert len(ours) == len(expected)
    for got, want in zip(ours, expected, strict=True):
        assert_same(got, want)
    assert_inferred_shapes(proto, expected)
    return ours


def arange(*shape: int) -> np.ndarray:
    return np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)


def const(name: str, array) -> onnx.NodeProto:
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.asarray(array)))


# ---------------------------------------------------------------------------- ONNX node test data

NODE_CASES = (
    "test_if",
    "test_if_seq",
    "test_if_opt",
    "test_loop11",
    "test_loop13_seq",
    "test_loop16_seq_none",
    "test_scan_sum",
    "test_scan9_sum",
    "test_scan9_multi_state",
    "test_scan9_scalar",
    "test_sequence_insert_at_back",
    "test_sequence_insert_at_front",
    "test_split_to_sequence_1",
    "test_split_to_sequence_2",
    "test_split_to_sequence_nokeepdims",
    "test_identity_sequence",
    "test_identity_opt",
    *(
        f"test_range_{kind}_expanded"
        for kind in (
            "float_type_positive_delta",
            "float16_type_positive_delta",
            "bfloat16_type_positive_delta",
            "int32_type_negative_delta",
        )
    ),
    *(
        f"test_sequence_map_{kind}{suffix}"
        for kind in (
            "identity_1_sequence",
            "identity_2_sequences",
            "identity_1_sequence_1_tensor",
            "add_2_sequences",
            "add_1_sequence_1_tensor",
            "extract_shapes",
        )
        for suffix in ("", "_expanded")
    ),
    *(
        f"test_optional_get_element_{kind}"
        for kind in ("tensor", "sequence", "optional_tensor", "optional_sequence")
    ),
    *(
        f"test_optional_has_element_{kind}"
        for kind in (
            "tensor_input",
            "optional_input",
            "empty_optional_input",
            "empty_no_input_tensor_input",
            "empty_no_input_optional_input",
            "empty_no_input_name_tensor_input",
            "empty_no_input_name_optional_input",
        )
    ),
)


#: Cases that cannot pass yet, each with the reason.
NODE_CASES_FAILING: dict[str, str] = {}


@functools.cache
def node_cases() -> dict:
    wanted = {*NODE_CASES, *NODE_CASES_FAILING}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # some case generators overflow on purpose
        return {case.name: case for case in load_model_tests(kind="node") if case.name in wanted}


@pytest.mark.parametrize(
    "name",
    [
        *NODE_CASES,
        *(
            pytest.param(name, marks=pytest.mark.xfail(reason=reason, strict=True))
            for name, reason in NODE_CASES_FAILING.items()
        ),
    ],
)
def test_onnx_node_case(name):
    case = node_cases()[name]
    session = spawnml.InferenceSession(case.model.SerializeToString())
    names = [value.name for value in case.model.graph.input]
    for inputs, outputs in case.data_sets:
        got = session.run(None, dict(zip(names, inputs, strict=False)))
        assert len(got) == len(outputs)
        for value, expected in zip(got, outputs, strict=True):
            assert_same(value, expected, case.rtol, case.atol)


# ---------------------------------------------------------------------------- If


def branch(name: str, nodes, outputs) -> onnx.GraphProto:
    return graph(nodes, [], outputs, name=name)


@pytest.mark.parametrize("flag", [True, False, np.array([True]), np.array([False])])
def test_if_picks_a_branch_reading_outer_values_with_different_shapes(flag):
    then_branch = branch("then", [helper.make_node("Add", ["x", "x"], ["t"])], [tensor("t", FLOAT, [2, 3])])
    else_branch = branch(
        "else", [helper.make_node("ReduceSum", ["x"], ["e"], keepdims=0)], [tensor("e", FLOAT, [])]
    )
    node = helper.make_node("If", ["c"], ["y"], then_branch=then_branch, else_branch=else_branch)
    cond = np.asarray(flag)
    proto = model([node], [tensor("c", BOOL, list(cond.shape)), tensor("x", FLOAT, [2, 3])], [tensor("y")])
    compare(proto, {"c": cond, "x": arange(2, 3)})


def test_if_with_several_outputs_nested_and_a_sequence():
    inner = helper.make_node(
        "If",
        ["c2"],
        ["z"],
        then_branch=branch("t2", [helper.make_node("Neg", ["x"], ["n"])], [tensor("n")]),
        else_branch=branch("e2", [helper.make_node("Abs", ["x"], ["a"])], [tensor("a")]),
    )
    then_branch = branch(
        "then",
        [inner, helper.make_node("SequenceConstruct", ["z", "x"], ["s"])],
        [tensor("z"), sequence("s")],
    )
    else_branch = branch(
        "else",
        [helper.make_node("Identity", ["x"], ["i"]), helper.make_node("SequenceConstruct", ["x"], ["s2"])],
        [tensor("i"), sequence("s2")],
    )
    node = helper.make_node("If", ["c"], ["y", "seq"], then_branch=then_branch, else_branch=else_branch)
    inputs = [tensor("c", BOOL, []), tensor("c2", BOOL, []), tensor("x", FLOAT, [3])]
    proto = model([node], inputs, [tensor("y"), sequence("seq")])
    x = np.array([-1, 2, -3], np.float32)
    for c, c2 in [(True, True), (True, False), (False, True)]:
        compare(proto, {"c": np.array(c), "c2": np.array(c2), "x": x})


def test_if_shape_inference_keeps_what_both_branches_share():
    then_branch = branch("then", [helper.make_node("Add", ["x", "x"], ["t"])], [tensor("t", FLOAT, [2, 3])])
    else_branch = branch("else", [helper.make_node("Sub", ["x", "x"], ["e"])], [tensor("e", FLOAT, [2, 4])])
    node = helper.make_node("If", ["c"], ["y"], then_branch=then_branch, else_branch=else_branch)
    proto = model([node], [tensor("c", BOOL, []), tensor("x", FLOAT, [2, 3])], [tensor("y")])
    types = spawnml.passes.infer_shapes(spawnml.load(proto.SerializeToString()))
    assert types["y"] == (np.dtype(np.float32), (2, None))


# ---------------------------------------------------------------------------- Loop


def counting_body(stop_after: int | None = None) -> onnx.GraphProto:
    """Body: ``x += i``, scan out ``x * 2`` and ``i``; the condition turns false after ``stop_after``."""
    nodes = [
        helper.make_node("Cast", ["i"], ["i_f"], to=FLOAT),
        helper.make_node("Add", ["x", "i_f"], ["x_out"]),
        helper.make_node("Mul", ["x_out", "two"], ["doubled"]),
        helper.make_node("Identity", ["i"], ["i_out"]),
    ]
    if stop_after is None:
        nodes.append(helper.make_node("Identity", ["c_in"], ["c_out"]))
    else:
        nodes += [const("limit", np.int64(stop_after)), helper.make_node("Less", ["i", "limit"], ["c_out"])]
    return graph(
        nodes,
        [tensor("i", INT64, []), tensor("c_in", BOOL, []), tensor("x", FLOAT, [2])],
        [
            tensor("c_out", BOOL, []),
            tensor("x_out", FLOAT, [2]),
            tensor("doubled", FLOAT, [2]),
            tensor("i_out", INT64, []),
        ],
        name="body",
    )


def loop_model(body: onnx.GraphProto, trip: bool, cond: bool) -> onnx.ModelProto:
    node = helper.make_node(
        "Loop", ["M" if trip else "", "cond" if cond else "", "x0"], ["x", "xs", "is"], body=body
    )
    inputs = [tensor("x0", FLOAT, [2])]
    inputs += [tensor("M", INT64, [])] if trip else []
    inputs += [tensor("cond", BOOL, [])] if cond else []
    return model(
        [node], inputs, [tensor("x"), tensor("xs"), tensor("is", INT64)], {"two": np.float32([2, 2])}
    )


@pytest.mark.parametrize(
    ("trip", "cond", "stop_after", "feeds"),
    [
        (True, False, None, {"M": 5}),
        (True, False, None, {"M": 0}),
        (True, False, 2, {"M": 6}),
        (False, True, 3, {"cond": True}),
        (False, True, 3, {"cond": False}),
        (True, True, None, {"M": 4, "cond": True}),
        (True, True, 1, {"M": 4, "cond": True}),
        (True, True, None, {"M": 4, "cond": False}),
        (False, False, 4, {}),
    ],
)
def test_loop_bounds_carried_values_and_scan_outputs(trip, cond, stop_after, feeds):
    proto = loop_model(counting_body(stop_after), trip, cond)
    given = {"x0": np.float32([1, -1])}
    given |= {key: np.array(value, np.int64 if key == "M" else np.bool_) for key, value in feeds.items()}
    compare(proto, given)


def test_loop_reads_outer_values_and_carries_a_sequence():
    body = graph(
        [
            helper.make_node("Identity", ["c_in"], ["c_out"]),
            helper.make_node("Mul", ["outer", "i"], ["scaled"]),
            helper.make_node("SequenceInsert", ["s_in", "scaled"], ["s_out"]),
        ],
        [tensor("i", INT64, []), tensor("c_in", BOOL, []), sequence("s_in", INT64)],
        [tensor("c_out", BOOL, []), sequence("s_out", INT64)],
        name="body",
    )
    nodes = [
        helper.make_node("SequenceEmpty", [], ["empty"], dtype=INT64),
        helper.make_node("Loop", ["M", "", "empty"], ["s"], body=body),
    ]
    proto = model(nodes, [tensor("M", INT64, []), tensor("outer", INT64, [3])], [sequence("s", INT64)])
    compare(proto, {"M": np.array(4, np.int64), "outer": np.array([1, 2, 3], np.int64)})


# ---------------------------------------------------------------------------- Scan


def scan_body() -> onnx.GraphProto:
    """Body: state ``s += a * b``; scan outputs ``s`` and ``a - b``."""
    return graph(
        [
            helper.make_node("Mul", ["a", "b"], ["ab"]),
            helper.make_node("Add", ["s", "ab"], ["s_out"]),
            helper.make_node("Sub", ["a", "b"], ["d"]),
            helper.make_node("Identity", ["s_out"], ["s_copy"]),
        ],
        [tensor("s", FLOAT, [3]), tensor("a", FLOAT, [3]), tensor("b", FLOAT, [3])],
        [tensor("s_out", FLOAT, [3]), tensor("s_copy", FLOAT, [3]), tensor("d", FLOAT, [3])],
        name="body",
    )


@pytest.mark.parametrize(
    ("opset", "attrs", "a_shape", "b_shape"),
    [
        (9, {}, (4, 3), (4, 3)),
        (9, {"scan_input_axes": [1, 0]}, (3, 4), (4, 3)),
        (9, {"scan_input_directions": [1, 0]}, (4, 3), (4, 3)),
        (9, {"scan_output_axes": [1, 0], "scan_output_directions": [0, 1]}, (4, 3), (4, 3)),
        (11, {"scan_input_axes": [-1, 0], "scan_output_axes": [-1, -2]}, (3, 4), (4, 3)),
        (16, {"scan_input_directions": [1, 1], "scan_output_directions": [1, 1]}, (5, 3), (5, 3)),
    ],
)
def test_scan_axes_and_directions(opset, attrs, a_shape, b_shape):
    node = helper.make_node(
        "Scan", ["s0", "a", "b"], ["s", "ss", "ds"], body=scan_body(), num_scan_inputs=2, **attrs
    )
    inputs = [tensor("s0", FLOAT, [3]), tensor("a", FLOAT, list(a_shape)), tensor("b", FLOAT, list(b_shape))]
    proto = model([node], inputs, [tensor("s"), tensor("ss"), tensor("ds")], opset=opset)
    feeds = {"s0": np.float32([1, 2, 3]), "a": arange(*a_shape) / 7, "b": -arange(*b_shape) / 5}
    compare(proto, feeds)


@pytest.mark.parametrize(("axes", "empty_shapes"), [([0, 0], [(0, 3), (0, 3)]), ([1, -2], [(3, 0), (0, 3)])])
def test_scan_of_length_zero_keeps_states_and_gives_empty_outputs(axes, empty_shapes):
    """onnxruntime and onnx's reference evaluator refuse this case: the spec's answer is written out."""
    node = helper.make_node(
        "Scan",
        ["s0", "a", "b"],
        ["s", "ss", "ds"],
        body=scan_body(),
        num_scan_inputs=2,
        scan_output_axes=axes,
    )
    inputs = [tensor("s0", FLOAT, [3]), tensor("a", FLOAT, [0, 3]), tensor("b", FLOAT, [0, 3])]
    proto = model([node], inputs, [tensor("s"), tensor("ss"), tensor("ds")], opset=11)
    got = run_spawnml(proto, {"s0": np.float32([1, 2, 3]), "a": arange(0, 3), "b": arange(0, 3)})
    assert_same(got, [np.float32([1, 2, 3]), *(np.empty(shape, np.float32) for shape in empty_shapes)])


@pytest.mark.parametrize("lengths", [None, [3, 1, 4]])
@pytest.mark.parametrize("directions", [None, [0, 1]])
def test_scan8_batches_with_sequence_lengths_and_directions(lengths, directions):
    attrs = {"directions": directions} if directions else {}
    node = helper.make_node(
        "Scan",
        ["lens" if lengths else "", "s0", "a", "b"],
        ["s", "ss", "ds"],
        body=scan_body(),
        num_scan_inputs=2,
        **attrs,
    )
    inputs = [tensor("s0", FLOAT, [3, 3]), tensor("a", FLOAT, [3, 4, 3]), tensor("b", FLOAT, [3, 4, 3])]
    inputs += [tensor("lens", INT64, [3])] if lengths else []
    proto = model([node], inputs, [tensor("s"), tensor("ss"), tensor("ds")], opset=8)
    feeds = {"s0": arange(3, 3), "a": arange(3, 4, 3) / 7, "b": -arange(3, 4, 3) / 5}
    feeds |= {"lens": np.array(lengths, np.int64)} if lengths else {}
    compare(proto, feeds)


def test_scan_shape_inference_inserts_the_scan_length():
    node = helper.make_node(
        "Scan",
        ["s0", "a", "b"],
        ["s", "ss", "ds"],
        body=scan_body(),
        num_scan_inputs=2,
        scan_output_axes=[1, 0],
    )
    inputs = [tensor("s0", FLOAT, [3]), tensor("a", FLOAT, [4, 3]), tensor("b", FLOAT, [4, 3])]
    proto = model([node], inputs, [tensor("s"), tensor("ss"), tensor("ds")])
    types = spawnml.passes.infer_shapes(spawnml.load(proto.SerializeToString()))
    assert [types[name].shape for name in ("s", "ss", "ds")] == [(3,), (3, 4), (4, 3)]


# ---------------------------------------------------------------------------- sequences


def sequence_model(nodes, inputs, output: str = "y", output_type=None, opset: int = 17) -> onnx.ModelProto:
    return model(nodes, inputs, [output_type or sequence(output)], opset=opset)


PIECES = [arange(2, 3), arange(1, 3) + 10, arange(4, 3) - 5]


@pytest.mark.parametrize("position", [None, 0, 2, 3, -1, -3])
def test_sequence_insert(position):
    inputs = ["s", "t"] + (["p"] if position is not None else [])
    node = helper.make_node("SequenceInsert", inputs, ["y"])
    declared = [sequence("s", FLOAT, None), tensor("t", FLOAT, [2, 3])] + (
        [tensor("p", INT64, [])] * (position is not None)
    )
    feeds = {"s": PIECES, "t": arange(2, 3) * 3} | (
        {"p": np.array(position, np.int64)} if position is not None else {}
    )
    compare(sequence_model([node], declared), feeds)


@pytest.mark.parametrize("position", [None, 0, 1, -1, -3])
def test_sequence_erase(position):
    inputs = ["s"] + (["p"] if position is not None else [])
    declared = [sequence("s")] + ([tensor("p", TensorProto.INT32, [])] * (position is not None))
    feeds = {"s": PIECES} | ({"p": np.array(position, np.int32)} if position is not None else {})
    compare(sequence_model([helper.make_node("SequenceErase", inputs, ["y"])], declared), feeds)


@pytest.mark.parametrize("position", [0, 2, -1, -3])
def test_sequence_at_and_length(position):
    nodes = [
        helper.make_node("SequenceAt", ["s", "p"], ["y"]),
        helper.make_node("SequenceLength", ["s"], ["n"]),
    ]
    proto = model(nodes, [sequence("s"), tensor("p", INT64, [])], [tensor("y"), tensor("n", INT64)])
    compare(proto, {"s": PIECES, "p": np.array(position, np.int64)})


@pytest.mark.parametrize("position", [3, -4])
def test_sequence_at_out_of_range_fails(position):
    proto = model(
        [helper.make_node("SequenceAt", ["s", "p"], ["y"])],
        [sequence("s"), tensor("p", INT64, [])],
        [tensor("y")],
    )
    with pytest.raises(spawnml.ExecutionError, match="out of range"):
        run_spawnml(proto, {"s": PIECES, "p": np.array(position, np.int64)})


@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.bool_, np.float16])
def test_sequence_construct_and_empty(dtype):
    code = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    nodes = [
        helper.make_node("SequenceConstruct", ["a", "b"], ["y"]),
        helper.make_node("SequenceEmpty", [], ["e"], dtype=code),
        helper.make_node("SequenceLength", ["e"], ["n"]),
    ]
    proto = model(
        nodes, [tensor("a", code, [2]), tensor("b", code, [3])], [sequence("y", code), tensor("n", INT64)]
    )
    compare(proto, {"a": np.ones(2, dtype), "b": np.zeros(3, dtype)})


@pytest.mark.parametrize(
    ("axis", "new_axis", "shapes"),
    [
        (0, 0, [(2, 3), (1, 3), (4, 3)]),
        (-1, 0, [(2, 1), (2, 3)]),
        (0, 1, [(2, 3), (2, 3)]),
        (2, 1, [(2, 3), (2, 3)]),
        (-1, 1, [(2, 3), (2, 3)]),
        (-3, 1, [(2, 3), (2, 3)]),
    ],
)
def test_concat_from_sequence(axis, new_axis, shapes):
    node = helper.make_node("ConcatFromSequence", ["s"], ["y"], axis=axis, new_axis=new_axis)
    proto = model([node], [sequence("s")], [tensor("y")])
    compare(proto, {"s": [arange(*shape) + i for i, shape in enumerate(shapes)]})


@pytest.mark.parametrize(
    ("split", "axis", "keepdims"),
    [
        (None, 0, 1),
        (None, 1, 0),
        (None, -1, 1),
        (np.array(2, np.int64), 1, 1),
        (np.array(4, np.int32), 1, 1),
        (np.array([1, 4, 0, 1], np.int64), 1, 1),
        (np.array([3, 1], np.int32), 0, 0),
    ],
)
def test_split_to_sequence(split, axis, keepdims):
    inputs = ["x"] + (["split"] if split is not None else [])
    node = helper.make_node("SplitToSequence", inputs, ["y"], axis=axis, keepdims=keepdims)
    initializers = {"split": split} if split is not None else {}
    proto = model([node], [tensor("x", FLOAT, [4, 6])], [sequence("y")], initializers)
    compare(proto, {"x": arange(4, 6)})


def test_split_to_sequence_ignores_keepdims_when_split_is_given():
    """onnxruntime fails on a scalar split with keepdims=0; onnx's reference evaluator is the reference."""
    node = helper.make_node("SplitToSequence", ["x", "split"], ["y"], axis=1, keepdims=0)
    proto = model([node], [tensor("x", FLOAT, [4, 6])], [sequence("y")], {"split": np.array(4, np.int64)})
    compare(proto, {"x": arange(4, 6)}, reference=run_reference)


def test_sequence_map_with_a_tensor_and_a_sequence_input():
    body = graph(
        [helper.make_node("Add", ["a", "b"], ["sum"]), helper.make_node("Shape", ["a"], ["shape"])],
        [tensor("a"), tensor("b")],
        [tensor("sum"), tensor("shape", INT64, [1])],
        name="body",
    )
    node = helper.make_node("SequenceMap", ["s", "t"], ["sums", "shapes"], body=body)
    proto = model(
        [node], [sequence("s"), tensor("t", FLOAT, [1])], [sequence("sums"), sequence("shapes", INT64)]
    )
    compare(proto, {"s": [arange(2), arange(5), arange(0)], "t": np.float32([0.5])})
    compare(proto, {"s": [], "t": np.float32([0.5])})


# ---------------------------------------------------------------------------- optionals


def test_optional_round_trips_through_if_and_loop():
    """Empty and full optional sequences, through If outputs and Loop-carried values."""
    seq_type = helper.make_tensor_sequence_value_info("unused", FLOAT, None).type
    loop_body = graph(
        [
            helper.make_node("Identity", ["c_in"], ["c_out"]),
            helper.make_node("OptionalHasElement", ["o_in"], ["has"]),
            helper.make_node(
                "If",
                ["has"],
                ["current"],
                then_branch=branch(
                    "then", [helper.make_node("OptionalGetElement", ["o_in"], ["got"])], [sequence("got")]
                ),
                else_branch=branch(
                    "else", [helper.make_node("SequenceEmpty", [], ["fresh"])], [sequence("fresh")]
                ),
            ),
            helper.make_node("Cast", ["i"], ["i_f"], to=FLOAT),
            helper.make_node("SequenceInsert", ["current", "i_f"], ["next"]),
            helper.make_node("Optional", ["next"], ["o_out"]),
        ],
        [tensor("i", INT64, []), tensor("c_in", BOOL, []), optional("o_in", seq_type)],
        [tensor("c_out", BOOL, []), optional("o_out", seq_type)],
        name="body",
    )
    nodes = [
        helper.make_node("Loop", ["M", "", "o0"], ["o"], body=loop_body),
        helper.make_node("OptionalHasElement", ["o"], ["has"]),
    ]
    proto = model(
        nodes,
        [tensor("M", INT64, []), optional("o0", seq_type)],
        [optional("o", seq_type), tensor("has", BOOL)],
        opset=18,
    )
    for trip in (0, 3):
        for start in (None, [np.array(7, np.float32)]):
            compare(proto, {"M": np.array(trip, np.int64), "o0": start})


def test_optional_get_element_of_an_empty_optional_fails():
    tensor_type = helper.make_tensor_type_proto(FLOAT, [2])
    nodes = [helper.make_node("OptionalGetElement", ["o"], ["y"])]
    proto = model(nodes, [optional("o", tensor_type)], [tensor("y")], opset=18)
    assert_same(run_spawnml(proto, {"o": np.float32([1, 2])})[0], np.float32([1, 2]))
    with pytest.raises(spawnml.ExecutionError, match="empty"):
        run_spawnml(proto, {"o": None})


# ---------------------------------------------------------------------------- session and planner


def test_session_describes_and_checks_sequence_and_optional_inputs():
    seq_type = helper.make_tensor_sequence_value_info("unused", FLOAT, [2]).type
    nodes = [helper.make_node("Identity", ["s"], ["y"]), helper.make_node("Identity", ["o"], ["z"])]
    proto = model(
        nodes, [sequence("s", FLOAT, [2]), optional("o", seq_type)], [sequence("y"), optional("z", seq_type)]
    )
    session = spawnml.InferenceSession(proto.SerializeToString())
    assert [(arg.name, arg.type, arg.shape) for arg in session.get_inputs()] == [
        ("s", "seq(tensor(float))", []),
        ("o", "optional(seq(tensor(float)))", []),
    ]
    assert [arg.type for arg in session.get_outputs()] == [
        "seq(tensor(float))",
        "optional(seq(tensor(float)))",
    ]
    declared = {value.name: value for value in session.graph.inputs}
    assert (declared["s"].kind, declared["s"].element.dtype, declared["s"].element.shape) == (
        SEQUENCE,
        np.float32,
        (2,),
    )
    assert (declared["o"].kind, declared["o"].element.kind) == (OPTIONAL, SEQUENCE)
    y, z = session.run(None, {"s": [np.float32([1, 2])], "o": None})
    assert_same(y, [np.float32([1, 2])])
    assert z is None
    with pytest.raises(
        spawnml.InvalidFeedError, match=r"input 's\[1\]' expects tensor\(float\) but got tensor\(int64\)"
    ):
        session.run(None, {"s": [np.float32([1, 2]), np.int64([1, 2])], "o": None})
    with pytest.raises(spawnml.InvalidFeedError, match=r"input 's\[0\]' expects shape \[2\] but got \[3\]"):
        session.run(None, {"s": [np.float32([1, 2, 3])], "o": None})
    with pytest.raises(spawnml.InvalidFeedError, match="'s' is a sequence: feed a list of arrays"):
        session.run(None, {"s": np.float32([1, 2]), "o": None})


def test_run_with_tensors_returns_a_sequence_as_a_list_of_tensors():
    proto = model(
        [helper.make_node("SplitToSequence", ["x"], ["y"])], [tensor("x", FLOAT, [3, 2])], [sequence("y")]
    )
    session = spawnml.InferenceSession(proto.SerializeToString())
    (pieces,) = session.run_with_tensors(None, {"x": arange(3, 2)})
    assert [(piece.device, piece.shape) for piece in pieces] == [("cpu", (1, 2))] * 3


def test_body_arity_mismatch_is_refused_at_load():
    body = graph(
        [helper.make_node("Identity", ["c_in"], ["c_out"])],
        [tensor("i", INT64, []), tensor("c_in", BOOL, [])],
        [tensor("c_out", BOOL, [])],
    )
    node = helper.make_node("Loop", ["M", "", "x0"], ["x"], body=body)
    proto = model([node], [tensor("M", INT64, []), tensor("x0", FLOAT, [1])], [tensor("x")])
    with pytest.raises(
        spawnml.UnsupportedOperatorError,
        match="body takes 2 inputs and returns 1 outputs; the node needs 3 and 2",
    ):
        spawnml.InferenceSession(proto.SerializeToString())


def test_negative_scan_axes_are_refused_before_opset_11():
    node = helper.make_node(
        "Scan",
        ["s0", "a", "b"],
        ["s", "ss", "ds"],
        body=scan_body(),
        num_scan_inputs=2,
        scan_input_axes=[-1, 0],
    )
    inputs = [tensor("s0", FLOAT, [3]), tensor("a", FLOAT, [3, 4]), tensor("b", FLOAT, [4, 3])]
    proto = model([node], inputs, [tensor("s"), tensor("ss"), tensor("ds")], opset=10)
    with pytest.raises(spawnml.UnsupportedOperatorError, match="negative axes, allowed from opset 11"):
        spawnml.InferenceSession(proto.SerializeToString())
