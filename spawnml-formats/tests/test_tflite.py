"""The TFLite loader: recognition, bounds, and operators checked against ai-edge-litert.

Small models are written here with the ``tflite`` schema's flatbuffer builders, run by
LiteRT's Interpreter and by SpawnML's CPU backend on the same seeded inputs. Float models
agree within ``rtol=1e-5, atol=1e-5`` (float32 summation order); quantized ones within one
quantization step of the output.
"""

from __future__ import annotations

import dataclasses
import importlib
from typing import Any

import flatbuffers
import numpy as np
import pytest
import spawnml
import tflite
from ai_edge_litert import interpreter as litert
from spawnml import Limits, ModelLoadError, UnsupportedOperatorError
from spawnml.formats import ModelSource
from spawnml_formats.tflite.loader import TFLiteLoader
from spawnml_formats.tflite.tensors import densify

F32, I32, I8 = tflite.TensorType.FLOAT32, tflite.TensorType.INT32, tflite.TensorType.INT8
NUMPY = {F32: np.float32, I32: np.int32, I8: np.int8, tflite.TensorType.FLOAT16: np.float16}


def _schema(name: str) -> Any:
    return importlib.import_module(f"tflite.{name}")


class ModelBuilder:
    """Writes a TFLite model from tensors and operators: the main subgraph, and the subgraphs
    :meth:`set_aside` finished before it (subgraphs 1, 2, ...)."""

    def __init__(self) -> None:
        self.b = flatbuffers.Builder(1024)
        self.tensors: list[int] = []
        self.buffers: list[int] = [self._buffer(None)]
        self.codes: list[str] = []
        self.operators: list[int] = []
        self.extra_subgraphs = 0
        self.side_subgraphs: list[int] = []

    def _table(self, name: str, fields: dict[str, Any]) -> int:
        module = _schema(name)
        getattr(module, f"{name}Start")(self.b)
        for field, value in fields.items():
            getattr(module, f"{name}Add{field}")(self.b, value)
        return getattr(module, f"{name}End")(self.b)

    def _offsets(self, offsets: list[int]) -> int:
        self.b.StartVector(4, len(offsets), 4)
        for offset in reversed(offsets):
            self.b.PrependUOffsetTRelative(offset)
        return self.b.EndVector()

    def _buffer(self, data: np.ndarray | None) -> int:
        if data is None:
            return self._table("Buffer", {})
        vector = self.b.CreateNumpyVector(np.frombuffer(np.ascontiguousarray(data).tobytes(), np.uint8))
        return self._table("Buffer", {"Data": vector})

    def tensor(self, shape: list[int], kind: int = F32, data: Any = None, quant: tuple | None = None) -> int:
        """Add a tensor (constant when ``data`` is given); ``quant`` is (scales, zero points, axis)."""
        buffer = 0
        if data is not None:
            self.buffers.append(self._buffer(np.asarray(data, NUMPY[kind]).reshape(shape)))
            buffer = len(self.buffers) - 1
        fields = {
            "Shape": self.b.CreateNumpyVector(np.asarray(shape, np.int32)),
            "Type": kind,
            "Buffer": buffer,
            "Name": self.b.CreateString(f"t{len(self.tensors)}"),
        }
        if quant is not None:
            scales, zeros, axis = quant
            fields["Quantization"] = self._table(
                "QuantizationParameters",
                {
                    "Scale": self.b.CreateNumpyVector(np.asarray(scales, np.float32)),
                    "ZeroPoint": self.b.CreateNumpyVector(np.asarray(zeros, np.int64)),
                    "QuantizedDimension": axis,
                },
            )
        self.tensors.append(self._table("Tensor", fields))
        return len(self.tensors) - 1

    def op(self, name: str, inputs: list[int], outputs: list[int], options: str = "", **fields: Any) -> None:
        """Add builtin ``name``; ``options`` names its options table, ``fields`` its values."""
        if name not in self.codes:
            self.codes.append(name)
        table = {
            "OpcodeIndex": self.codes.index(name),
            "Inputs": self.b.CreateNumpyVector(np.asarray(inputs, np.int32)),
            "Outputs": self.b.CreateNumpyVector(np.asarray(outputs, np.int32)),
        }
        if options:
            table["BuiltinOptionsType"] = getattr(tflite.BuiltinOptions, options)
            table["BuiltinOptions"] = self._table(options, fields)
        self.operators.append(self._table("Operator", table))

    def _subgraph(
        self, tensors: list[int], operators: list[int], inputs: list[int], outputs: list[int]
    ) -> int:
        return self._table(
            "SubGraph",
            {
                "Tensors": self._offsets(tensors),
                "Inputs": self.b.CreateNumpyVector(np.asarray(inputs, np.int32)),
                "Outputs": self.b.CreateNumpyVector(np.asarray(outputs, np.int32)),
                "Operators": self._offsets(operators),
            },
        )

    def set_aside(self) -> None:
        """Finish the tensors and operators written so far as a subgraph without inputs or
        outputs (an initialisation subgraph) and start the next one."""
        self.side_subgraphs.append(self._subgraph(self.tensors, self.operators, [], []))
        self.tensors, self.operators = [], []

    def build(self, inputs: list[int], outputs: list[int]) -> bytes:
        codes = []
        for name in self.codes:
            code = getattr(tflite.BuiltinOperator, name, tflite.BuiltinOperator.CUSTOM)
            fields = {"BuiltinCode": code, "DeprecatedBuiltinCode": min(code, 127), "Version": 1}
            if code == tflite.BuiltinOperator.CUSTOM:
                fields["CustomCode"] = self.b.CreateString(name)
            codes.append(self._table("OperatorCode", fields))
        subgraphs = [self._subgraph(self.tensors, self.operators, inputs, outputs), *self.side_subgraphs]
        subgraphs += [self._subgraph([], [], [], []) for _ in range(self.extra_subgraphs)]
        model = self._table(
            "Model",
            {
                "Version": 3,
                "OperatorCodes": self._offsets(codes),
                "Subgraphs": self._offsets(subgraphs),
                "Buffers": self._offsets(self.buffers),
            },
        )
        self.b.Finish(model, file_identifier=b"TFL3")
        return bytes(self.b.Output())


