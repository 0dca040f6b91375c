"""Operator property tests: one-node models over random shapes and dtypes, against onnxruntime.

Each row of :data:`PROPERTIES` names an operator, the family that builds its inputs and
attributes, its dtypes and its tolerance. A row yields one case per dtype and variant:

- ``random``: random shapes (rank 0 to 4) and attributes;
- ``broadcast``: operands of different ranks and unit dims (operators with several inputs);
- ``empty``: a zero-size dim;
- ``special``: float inputs salted with NaN, ±inf and ±0.

Values come from numpy's generator seeded with the case name, so a case is the same on
every run and machine. onnxruntime's outputs on the same model are the reference; the
tolerances say how far two correct runtimes may differ:

- ``exact``: correctly rounded IEEE results, integers, booleans and data movement;
- ``rounded``: transcendental functions, which runtimes evaluate with their own
  approximations (onnxruntime's vectorised exp/tanh/erf are within a few ulps);
- ``accumulated``: sums and products, whose order of accumulation differs.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from onnx import TensorProto, TypeProto, helper, numpy_helper

from .case import PROPERTY_KIND, Case, run_feeds

OPSET = 18
IR_VERSION = 9
MAX_RANK = 4
MAX_DIM = 5

#: (rtol, atol) by dtype; dtypes not listed (integers, bool) are compared exactly.
TOLERANCES: dict[str, dict[str, tuple[float, float]]] = {
    "exact": {},
    "rounded": {"float16": (1e-3, 1e-3), "float32": (1e-6, 1e-6), "float64": (1e-12, 1e-12)},
    "accumulated": {"float16": (1e-2, 1e-2), "float32": (1e-5, 1e-5), "float64": (1e-12, 1e-12)},
}
SPECIALS = (np.nan, np.inf, -np.inf, -0.0, 0.0)
NO_NAN = (np.inf, -np.inf, -0.0, 0.0)

#: One operand of a node: its value, and whether it is a constant initializer.
Operand = tuple[np.ndarray, bool]
Example = tuple[list[Operand], dict[str, Any]]
Rng = np.random.Generator


@dataclass(frozen=True)
class Property:
    """One operator under test: how its inputs are built, in which dtypes, how closely."""

    op: str
    family: str
    dtypes: tuple[str, ...]
    tolerance: str = "exact"
    #: Per input: "any", "positive" (log, sqrt, pow's base) or "nonzero" (divisors: integer
    #: division by zero is undefined; the special variant still divides floats by ±0).
    domains: tuple[str, ...] = ()
    attrs: Mapping[str, Any] = field(default_factory=dict)
    specials: tuple[float, ...] = SPECIALS
    #: Whether reducing over a zero-size axis is defined (ReduceMean's and ArgMax's is not).
    empty_reduction: bool = True

    def domain(self, index: int) -> str:
        return self.domains[index] if index < len(self.domains) else "any"


# ---------------------------------------------------------------------------- values


def random_shape(rng: Rng, low_rank: int = 0, high_rank: int = MAX_RANK) -> list[int]:
    return [int(dim) for dim in rng.integers(1, MAX_DIM + 1, size=int(rng.integers(low_rank, high_rank + 1)))]


def with_empty_dim(rng: Rng, shape: list[int]) -> list[int]:
    """``shape`` with one dim set to zero (a rank-1 shape if it was a scalar)."""
    shape = list(shape) or [1]
    shape[int(rng.integers(len(shape)))] = 0
    return shape


def values(rng: Rng, shape: list[int], dtype: str, domain: str = "any", specials: tuple = ()) -> np.ndarray:
    """Random values of ``dtype`` in ``domain``, salted with ``specials`` (float dtypes)."""
    kind = np.dtype(dtype).kind
    if kind == "b":
        return np.asarray(rng.random(shape) < 0.5)
    if kind in "iu":
        low = 0 if kind == "u" or domain == "positive" else -20
        array = np.array(rng.integers(low, 21, size=shape), dtype=dtype)
    else:
        normal = rng.standard_normal(shape) * 2
        array = np.array(np.abs(normal) + 0.1 if domain == "positive" else normal, dtype=dtype)
    if domain == "nonzero":
        array[array == 0] = 1
    if specials and kind == "f" and array.size:
        salted = np.array(rng.random(array.shape) < 0.3)
        salted.flat[int(rng.integers(array.size))] = True
        array[salted] = rng.choice(np.array(specials, dtype=dtype), size=int(salted.sum()))
    return array


def shrunk(rng: Rng, shape: list[int]) -> list[int]:
    """A shape that broadcasts to ``shape``: some leading dims dropped, some dims set to 1."""
    kept = shape[int(rng.integers(len(shape) + 1)) :]
    return [1 if rng.random() < 0.4 else dim for dim in kept]


def broadcast_shapes(rng: Rng, shape: list[int], count: int) -> list[list[int]]:
    """``count`` shapes that broadcast together to ``shape`` (one of them is ``shape``)."""
    shapes = [shrunk(rng, shape) for _ in range(count)]
    shapes[int(rng.integers(count))] = list(shape)
    return shapes


def operand_shapes(rng: Rng, variant: str, count: int) -> list[list[int]]:
    """Shapes of ``count`` elementwise operands for a variant."""
    if variant == "broadcast":
        return broadcast_shapes(rng, random_shape(rng, low_rank=1), count)
    shape = random_shape(rng)
    return [with_empty_dim(rng, shape) if variant == "empty" else shape] * count


def operands(prop: Property, rng: Rng, dtype: str, variant: str, shapes: list[list[int]]) -> list[Operand]:
    specials = prop.specials if variant == "special" else ()
    return [(values(rng, shape, dtype, prop.domain(i), specials), False) for i, shape in enumerate(shapes)]


def ints(items: list[int]) -> Operand:
    """A constant int64 input (axes, shape, starts, ...)."""
    return np.array(items, dtype=np.int64), True


# ---------------------------------------------------------------------------- families


def elementwise(count: int) -> Callable[[Property, Rng, str, str], Example]:
    """Operators of ``count`` inputs of one dtype, broadcast together."""

    def build(prop: Property, rng: Rng, dtype: str, variant: str) -> Example:
        shapes = operand_shapes(rng, variant, count)
        return operands(prop, rng, dtype, variant, shapes), dict(prop.attrs)

    return build


def where(prop: Property, rng: Rng, dtype: str, variant: str) -> Example:
    condition, *shapes = operand_shapes(rng, variant, 3)
    data = operands(prop, rng, dtype, variant, shapes)
    return [(values(rng, condition, "bool"), False), *data], {}


def reduced_shape(rng: Rng, variant: str) -> list[int]:
    """The input of a reduction; an empty one keeps a non-empty axis to reduce over."""
    if variant == "empty":
        return with_empty_dim(rng, random_shape(rng, low_rank=2))
    return random_shape(rng, low_rank=1)


def reduce(prop: Property, rng: Rng, dtype: str, variant: str) -> Example:
    """ReduceX with a random ``axes`` input (or none: every axis) and ``keepdims``."""
    shape = reduced_shape(rng, variant)
    candidates = [axis for axis, dim in enumerate(shape) if dim or prop.empty_reduction]
    axes = sorted(rng.choice(candidates, size=int(rng.integers(1, len(candidates) + 1)), replace=False))
    axes = [int(axis) - len(shape) if rng.random() < 0.3 else int(axis) for axis in axes]
    attrs = {"keepdims": int(rng.integers(2))}
    (data,) = operands(prop, rng, dtype, variant, [shape])
    every_axis = prop.empty_reduction or variant != "empty"
    if every_axis and rng.random() < 0.2:
        return [data], attrs
    return [data, ints(axes)], attrs


def arg_reduce(prop: Property, rng: Rng, dtype: str, variant: str) -> Example:
    """ArgMax/ArgMin over a random non-empty axis, with ties when values are integers."""
    shape = reduced_shape(rng, variant)
    axis = int(rng.choice([axis for axis, dim in enumerate(shape) if dim]))
    attrs = {
        "axis": axis - len(shape) if rng.random() < 0.3 else axis,
        "keepdims": int(rng.integers(2)),
        "select_last_index": int(rng.integers(2)),
    }
    return operands(prop, rng, dtype, variant, [shape]), attrs


def softmax(prop: Property, rng: Rng, dtype: str, variant: str) -> Example:
    shape = random_shape(rng, low_rank=1)
    if variant == "empty":
        shape = with_empty_dim(rng, shape)
    axis = int(rng.integers(-len(shape), len(shape)))
    return operands(prop, rng, dtype, variant, [shape]), {"axis": axis}


def matmul(prop: Property, rng: Rng, dtype: str, variant: str) -> Example:
    """MatMul with broadcast batch dims, and 1-D operands now and then."""
    m, k, n = (int(dim) for dim in rng.integers(1, 7, size=3))
    if variant == "empty":
        m, k, n = with_empty_dim(rng, [m, k, n])
    batch = random_shape(rng, high_rank=2)
    left, right = broadcast_shapes(rng, batch, 2) if batch else ([], [])
    a_shape = [k] if rng.random() < 0.15 else [*left, m, k]
    b_shape = [k] if rng.random() < 0.15 else [*right, k, n]
    return operands(prop, rng, dtype, variant, [a_shape, b_shape]), {}


def transpose(prop: Property, rng: Rng, dtype: str, variant: str) -> Example:
    (shape,) = operand_shapes(rng, variant, 1)
    permute = shape and rng.random() < 0.8
    attrs = {"perm": [int(axis) for axis in rng.permutation(len(shape))]} if permute else {}
    return operands(prop, rng, dtype, variant, [shape]), attrs


def concat(prop: Property, rng: Rng, dtype: str, variant: str) -> Example:
    shape = random_shape(rng, low_rank=1)
    axis = int(rng.integers(len(shape)))
    shapes = []
    for _ in range(int(rng.integers(1, 4))):
        part = list(shape)
        part[axis] = int(rng.integers(0 if variant == "empty" else 1, MAX_DIM + 1))
        shapes.append(part)
    if variant == "empty":
        shapes[0][axis] = 0
    attrs = {"axis": axis - len(shape) if rng.random() < 0.3 else axis}
    return operands(prop, rng, dtype, variant, shapes), attrs


def slice_(prop: Property, rng: Rng, dtype: str, variant: str) -> Example:
    """Slice over random axes with random (possibly out-of-range, negative) bounds and steps."""
    (shape,) = operand_shapes(rng, variant, 1)
    shape = shape or [int(rng.integers(1, MAX_DIM + 1))]
    chosen = rng.permutation(len(shape))[: int(rng.integers(1, len(shape) + 1))]
    starts, ends, axes, steps = [], [], [], []
    for axis in (int(axis) for axis in chosen):
        dim = shape[axis]
        starts.append(int(rng.integers(-dim - 2, dim + 3)))
        ends.append(int(rng.integers(-dim - 2, dim + 3)))
        axes.append(axis - len(shape) if rng.random() < 0.3 else axis)
        steps.append(int(rng.choice([-3, -2, -1, 1, 2, 3])))
    data = operands(prop, rng, dtype, variant, [shape])
    return [*data, ints(starts), ints(ends), ints(axes), ints(steps)], {}


def gather(prop: Property, rng: Rng, dtype: str, variant: str) -> Example:
    """Gather with negative indices and indices of rank 0 to 2."""
    shape = random_shape(rng, low_rank=1, high_rank=3)
    axis = int(rng.integers(len(shape)))
    index_shape = random_shape(rng, high_rank=2)
    if variant == "empty":
        index_shape = with_empty_dim(rng, index_shape)
    indices = rng.integers(-shape[axis], shape[axis], size=index_shape).astype(np.int64)
    (data,) = operands(prop, rng, dtype, variant, [shape])
    return [data, (indices, False)], {"axis": axis - len(shape) if rng.random() < 0.3 else axis}


def expand(prop: Property, rng: Rng, dtype: str, variant: str) -> Example:
    """Expand to a shape that may add leading dims, and may ask 1 where the input is larger."""
    target = random_shape(rng, low_rank=1)
    if variant == "empty":
        target = with_empty_dim(rng, target)
    shape = shrunk(rng, target)
    aligned = [1] * (len(target) - len(shape)) + shape
    requested = [
        1 if have == dim and rng.random() < 0.3 else dim for have, dim in zip(aligned, target, strict=True)
    ]
    return [*operands(prop, rng, dtype, variant, [shape]), ints(requested)], {}


#: family -> (builder, variants).
FAMILIES: dict[str, tuple[Callable[[Property, Rng, str, str], Example], tuple[str, ...]]] = {
    "unary": (elementwise(1), ("random", "empty", "special")),
    "binary": (elementwise(2), ("random", "broadcast", "empty", "special")),
    "variadic": (elementwise(3), ("random", "broadcast", "empty", "special")),
    "where": (where, ("random", "broadcast", "empty", "special")),
    "reduce": (reduce, ("random", "empty", "special")),
    "arg_reduce": (arg_reduce, ("random", "empty", "special")),
    "softmax": (softmax, ("random", "empty", "special")),
    "matmul": (matmul, ("random", "empty", "special")),
    "transpose": (transpose, ("random", "empty", "special")),
    "concat": (concat, ("random", "empty", "special")),
    "slice": (slice_, ("random", "empty", "special")),
    "gather": (gather, ("random", "empty", "special")),
    "expand": (expand, ("random", "empty", "special")),
}

# ---------------------------------------------------------------------------- the table

F16 = ("float16",)
FLOATS = ("float32", "float64")
SIGNED = ("int32", "int64")
NUMBERS = (*FLOATS, *SIGNED)
MOVABLE = ("float32", "float16", "int64", "bool")


def _rows(ops: str, family: str, dtypes: tuple[str, ...], **options: Any) -> list[Property]:
    return [Property(op, family, dtypes, **options) for op in ops.split()]


PROPERTIES: list[Property] = [
    *_rows("Abs Neg Relu", "unary", (*F16, *FLOATS, *SIGNED)),
    *_rows("Sign Floor Ceil Round Reciprocal IsNaN IsInf", "unary", FLOATS),
    *_rows("Sqrt", "unary", FLOATS, domains=("positive",)),
    *_rows("Exp Tanh Sigmoid Sin Cos", "unary", FLOATS, tolerance="rounded"),
    *_rows("Erf", "unary", ("float32",), tolerance="rounded"),  # onnxruntime has no float64 Erf
    *_rows("Log", "unary", FLOATS, tolerance="rounded", domains=("positive",)),
    *_rows("Not", "unary", ("bool",)),
    *_rows("Add Sub Mul", "binary", (*F16, *NUMBERS)),
    *_rows("Div", "binary", (*F16, *NUMBERS), domains=("any", "nonzero")),
    *_rows("Mod", "binary", (*SIGNED, "int8"), domains=("any", "nonzero")),
    *_rows("Mod", "binary", FLOATS, attrs={"fmod": 1}),
    *_rows("Pow", "binary", FLOATS, tolerance="rounded", domains=("positive",)),
    *_rows("Equal Less Greater LessOrEqual GreaterOrEqual", "binary", NUMBERS),
    *_rows("And Or Xor", "binary", ("bool",)),
    *_rows("Max Min", "variadic", (*F16, *NUMBERS)),
    *_rows("Sum", "variadic", FLOATS, tolerance="accumulated"),
    *_rows("Mean", "variadic", ("float32",), tolerance="accumulated"),  # onnxruntime: no float64 Mean
    *_rows("Where", "where", (*FLOATS, "int64")),
    *_rows("ReduceSum", "reduce", NUMBERS, tolerance="accumulated"),
    *_rows("ReduceMean", "reduce", FLOATS, tolerance="accumulated", empty_reduction=False),
    # ONNX leaves NaN in ReduceMax/Min and ArgMax/Min unspecified; onnxruntime skips it.
    *_rows("ReduceMax ReduceMin", "reduce", (*NUMBERS, "int8", "uint8"), specials=NO_NAN),
    *_rows(
        "ReduceProd ReduceSumSquare ReduceL1 ReduceL2 ReduceLogSumExp",
        "reduce",
        FLOATS,
        tolerance="accumulated",
    ),
    *_rows("ReduceLogSum", "reduce", FLOATS, tolerance="accumulated", domains=("positive",)),
    *_rows("ArgMax ArgMin", "arg_reduce", NUMBERS, specials=NO_NAN, empty_reduction=False),
    *_rows("Softmax", "softmax", FLOATS, tolerance="accumulated"),
    *_rows("LogSoftmax", "softmax", ("float32",), tolerance="accumulated"),
    # onnxruntime's float64 LogSoftmax departs from the ONNX function body (and from its
    # own float32 kernel) in rows holding NaN or +inf.
    *_rows("LogSoftmax", "softmax", ("float64",), tolerance="accumulated", specials=(-np.inf, -0.0, 0.0)),
    *_rows("MatMul", "matmul", FLOATS, tolerance="accumulated"),
    *_rows("MatMul", "matmul", SIGNED),
    *_rows("Transpose", "transpose", MOVABLE),
    *_rows("Concat", "concat", MOVABLE),
    *_rows("Slice", "slice", MOVABLE),
    *_rows("Gather", "gather", MOVABLE),
    *_rows("Expand", "expand", MOVABLE),
]

# ---------------------------------------------------------------------------- cases


def property_cases(table: list[Property] = PROPERTIES) -> list[Case]:
    """One case per row, dtype and variant."""
    return [property_case(prop, dtype, variant) for prop in table for dtype, variant in variants(prop)]


def variants(prop: Property) -> list[tuple[str, str]]:
    """``(dtype, variant)`` of a row's cases: ``special`` only for float dtypes."""
    return [
        (dtype, variant)
        for dtype in prop.dtypes
        for variant in FAMILIES[prop.family][1]
        if variant != "special" or np.dtype(dtype).kind == "f"
    ]


