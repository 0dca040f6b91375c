"""Lowering a TFLite model's main subgraph to the IR.

TFLite tensors are NHWC; ai.onnx convolution and pooling are NCHW. Each such operator is
lowered as ``Transpose(NHWC->NCHW) -> op -> fused activation -> Transpose(NCHW->NHWC)``,
so every tensor keeps its TFLite layout and name while consecutive spatial operators meet
as an inverse pair (``perm [0,2,3,1]`` then ``[0,3,1,2]``) that a transpose-cancellation
pass can remove. Elementwise, padding and reshaping operators run in NHWC unchanged.

Quantized (int8/uint8 with scales) tensors are computed in float: an operator reads them
through ``DequantizeLinear`` and writes them through ``QuantizeLinear`` (per tensor or per
channel); constants are dequantized at load. ``DEQUANTIZE`` of a constant (float16 weights)
and ``DENSIFY`` of a constant (sparse weights) are folded at load. Operators with no
lowering become nodes of the ``tflite`` domain, which sessions refuse by name.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import tflite
from spawnml import Limits, ModelLoadError
from spawnml.graph_builder import GraphBuilder, Mark
from spawnml.ir import Graph, Value

from .reader import TFLiteModel, int_vector
from .tensors import TensorInfo, constant, tensor_info
from .variables import Variables

OPSET = 18
DOMAIN = "tflite"
TO_NCHW, TO_NHWC = [0, 3, 1, 2], [0, 2, 3, 1]
#: Operators that run other subgraphs (CALL_ONCE is evaluated at load, the others are kept
#: as tflite nodes, so sessions refuse them by name).
CONTROL_FLOW = {"IF", "WHILE", "CALL_ONCE", "CALL"}


class Lowering(GraphBuilder):
    """The graph under construction and the TFLite tensors it maps to IR value names."""

    def __init__(self, parsed: TFLiteModel, subgraph: tflite.SubGraph, limits: Limits) -> None:
        super().__init__(Graph(opset_imports={"": OPSET, DOMAIN: 1}, name=_text(subgraph.Name()) or "main"))
        self.parsed, self.subgraph, self.limits = parsed, subgraph, limits
        self.tensor_count = subgraph.TensorsLength()
        self._infos: dict[int, TensorInfo] = {}
        self._constants: dict[int, np.ndarray | None] = {}
        self._names: dict[int, str] = {}
        self._floats: dict[int, str] = {}
        self.variables = Variables()

    # -- tensors -----------------------------------------------------------------------------

    def info(self, index: int) -> TensorInfo:
        if index not in self._infos:
            self.parsed.index("tensor", index, self.tensor_count)
            self._infos[index] = tensor_info(self.parsed, self.subgraph, index, self.limits)
        return self._infos[index]

    def constant(self, index: int) -> np.ndarray | None:
        """The stored value of tensor ``index`` when it is constant (or folded at load)."""
        if index not in self._constants:
            self._constants[index] = constant(self.parsed, self.info(index), self.limits)
        return self._constants[index]

    def float_constant(self, index: int) -> np.ndarray | None:
        """A constant as the real values it stands for (quantized constants dequantized)."""
        value = self.constant(index)
        quantization = self.info(index).quantization
        return quantization.dequantize(value) if value is not None and quantization is not None else value

    def fold(self, index: int, value: np.ndarray) -> None:
        """Make tensor ``index`` the constant ``value`` (for operators evaluated at load)."""
        self._constants[index] = value

    def raw(self, index: int) -> str:
        """The IR name of tensor ``index`` as stored (quantized tensors stay integers)."""
        if index not in self._names:
            value = self.constant(index)
            if value is None:
                raise ModelLoadError(f"{self.where(index)} is read before any operator writes it")
            self._names[index] = self.initializer(value, self.info(index).name)
        return self._names[index]

    def value(self, index: int) -> str:
        """The IR name of tensor ``index`` as real (float) values, dequantizing when quantized."""
        info = self.info(index)
        if not info.quantized:
            return self.raw(index)
        if index not in self._floats:
            folded = self.float_constant(index)
            if folded is not None:
                self._floats[index] = self.initializer(folded, info.name + "_float")
            else:
                scale, zero = self._quant_params(info)
                self._floats[index] = self.emit(
                    "DequantizeLinear", [self.raw(index), scale, zero], self._axis(info)
                )
        return self._floats[index]

    def define(self, index: int, name: str) -> None:
        """Make tensor ``index`` the result ``name`` (real values), quantizing when it is quantized."""
        info = self.info(index)
        if index in self._names:
            raise ModelLoadError(f"{self.where(index)} is written by two operators")
        name = self._rename_last(name, info.name + "_float" if info.quantized else info.name)
        if info.quantized:
            scale, zero = self._quant_params(info)
            name = self.emit("QuantizeLinear", [name, scale, zero], self._axis(info))
        self._names[index] = name

    def define_raw(self, index: int, name: str) -> None:
        """Make tensor ``index`` the stored-type result ``name``."""
        if index in self._names:
            raise ModelLoadError(f"{self.where(index)} is written by two operators")
        self._names[index] = self._rename_last(name, self.info(index).name)

    def _rename_last(self, name: str, wanted: str) -> str:
        """Give the node that just produced ``name`` the TFLite tensor's own name."""
        if not wanted or not self.wrote_last(name):
            return name
        return self.rename_last(self.fresh(wanted))

    def _quant_params(self, info: TensorInfo) -> tuple[str, str]:
        quant = info.quantization
        assert quant is not None
        scale = quant.scale if quant.per_channel else quant.scale.reshape(())
        zero = quant.zero_point if quant.per_channel else quant.zero_point.reshape(())
        return self.initializer(scale, info.name + "_scale"), self.initializer(
            zero, info.name + "_zero_point"
        )

    @staticmethod
    def _axis(info: TensorInfo) -> dict[str, Any]:
        quant = info.quantization
        return {"axis": quant.axis} if quant is not None and quant.per_channel else {}

    def where(self, index: int) -> str:
        return f"tensor {index} ({self.info(index).name!r}) of {self.parsed.described}"

    def rollback(self, mark: Mark) -> set[str]:
        """Undo an operator's nodes and values, and forget the tensors it had defined."""
        freed = super().rollback(mark)
        self._names = {index: name for index, name in self._names.items() if name not in freed}
        self._floats = {index: name for index, name in self._floats.items() if name not in freed}
        return freed

    # -- nodes -------------------------------------------------------------------------------

    def nchw(self, name: str) -> str:
        return self.emit("Transpose", [name], {"perm": TO_NCHW})

    def nhwc(self, name: str) -> str:
        return self.emit("Transpose", [name], {"perm": TO_NHWC})

    # -- the graph ---------------------------------------------------------------------------

    def io_value(self, index: int, name: str) -> Value:
        info = self.info(index)
        shape = tuple(None if dim < 0 else dim for dim in info.signature)
        return Value(name, info.dtype, shape)

    def finish(self, inputs: list[int], outputs: list[int]) -> Graph:
        for index in outputs:
            name = self.raw(index)
            if name in self.graph.initializers or any(value.name == name for value in self.graph.inputs):
                name = self.emit("Identity", [name])
            self.graph.outputs.append(self.io_value(index, name))
        self.variables.declare(self)
        return self.graph


