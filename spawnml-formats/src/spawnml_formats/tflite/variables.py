"""TFLite resource variables as graph state.

A streaming TFLite model keeps state in resource variables: ``VAR_HANDLE`` names one,
``READ_VARIABLE`` and ``ASSIGN_VARIABLE`` read and write it, and ``CALL_ONCE`` runs an
initialisation subgraph at the first invocation. The interpreter keeps the variables
between invocations; in the IR each variable read before it is written becomes a
:class:`~spawnml.ir.State`: a graph input holding its value at the start of a run, a graph
output holding its value at the end, and the initial value the ``CALL_ONCE`` subgraph
assigns. Variables hold raw stored values (quantized ones stay integers), as the
interpreter copies bytes and never requantizes.

Initialisation subgraphs are evaluated at load: they may assign constants to variables,
which is what the TensorFlow converter writes; anything else is refused by name.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import tflite
from spawnml import ModelLoadError
from spawnml.ir import State, Value

from .reader import TFLiteModel, int_vector
from .tensors import constant, tensor_info

if TYPE_CHECKING:
    from .lowering import Lowering
    from .operators import Op


@dataclass
class Variable:
    """One resource variable while the main subgraph is lowered."""

    name: str
    initial: np.ndarray | None = None
    input: Value | None = None  # the graph input it is read from, once read before written
    current: str = ""  # the IR name of its value at this point of the run ("" before any)


@dataclass
class Variables:
    """The resource variables of a model, by name, and the resource tensors that name them."""

    by_name: dict[str, Variable] = field(default_factory=dict)
    handles: dict[int, Variable] = field(default_factory=dict)

    def named(self, name: str) -> Variable:
        return self.by_name.setdefault(name, Variable(name))

    def handle(self, lw: Lowering, index: int) -> Variable:
        """The variable resource tensor ``index`` of the main subgraph names."""
        if index not in self.handles:
            raise ModelLoadError(
                f"tensor {index} of {lw.parsed.described} is used as a resource variable, "
                "but no VAR_HANDLE operator before it names one"
            )
        return self.handles[index]

    def declare(self, lw: Lowering) -> None:
        """Add each variable read before it is written as state: its next value is a graph output."""
        for variable in self.by_name.values():
            if variable.input is None:
                continue  # never read before written: nothing carries over between runs
            assert variable.initial is not None  # read_variable refuses uninitialised ones
            output = lw.emit("Identity", [variable.current], output=lw.fresh(variable.name + "/next"))
            lw.graph.outputs.append(Value(output, variable.input.dtype, variable.input.shape))
            lw.graph.states.append(State(variable.name, variable.input.name, output, variable.initial))


def _shared_name(parsed: TFLiteModel, operator: tflite.Operator) -> str:
    """The name a VAR_HANDLE gives its variable: its container and shared name."""
    table = operator.BuiltinOptions()
    if operator.BuiltinOptionsType() != tflite.BuiltinOptions.VarHandleOptions or table is None:
        raise ModelLoadError(f"a VAR_HANDLE operator of {parsed.described} has no VarHandleOptions")
    options = tflite.VarHandleOptions()
    options.Init(table.Bytes, table.Pos)
    container, name = (
        (raw or b"").decode("utf-8", "replace") for raw in (options.Container(), options.SharedName())
    )
    return f"{container}/{name}" if container else name


def var_handle(lw: Lowering, op: Op) -> None:
    lw.variables.handles[op.y] = lw.variables.named(_shared_name(lw.parsed, op.operator))


def read_variable(lw: Lowering, op: Op) -> None:
    variable = lw.variables.handle(lw, op.x)
    if not variable.current:
        if variable.initial is None:
            raise ModelLoadError(
                f"resource variable {variable.name!r} of {lw.parsed.described} is read before "
                "anything assigns it and no CALL_ONCE subgraph before it initialises it"
            )
        info = lw.info(op.y)
        _check_initial(lw, variable, info.dtype, info.shape)
        variable.input = Value(lw.fresh(variable.name), info.dtype, info.shape)
        lw.graph.inputs.append(variable.input)
        variable.current = variable.input.name
    # an Identity of its own, so that naming this tensor renames no other tensor's node
    lw.define_raw(op.y, lw.emit("Identity", [variable.current]))


def assign_variable(lw: Lowering, op: Op) -> None:
    variable = lw.variables.handle(lw, op.x)
    value = op.input(1)
    if variable.input is not None and (
        lw.info(value).dtype != variable.input.dtype or lw.info(value).shape != variable.input.shape
    ):
        raise ModelLoadError(
            f"resource variable {variable.name!r} of {lw.parsed.described} is read as "
            f"{variable.input.dtype}{list(variable.input.shape or ())} but assigned "
            f"{lw.where(value)}, of {lw.info(value).dtype}{list(lw.info(value).shape)}"
        )
    variable.current = lw.raw(value)


def call_once(lw: Lowering, op: Op) -> None:
    """Evaluate the initialisation subgraph: the constants it assigns become initial values."""
    model = lw.parsed.model
    index = lw.parsed.index(
        "CALL_ONCE subgraph",
        op.typed_options(tflite.CallOnceOptions).InitSubgraphIndex(),
        model.SubgraphsLength(),
    )
    parsed, subgraph = lw.parsed, model.Subgraphs(index)
    handles: dict[int, str] = {}
    for position in range(subgraph.OperatorsLength()):
        operator = subgraph.Operators(position)
        name = parsed.operator_name(operator.OpcodeIndex())
        inputs = int_vector(parsed, operator.InputsAsNumpy(), "operator tensor indices")
        outputs = int_vector(parsed, operator.OutputsAsNumpy(), "operator tensor indices")
        if name == "VAR_HANDLE" and len(outputs) == 1:
            handles[outputs[0]] = _shared_name(parsed, operator)
        elif name == "ASSIGN_VARIABLE" and len(inputs) == 2 and inputs[0] in handles:
            tensor = parsed.index("tensor", inputs[1], subgraph.TensorsLength())
            info = tensor_info(parsed, subgraph, tensor, lw.limits)
            value = constant(parsed, info, lw.limits)
            if value is None:
                raise ModelLoadError(
                    f"CALL_ONCE subgraph {index} of {parsed.described} assigns tensor {tensor} "
                    f"({info.name!r}), which is computed; SpawnML reads initialisation subgraphs "
                    "that assign constants to variables"
                )
            lw.variables.named(handles[inputs[0]]).initial = value
        else:
            raise ModelLoadError(
                f"CALL_ONCE subgraph {index} of {lw.parsed.described} runs {name} (operator "
                f"{position}); SpawnML reads initialisation subgraphs that assign constants to variables"
            )


def _check_initial(lw: Lowering, variable: Variable, dtype: np.dtype, shape: tuple[int, ...]) -> None:
    initial = variable.initial
    assert initial is not None
    if initial.dtype != dtype or initial.shape != shape:
        raise ModelLoadError(
            f"resource variable {variable.name!r} of {lw.parsed.described} is initialised to "
            f"{initial.dtype}{list(initial.shape)} but read as {dtype}{list(shape)}"
        )