def _run_both(model: bytes, seed: int = 0, low: float = -2.0, high: float = 2.0) -> tuple[list, list]:
    interpreter = litert.Interpreter(model_content=model)
    interpreter.allocate_tensors()
    rng = np.random.default_rng(seed)
    feeds = {}
    for detail in interpreter.get_input_details():
        value = rng.uniform(low, high, detail["shape"]).astype(detail["dtype"])
        interpreter.set_tensor(detail["index"], value)
        feeds[detail["name"]] = value
    interpreter.invoke()
    want = [interpreter.get_tensor(d["index"]) for d in interpreter.get_output_details()]
    session = spawnml.InferenceSession(model, providers=["cpu"])
    got = session.run(None, {value.name: feeds[value.name] for value in session.get_inputs()})
    return got, want


def _assert_close(model: bytes, rtol: float = 1e-5, atol: float = 1e-5) -> None:
    got, want = _run_both(model)
    for ours, theirs in zip(got, want, strict=True):
        assert ours.dtype == theirs.dtype and ours.shape == theirs.shape
        np.testing.assert_allclose(ours, theirs, rtol=rtol, atol=atol)


def _weights(shape: list[int], seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).normal(0, 0.5, shape).astype(np.float32)


# -- float operators against LiteRT -------------------------------------------------------------

NHWC = [1, 9, 8, 4]
SAME, VALID = tflite.Padding.SAME, tflite.Padding.VALID
RELU6 = tflite.ActivationFunctionType.RELU6