def case_name(prop: Property, dtype: str, variant: str) -> str:
    return f"property_{prop.op}_{dtype}_{variant}"


def example(prop: Property, dtype: str, variant: str) -> Example:
    """A case's operands and attributes, from the generator seeded with its name."""
    rng = np.random.default_rng(zlib.crc32(case_name(prop, dtype, variant).encode()))
    return FAMILIES[prop.family][0](prop, rng, dtype, variant)


def property_case(prop: Property, dtype: str, variant: str) -> Case:
    """The case ``property_<Op>_<dtype>_<variant>``: one node, onnxruntime as reference."""
    inputs, attrs = example(prop, dtype, variant)
    model = one_node_model(prop.op, inputs, attrs)
    feeds = {f"x{index}": array for index, (array, constant) in enumerate(inputs) if not constant}
    rtol, atol = TOLERANCES[prop.tolerance].get(dtype, (0.0, 0.0))
    name = case_name(prop, dtype, variant)
    return Case(name, PROPERTY_KIND, lambda: model, run_feeds(lambda: [feeds]), None, rtol, atol)


def one_node_model(op: str, inputs: list[Operand], attrs: dict[str, Any]) -> bytes:
    """A serialized model of one node; constant operands become initializers."""
    names = [f"x{index}" for index in range(len(inputs))]
    graph = helper.make_graph(
        [helper.make_node(op, names, ["y"], **attrs)],
        f"property_{op}",
        [_typed(name, array) for name, (array, constant) in zip(names, inputs, strict=True) if not constant],
        [helper.make_value_info("y", TypeProto())],
        [
            numpy_helper.from_array(array, name)
            for name, (array, constant) in zip(names, inputs, strict=True)
            if constant
        ],
    )
    opsets = [helper.make_opsetid("", OPSET)]
    return helper.make_model(graph, opset_imports=opsets, ir_version=IR_VERSION).SerializeToString()


def _typed(name: str, array: np.ndarray) -> Any:
    element = TensorProto.BOOL if array.dtype == bool else helper.np_dtype_to_tensor_dtype(array.dtype)
    return helper.make_tensor_value_info(name, element, array.shape)
