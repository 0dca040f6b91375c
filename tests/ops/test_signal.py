"""Signal-processing operators against the ONNX node tests and onnxruntime: DFT, STFT, the
windows and MelWeightMatrix."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
import spawnml
from spawnml.ir import Node
from spawnml.ops.defs.signal import SCHEMAS
from spawnml.ops.registry import OperatorRegistry
from spawnml.ops.schema import InferenceContext, TensorType

from tests.ops.test_misc import assert_node_cases, check_reference, one_node, randn, refused, run, run_spawnml

#: Single-precision FFTs of a few dozen unit-scale values, against onnxruntime's.
FFT = {"rtol": 1e-4, "atol": 1e-4}


@pytest.mark.parametrize(
    "op_type", ["DFT", "STFT", "HannWindow", "HammingWindow", "BlackmanWindow", "MelWeightMatrix"]
)
def test_node_cases(op_type):
    assert_node_cases(op_type)


# ---------------------------------------------------------------------------- DFT


def _signal(*shape: int, parts: int, dtype=np.float32) -> np.ndarray:
    return randn(*shape, parts, dtype=dtype)


def _dft(check, inputs: dict, opset: int, **attrs) -> None:
    """Against onnxruntime, except an inverse one-sided DFT whose length is not the default
    ``2 * (bins - 1)``: onnxruntime reads its input differently from ONNX's reference
    (numpy's ``irfft``, which truncates or zero-pads the bins to ``length // 2 + 1``)."""
    model, feeds = one_node("DFT", inputs, constants=("n", "axis"), opset=opset, **attrs)
    if attrs.get("inverse") and attrs.get("onesided") and inputs.get("n") is not None:
        check_reference(model, feeds, **FFT)
    else:
        check(model, feeds, **FFT)


@pytest.mark.parametrize("axis", [1, 2, -2, -3])
@pytest.mark.parametrize(
    ("inverse", "onesided", "parts"), [(0, 0, 1), (0, 0, 2), (1, 0, 2), (0, 1, 1), (1, 1, 2)]
)
@pytest.mark.parametrize("length", [None, 6, 12])
def test_dft_opset_20(check, axis, inverse, onesided, parts, length):
    inputs = {
        "x": _signal(2, 8, 7, parts=parts),
        "n": None if length is None else np.array(length, np.int64),
        "axis": np.array(axis, np.int64),
    }
    _dft(check, inputs, 20, inverse=inverse, onesided=onesided)


@pytest.mark.parametrize("axis", [1, 2, -2])
@pytest.mark.parametrize(("inverse", "onesided", "parts"), [(0, 0, 2), (1, 0, 2), (0, 1, 1), (1, 1, 2)])
def test_dft_opset_17(check, axis, inverse, onesided, parts):
    inputs = {"x": _signal(3, 6, 5, parts=parts), "n": np.array(10, np.int32)}
    _dft(check, inputs, 17, axis=axis, inverse=inverse, onesided=onesided)


def test_dft_defaults_and_double(check):
    run(check, "DFT", {"x": _signal(2, 16, 3, parts=1, dtype=np.float64)}, opset=20, tolerance=FFT)
    run(check, "DFT", {"x": _signal(4, 9, parts=2)}, opset=17, tolerance=FFT)


def test_dft_refusals_and_errors():
    refused(one_node("DFT", {"x": randn(2, 4, 1)}, opset=20, onesided=2)[0], "onesided")
    model, feeds = one_node("DFT", {"x": randn(2, 4, 2)}, opset=20, onesided=1)
    with pytest.raises(spawnml.ExecutionError, match="real input"):
        spawnml.InferenceSession(model.SerializeToString(), providers=["cpu"]).run(None, feeds)


# ---------------------------------------------------------------------------- STFT


@pytest.mark.parametrize("onesided", [0, 1])
@pytest.mark.parametrize(("length", "step", "frame"), [(64, 8, 16), (50, 7, 10), (16, 4, 16)])
@pytest.mark.parametrize("window", [False, True])
def test_stft(check, onesided, length, step, frame, window):
    inputs = {
        "signal": randn(2, length, 1),
        "step": np.array(step, np.int64),
        "window": np.hanning(frame).astype(np.float32) if window else None,
        "frame": np.array(frame, np.int64),
    }
    run(check, "STFT", inputs, constants=("step", "frame"), opset=17, tolerance=FFT, onesided=onesided)


def test_stft_frame_length_from_window(check):
    inputs = {
        "signal": randn(1, 40, 1),
        "step": np.array(5, np.int64),
        "window": np.hamming(12).astype(np.float32),
    }
    run(check, "STFT", inputs, constants=("step",), opset=17, tolerance=FFT)


def test_stft_complex_signal(check):
    inputs = {
        "signal": randn(1, 30, 2),
        "step": np.array(6, np.int64),
        "window": None,
        "frame": np.array(8, np.int64),
    }
    run(check, "STFT", inputs, constants=("step", "frame"), opset=17, tolerance=FFT, onesided=0)


# ---------------------------------------------------------------------------- windows and mel weights


WINDOWS = ["HannWindow", "HammingWindow", "BlackmanWindow"]


@pytest.mark.parametrize("op", WINDOWS)
@pytest.mark.parametrize("size", [1, 2, 10, 33])
@pytest.mark.parametrize("periodic", [0, 1])
@pytest.mark.parametrize("output", [onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE])
def test_windows(check, op, size, periodic, output):
    """A symmetric window of one sample divides by zero: NaN, as in onnxruntime."""
    inputs = {"size": np.array(size, np.int64)}
    run(check, op, inputs, constants=("size",), opset=17, periodic=periodic, output_datatype=output)


@pytest.mark.parametrize("op", WINDOWS)
def test_window_integer_output(op):
    """Integer windows truncate the double-precision window, as onnx's reference does."""
    model, feeds = one_node(op, {"size": np.array(16, np.int32)}, opset=17, output_datatype=7)
    check_reference(model, feeds)


def test_window_refuses_string_output_and_empty_size():
    refused(one_node("HannWindow", {"s": np.array(4)}, opset=17, output_datatype=8)[0], "numeric")
    model, feeds = one_node("HannWindow", {"s": np.array(0)}, opset=17)
    with pytest.raises(spawnml.ExecutionError, match="positive"):
        run_spawnml(model, feeds)


@pytest.mark.parametrize(
    ("bins", "dft_length", "rate", "low", "high"),
    [(8, 16, 8000, 0.0, 4000.0), (20, 512, 16000, 20.0, 8000.0), (5, 64, 22050, 300.0, 3000.0)],
)
@pytest.mark.parametrize("output", [onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE])
def test_mel_weight_matrix(check, bins, dft_length, rate, low, high, output):
    inputs = {
        "bins": np.array(bins, np.int64),
        "length": np.array(dft_length, np.int64),
        "rate": np.array(rate, np.int64),
        "low": np.array(low, np.float32),
        "high": np.array(high, np.float32),
    }
    run(check, "MelWeightMatrix", inputs, constants=tuple(inputs), opset=17, output_datatype=output)


# ---------------------------------------------------------------------------- shape inference


def _constant(value: int) -> np.ndarray:
    return np.array(value, np.int64)


@pytest.mark.parametrize(
    ("op", "opset", "inputs", "attrs", "expected"),
    [
        ("DFT", 20, [(2, "n", 5, 1), None, _constant(-2)], {}, (2, "n", 5, 2)),
        ("DFT", 20, [(2, "n", 5, 1), _constant(8), _constant(2)], {"onesided": 1}, (2, "n", 5, 2)),
        ("DFT", 20, [(2, 6, 5, 2), None, _constant(1)], {"onesided": 1, "inverse": 1}, (2, 10, 5, 1)),
        ("DFT", 20, [(2, 6, 5, 2), (), ()], {}, (None, None, None, 2)),
        ("DFT", 20, [(2, 6, 5, 2)], {}, (2, 6, 5, 2)),
        ("DFT", 17, [(2, 6, 5, 1), _constant(9)], {"axis": 2, "onesided": 1}, (2, 6, 5, 2)),
        ("STFT", 17, [("b", 100, 1), _constant(10), None, _constant(20)], {}, ("b", 9, 11, 2)),
        ("STFT", 17, [(1, 100, 1), _constant(16), (16,)], {"onesided": 0}, (1, 6, 16, 2)),
        ("STFT", 17, [(1, 100, 2), ()], {"onesided": 0}, (1, None, 100, 2)),
        ("HannWindow", 17, [_constant(7)], {"output_datatype": 11}, (7,)),
        ("MelWeightMatrix", 17, [_constant(8), _constant(64), (), (), ()], {}, (33, 8)),
    ],
)
def test_symbolic_shapes(op, opset, inputs, attrs, expected):
    """Inputs are shapes, constants (arrays) or None (omitted)."""
    schema = OperatorRegistry(SCHEMAS).lookup("", op, opset)
    node = Node(op, ["" if value is None else f"i{i}" for i, value in enumerate(inputs)], ["y"], attrs)
    types = [
        None if value is None else TensorType(np.dtype(np.float32), getattr(value, "shape", value))
        for value in inputs
    ]
    constants = [value if isinstance(value, np.ndarray) else None for value in inputs]
    ctx = InferenceContext(node, opset, schema.resolve_attrs(node), types, constants)
    assert schema.infer(ctx)[0].shape == expected


def test_window_size_must_be_positive():
    schema = OperatorRegistry(SCHEMAS).lookup("", "HannWindow", 17)
    node = Node("HannWindow", ["s"], ["y"])
    ctx = InferenceContext(node, 17, schema.resolve_attrs(node), [TensorType(None, ())], [_constant(0)])
    with pytest.raises(spawnml.errors.InvalidGraphError, match="positive"):
        schema.infer(ctx)