def _spatial_shape(
    padding: int, stride: int, dilation: int, kernel: tuple[int, int], channels: int
) -> list[int]:
    reach = [(k - 1) * dilation + 1 for k in kernel]
    if padding == SAME:
        return [1, *(-(-size // stride) for size in NHWC[1:3]), channels]
    return [1, *((size - r) // stride + 1 for size, r in zip(NHWC[1:3], reach, strict=True)), channels]


def _conv(m: ModelBuilder, x: int, padding: int, stride: int, dilation: int, activation: int) -> int:
    w, bias = m.tensor([6, 3, 3, 4], data=_weights([6, 3, 3, 4])), m.tensor([6], data=_weights([6], 2))
    y = m.tensor(_spatial_shape(padding, stride, dilation, (3, 3), 6))
    m.op(
        "CONV_2D",
        [x, w, bias],
        [y],
        "Conv2DOptions",
        Padding=padding,
        StrideH=stride,
        StrideW=stride,
        DilationHFactor=dilation,
        DilationWFactor=dilation,
        FusedActivationFunction=activation,
    )
    return y


def _depthwise(m: ModelBuilder, x: int, padding: int, stride: int, dilation: int, activation: int) -> int:
    w, bias = m.tensor([1, 3, 3, 8], data=_weights([1, 3, 3, 8])), m.tensor([8], data=_weights([8], 2))
    y = m.tensor(_spatial_shape(padding, stride, dilation, (3, 3), 8))
    m.op(
        "DEPTHWISE_CONV_2D",
        [x, w, bias],
        [y],
        "DepthwiseConv2DOptions",
        Padding=padding,
        StrideH=stride,
        StrideW=stride,
        DepthMultiplier=2,
        DilationHFactor=dilation,
        DilationWFactor=dilation,
        FusedActivationFunction=activation,
    )
    return y


def _pool(name: str):
    def pool(m: ModelBuilder, x: int, padding: int, stride: int, dilation: int, activation: int) -> int:
        y = m.tensor(_spatial_shape(padding, stride, 1, (3, 2), 4))
        m.op(
            name,
            [x],
            [y],
            "Pool2DOptions",
            Padding=padding,
            StrideH=stride,
            StrideW=stride,
            FilterHeight=3,
            FilterWidth=2,
            FusedActivationFunction=activation,
        )
        return y

    return pool


SPATIAL = {
    "conv": _conv,
    "depthwise": _depthwise,
    "max_pool": _pool("MAX_POOL_2D"),
    "avg_pool": _pool("AVERAGE_POOL_2D"),
}


@pytest.mark.parametrize("padding", [SAME, VALID], ids=["same", "valid"])
@pytest.mark.parametrize("stride, dilation", [(1, 1), (2, 1), (1, 2)], ids=["s1", "s2", "d2"])
@pytest.mark.parametrize("kind", SPATIAL)
def test_spatial_operators_match_litert(kind: str, padding: int, stride: int, dilation: int):
    if kind.endswith("pool") and dilation > 1:
        pytest.skip("TFLite pooling has no dilation")
    m = ModelBuilder()
    x = m.tensor(NHWC)
    y = SPATIAL[kind](m, x, padding, stride, dilation, RELU6)
    _assert_close(m.build([x], [y]))


def _elementwise(m: ModelBuilder, x: int) -> int:
    alpha, other = m.tensor([1, 1, 4], data=_weights([1, 1, 4])), m.tensor([4], data=_weights([4], 3))
    a, b, c, d = (m.tensor(NHWC) for _ in range(4))
    m.op("PRELU", [x, alpha], [a])
    m.op("ADD", [a, other], [b], "AddOptions", FusedActivationFunction=tflite.ActivationFunctionType.RELU)
    m.op("MUL", [b, x], [c], "MulOptions", FusedActivationFunction=tflite.ActivationFunctionType.RELU_N1_TO_1)
    m.op("LOGISTIC", [c], [d])
    return d


def _layout(m: ModelBuilder, x: int) -> int:
    pads = m.tensor([4, 2], I32, data=[[0, 0], [1, 2], [0, 1], [0, 0]])
    size = m.tensor([2], I32, data=[5, 7])
    p, r, n, j, s = (
        m.tensor([1, 12, 9, 4]),
        m.tensor([1, 5, 7, 4]),
        m.tensor([1, 5, 7, 4]),
        m.tensor([1, 5, 7, 8]),
        m.tensor([1, 10, 14, 2]),
    )
    m.op("PAD", [x, pads], [p])
    m.op("RESIZE_BILINEAR", [p, size], [r], "ResizeBilinearOptions", HalfPixelCenters=True)
    m.op("RESIZE_NEAREST_NEIGHBOR", [p, size], [n], "ResizeNearestNeighborOptions")
    m.op("CONCATENATION", [r, n], [j], "ConcatenationOptions", Axis=3)
    m.op("DEPTH_TO_SPACE", [j], [s], "DepthToSpaceOptions", BlockSize=2)
    return s


def _head(m: ModelBuilder, x: int) -> int:
    shape = m.tensor([2], I32, data=[1, 288])
    flat, logits, probs = m.tensor([1, 288]), m.tensor([1, 5]), m.tensor([1, 5])
    weights, bias = m.tensor([5, 288], data=_weights([5, 288])), m.tensor([5], data=_weights([5], 4))
    m.op("RESHAPE", [x, shape], [flat])
    m.op("FULLY_CONNECTED", [flat, weights, bias], [logits], "FullyConnectedOptions")
    m.op("SOFTMAX", [logits], [probs], "SoftmaxOptions", Beta=0.5)
    return probs


@pytest.mark.parametrize("chain", [_elementwise, _layout, _head], ids=lambda chain: chain.__name__[1:])
def test_operator_chains_match_litert(chain):
    m = ModelBuilder()
    x = m.tensor(NHWC)
    _assert_close(m.build([x], [chain(m, x)]))


def test_float16_weights_are_dequantized_at_load():
    m = ModelBuilder()
    x = m.tensor(NHWC)
    half = m.tensor([6, 3, 3, 4], tflite.TensorType.FLOAT16, data=_weights([6, 3, 3, 4]))
    w, y, bias = m.tensor([6, 3, 3, 4]), m.tensor([1, 9, 8, 6]), m.tensor([6], data=_weights([6], 2))
    m.op("DEQUANTIZE", [half], [w])
    m.op("CONV_2D", [x, w, bias], [y], "Conv2DOptions", Padding=SAME, StrideH=1, StrideW=1)
    model = m.build([x], [y])
    graph = TFLiteLoader().load(ModelSource.of(model), Limits())
    assert [node.op_type for node in graph.nodes] == ["Transpose", "Conv", "Transpose"]
    _assert_close(model)


def test_int8_per_channel_convolution_within_one_step():
    m = ModelBuilder()
    x = m.tensor(NHWC)
    scales = np.array([0.01, 0.02, 0.015, 0.03, 0.01, 0.02], np.float32)
    q = m.tensor(NHWC, I8, quant=([0.02], [3], 0))
    weights = np.clip(np.round(_weights([6, 3, 3, 4]) / scales[:, None, None, None]), -127, 127)
    w = m.tensor([6, 3, 3, 4], I8, data=weights, quant=(scales, [0] * 6, 0))
    bias = m.tensor([6], I32, data=[10, -20, 30, 0, 5, -5], quant=(scales * 0.02, [0] * 6, 0))
    qy, y = m.tensor([1, 9, 8, 6], I8, quant=([0.05], [-2], 0)), m.tensor([1, 9, 8, 6])
    m.op("QUANTIZE", [x], [q])
    m.op("CONV_2D", [q, w, bias], [qy], "Conv2DOptions", Padding=SAME, StrideH=1, StrideW=1)
    m.op("DEQUANTIZE", [qy], [y])
    got, want = _run_both(m.build([x], [y]))
    np.testing.assert_allclose(got[0], want[0], rtol=0, atol=0.05 + 1e-6)


# -- structure, refusals and bounds -------------------------------------------------------------


def _relu_model(**extra: Any) -> bytes:
    m = ModelBuilder()
    for key, value in extra.items():
        setattr(m, key, value)
    x, y = m.tensor([2, 3]), m.tensor([2, 3])
    m.op("RELU", [x], [y])
    return m.build([x], [y])


def test_sniff_reads_the_identifier_at_offset_four():
    loader = TFLiteLoader()
    assert loader.sniff(_relu_model()[:64])
    assert not loader.sniff(b"\x08\x07\x12\x04TFL2" + bytes(56))
    assert not loader.sniff(b"TFL3" + bytes(60))


def test_spawnml_load_finds_the_tflite_loader():
    graph = spawnml.load(_relu_model())
    assert graph.metadata["format"] == "tflite"
    assert [(v.name, v.shape) for v in graph.inputs] == [("t0", (2, 3))]
    assert [(n.op_type, n.outputs) for n in graph.nodes] == [("Relu", ["t1"])]


def test_unknown_operators_are_refused_by_name_at_session_creation():
    m = ModelBuilder()
    x, y, z = m.tensor([4]), m.tensor([4]), m.tensor([4])
    m.op("GELU", [x], [y])
    m.op("MyCustomOp", [y], [z])
    graph = spawnml.load(m.build([x], [z]))
    assert [(n.domain, n.op_type) for n in graph.nodes] == [("tflite", "GELU"), ("tflite", "MyCustomOp")]
    with pytest.raises(UnsupportedOperatorError, match=r"tflite::GELU[\s\S]*tflite::MyCustomOp"):
        spawnml.InferenceSession(graph, providers=["cpu"])


def test_unused_extra_subgraphs_are_refused():
    with pytest.raises(ModelLoadError, match="2 subgraphs but no control-flow operator"):
        spawnml.load(_relu_model(extra_subgraphs=1))


@pytest.mark.parametrize(
    "corrupt, message",
    [
        (lambda data: data[:12], "not a valid TFLite model|claims"),
        (
            lambda data: data[:4] + b"TFL3" + b"\xff" * (len(data) - 8),
            "not a valid TFLite model|claims|version",
        ),
    ],
    ids=["truncated", "garbage"],
)
def test_corrupt_files_are_refused(corrupt, message):
    with pytest.raises(ModelLoadError, match=message):
        TFLiteLoader().load(ModelSource.of(corrupt(_relu_model())), Limits())


def test_node_count_limit_applies_to_operators():
    with pytest.raises(ModelLoadError, match="node count"):
        TFLiteLoader().load(ModelSource.of(_relu_model()), Limits(max_nodes=0))


def test_tensor_elements_limit_applies_to_declared_shapes():
    with pytest.raises(ModelLoadError, match="tensor elements"):
        TFLiteLoader().load(ModelSource.of(_relu_model()), Limits(max_tensor_elements=5))


def test_densify_expands_block_csr():
    """A 4x4 matrix in 2x2 blocks: dense block rows, CSR block columns, dense blocks."""
    dense = np.zeros((4, 4), np.float32)
    dense[0:2, 2:4] = [[1, 2], [3, 4]]
    dense[2:4, 0:2] = [[5, 6], [7, 8]]
    b = flatbuffers.Builder(256)
    levels = []
    for fmt, size, segments, indices in [
        (0, 2, None, None),
        (1, 0, [0, 1, 2], [1, 0]),
        (0, 2, None, None),
        (0, 2, None, None),
    ]:
        fields: dict[str, Any] = {"Format": fmt, "DenseSize": size}
        if segments is not None:
            seg = _index_table(b, segments)
            idx = _index_table(b, indices)
            fields |= {
                "ArraySegmentsType": 1,
                "ArraySegments": seg,
                "ArrayIndicesType": 1,
                "ArrayIndices": idx,
            }
        levels.append(_end(b, "DimensionMetadata", fields))
    b.StartVector(4, len(levels), 4)
    for level in reversed(levels):
        b.PrependUOffsetTRelative(level)
    metadata = b.EndVector()
    order = b.CreateNumpyVector(np.array([0, 1, 2, 3], np.int32))
    block_map = b.CreateNumpyVector(np.array([0, 1], np.int32))
    b.Finish(
        _end(
            b, "SparsityParameters", {"TraversalOrder": order, "BlockMap": block_map, "DimMetadata": metadata}
        )
    )
    sparsity = tflite.SparsityParameters.GetRootAs(b.Output(), 0)
    values = np.arange(1, 9, dtype=np.float32)
    parsed = type("Parsed", (), {"data": bytes(1 << 10), "count": lambda self, what, n, entry_bytes=4: n})()
    np.testing.assert_array_equal(densify(parsed, values, (4, 4), sparsity, "test"), dense)


def _index_table(b: flatbuffers.Builder, values: list[int]) -> int:
    return _end(b, "Int32Vector", {"Values": b.CreateNumpyVector(np.asarray(values, np.int32))})


def _end(b: flatbuffers.Builder, name: str, fields: dict[str, Any]) -> int:
    module = _schema(name)
    getattr(module, f"{name}Start")(b)
    for field, value in fields.items():
        getattr(module, f"{name}Add{field}")(b, value)
    return getattr(module, f"{name}End")(b)


# -- strided slices and splits ----------------------------------------------------------------


@pytest.mark.parametrize(
    "begin, end, strides, masks, shape",
    [
        ([0, 1, -1], [0, 5, 0], [1, 2, -1], {"BeginMask": 1, "EndMask": 5}, [2, 2, 6]),
        ([-1, 0, 1], [0, 5, 4], [1, 1, 2], {"ShrinkAxisMask": 1}, [5, 2]),
        ([1, 0, 0], [1, 0, 0], [1, 1, 1], {"ShrinkAxisMask": 1, "EndMask": 6}, [5, 6]),
        ([0, 1, 2], [2, 3, 3], [1, 1, 1], {"Offset": True}, [2, 3, 3]),
    ],
    ids=["masks-negative-stride", "shrink-last", "shrink-first-end-masks", "offset"],
)
def test_strided_slice_matches_litert(begin, end, strides, masks, shape):
    m = ModelBuilder()
    x, y = m.tensor([2, 5, 6]), m.tensor(shape)
    ints = [m.tensor([3], I32, data=values) for values in (begin, end, strides)]
    m.op("STRIDED_SLICE", [x, *ints], [y], "StridedSliceOptions", **masks)
    model = m.build([x], [y])
    assert [n.op_type for n in spawnml.load(model).nodes if n.op_type != "Squeeze"] == ["Slice"]
    _assert_close(model, rtol=0, atol=0)


def test_split_v_with_a_remainder_matches_litert():
    m = ModelBuilder()
    x, parts = m.tensor([2, 6, 3]), [m.tensor([2, size, 3]) for size in (2, 3, 1)]
    sizes, axis = m.tensor([3], I32, data=[2, -1, 1]), m.tensor([], I32, data=1)
    m.op("SPLIT_V", [x, sizes, axis], parts, "SplitVOptions", NumSplits=3)
    _assert_close(m.build([x], parts), rtol=0, atol=0)


# -- resource variables -----------------------------------------------------------------------


def _variable(m: ModelBuilder, name: str = "total") -> int:
    handle = m.tensor([], tflite.TensorType.RESOURCE)
    m.op("VAR_HANDLE", [], [handle], "VarHandleOptions", SharedName=m.b.CreateString(name))
    return handle


def _accumulator(initial: Any = ((1.0, 2.0),), computed_init: bool = False, call_once: bool = True) -> bytes:
    """``y = x + total; total = y`` over float [1, 2], ``total`` initialised by CALL_ONCE."""
    m = ModelBuilder()
    if call_once:
        handle, value = _variable(m), m.tensor(list(np.shape(initial)), F32, data=initial)
        if computed_init:
            doubled = m.tensor([1, 2])
            m.op("ADD", [value, value], [doubled], "AddOptions")
            value = doubled
        m.op("ASSIGN_VARIABLE", [handle, value], [])
        m.set_aside()
        m.op("CALL_ONCE", [], [], "CallOnceOptions", InitSubgraphIndex=1)
    x, handle, total, y = m.tensor([1, 2]), _variable(m), m.tensor([1, 2]), m.tensor([1, 2])
    m.op("READ_VARIABLE", [handle], [total])
    m.op("ADD", [x, total], [y], "AddOptions")
    m.op("ASSIGN_VARIABLE", [handle, y], [])
    return m.build([x], [y])


def test_resource_variables_keep_state_between_runs_as_litert():
    model = _accumulator()
    graph = spawnml.load(model)
    assert [(s.name, s.initial.tolist()) for s in graph.states] == [("total", [[1.0, 2.0]])]
    interpreter = litert.Interpreter(model_content=model)
    interpreter.allocate_tensors()
    (source,), (target,) = interpreter.get_input_details(), interpreter.get_output_details()
    session = spawnml.InferenceSession(model, providers=["cpu"])
    assert [arg.name for arg in session.get_inputs()] == [source["name"]]
    assert [arg.name for arg in session.get_outputs()] == [target["name"]]
    rng = np.random.default_rng(0)
    for _ in range(5):
        x = rng.uniform(-1, 1, (1, 2)).astype(np.float32)
        interpreter.set_tensor(source["index"], x)
        interpreter.invoke()
        (ours,) = session.run(None, {source["name"]: x})
        np.testing.assert_allclose(ours, interpreter.get_tensor(target["index"]), rtol=1e-6, atol=1e-6)
    session.reset_state()
    (first,) = session.run(None, {source["name"]: np.zeros((1, 2), np.float32)})
    np.testing.assert_array_equal(first, [[1.0, 2.0]])


def test_the_saved_onnx_graph_carries_the_state_as_inputs_and_outputs(tmp_path):
    path = tmp_path / "accumulator.onnx"
    options = spawnml.SessionOptions(optimized_model_filepath=path)
    stateful = spawnml.InferenceSession(_accumulator(), options, providers=["cpu"])
    stateless = spawnml.InferenceSession(path, providers=["cpu"])
    state = stateful.graph.states[0]
    assert [arg.name for arg in stateless.get_inputs()][1:] == [state.input]
    x = np.ones((1, 2), np.float32)
    ours, following = stateless.run(None, {"t0": x, state.input: state.initial})
    np.testing.assert_array_equal(ours, stateful.run(None, {"t0": x})[0])
    np.testing.assert_array_equal(following, ours)


def test_initialisers_that_compute_are_refused_naming_the_operator():
    with pytest.raises(ModelLoadError, match=r"CALL_ONCE subgraph 1 .* runs ADD \(operator 1\)"):
        spawnml.load(_accumulator(computed_init=True))


def test_variables_read_before_any_initialisation_are_refused():
    with pytest.raises(ModelLoadError, match=r"'total' .* is read before anything assigns it"):
        spawnml.load(_accumulator(call_once=False))


def test_initial_values_of_another_shape_are_refused():
    with pytest.raises(ModelLoadError, match=r"initialised to float32\[3\] but read as float32\[1, 2\]"):
        spawnml.load(_accumulator(initial=np.zeros(3)))


def test_a_graph_whose_state_names_no_input_is_refused():
    graph = spawnml.load(_accumulator())
    graph.states[0] = dataclasses.replace(graph.states[0], input="nowhere")
    with pytest.raises(spawnml.InvalidArgumentError, match=r"'nowhere' and writes .* a graph input"):
        spawnml.InferenceSession(graph, providers=["cpu"])
