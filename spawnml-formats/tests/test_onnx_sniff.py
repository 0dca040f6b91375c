"""Recognising ONNX files by their first bytes, and not mistaking other formats for them."""

from __future__ import annotations

import json
import pickle
import struct

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from spawnml.formats import HEAD_BYTES
from spawnml_formats.onnx.loader import ONNXLoader

sniff = ONNXLoader().sniff


def _model(**fields) -> bytes:
    node = helper.make_node("Relu", ["x"], ["y"])
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
    )
    return helper.make_model(graph, **fields).SerializeToString()[:HEAD_BYTES]


def _safetensors(header_length: int) -> bytes:
    header = json.dumps({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}).encode()
    return (struct.pack("<Q", header_length) + header)[:HEAD_BYTES]


ONNX_HEADS = {
    "helper model": _model(),
    "old IR version": _model(ir_version=3),
    "with producer": _model(producer_name="pytorch", producer_version="2.1.0"),
    "unicode producer cut by the head": _model(producer_name="é" * 40),
    "with doc string": _model(doc_string="a model\nwith lines"),
    "with model version and domain": _model(domain="ai.example", model_version=7),
    "pytorch export head": b"\x08\x0a\x12\x07pytorch\x1a\x0a2.11.0+cpu:\xc9\xb9\xf7\x0a\x0a\x95\x01",
}

OTHER_HEADS = {
    "empty": b"",
    "ir_version alone": b"\x08\x07",
    "ir_version zero": b"\x08\x00\x3a\x02\x0a\x00",
    "GGUF": b"GGUF\x03\x00\x00\x00" + bytes(56),
    "zip (PyTorch checkpoint)": b"PK\x03\x04\x14\x00\x00\x00\x08\x00" + bytes(54),
    "TFLite": b"\x1c\x00\x00\x00TFL3\x14\x00\x20\x00" + bytes(52),
    "TFLite with root offset 8": b"\x08\x00\x00\x00TFL3" + bytes(56),
    "pickle": pickle.dumps({"w": [1.0, 2.0]}, protocol=2)[:HEAD_BYTES],
    "numpy .npy": b"\x93NUMPY\x01\x00v\x00{'descr': '<f4', 'fortran_order': False}",
    "JSON": b'{"format": "onnx", "graph": []}',
    "text": b'ir_version: 8\nproducer_name: "x"\n',
    "safetensors": _safetensors(88),
    "safetensors with 0x08 first": _safetensors(0x0808),
    "fields out of order": b"\x08\x07\x42\x04\x0a\x00\x10\x11\x12\x02ab",
    "unknown field": b"\x08\x07\x4a\x02ab",
    "wrong wire type": b"\x08\x07\x10\x07",
    "NUL in producer": b"\x08\x07\x12\x03a\x00b\x3a\x00",
    "graph not starting with a graph field": b"\x08\x07\x3a\x04\x08\x01\x08\x01",
    "overlong varint": b"\x08" + b"\xff" * 11 + b"\x01",
}


@pytest.mark.parametrize("head", ONNX_HEADS.values(), ids=ONNX_HEADS.keys())
def test_recognises_onnx(head: bytes) -> None:
    assert sniff(head)


@pytest.mark.parametrize("head", OTHER_HEADS.values(), ids=OTHER_HEADS.keys())
def test_refuses_other_formats(head: bytes) -> None:
    assert not sniff(head)


def test_refuses_every_plausible_safetensors_header_length() -> None:
    body = _safetensors(0)[8:]
    refused = [n for n in range(1, 1 << 17) if sniff((struct.pack("<Q", n) + body)[:HEAD_BYTES])]
    assert refused == []


def test_recognises_a_saved_model_file(tmp_path) -> None:
    graph = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
        [onnx.numpy_helper.from_array(np.ones(1000, np.float32), "w")],
    )
    path = tmp_path / "m.onnx"
    onnx.save_model(helper.make_model(graph), path)
    assert sniff(path.read_bytes()[:HEAD_BYTES])