def _text(raw: bytes | None) -> str:
    return (raw or b"").decode("utf-8", "replace")


def lower_model(parsed: TFLiteModel, limits: Limits) -> Graph:
    """The IR graph of the model's main subgraph (subgraph 0)."""
    from .operators import lower_operator

    model = parsed.model
    subgraph = model.Subgraphs(0)
    lowering = Lowering(parsed, subgraph, limits)
    inputs = int_vector(parsed, subgraph.InputsAsNumpy(), "subgraph inputs")
    outputs = int_vector(parsed, subgraph.OutputsAsNumpy(), "subgraph outputs")
    for index in inputs:
        name = lowering.fresh(lowering.info(index).name)
        lowering.define_raw(index, name)
        lowering.graph.inputs.append(lowering.io_value(index, name))
    control_flow = 0
    for position in range(subgraph.OperatorsLength()):
        operator = subgraph.Operators(position)
        name = parsed.operator_name(operator.OpcodeIndex())
        control_flow += name in CONTROL_FLOW
        lower_operator(lowering, operator, name)
    if model.SubgraphsLength() > 1 and not control_flow:
        raise ModelLoadError(
            f"{parsed.described} has {model.SubgraphsLength()} subgraphs but no control-flow operator "
            "uses them; SpawnML lowers the main subgraph of a model and refuses the others "
            "(signature-only subgraphs are not runnable graphs)"
        )
    lowering.graph.metadata.update({"format": "tflite", "tflite_version": str(model.Version())})
    description = _text(model.Description())
    if description:
        lowering.graph.metadata["description"] = description
    return lowering.finish(inputs, outputs)
