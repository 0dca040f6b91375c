"""Hostile GGUF, SafeTensors and TFLite files: headers whose counts, sizes and offsets lie."""

from __future__ import annotations

import importlib
import json
import struct
from pathlib import Path

import flatbuffers
import numpy as np
import tflite
from spawnml import ModelLoadError

from .corpus import Build, Hostile


def written(name: str, data: bytes) -> Build:
    def build(folder: Path) -> Path:
        path = folder / name
        path.write_bytes(data)
        return path

    return build


# ---------------------------------------------------------------------------- GGUF


def gguf_header(tensors: int, kvs: int, version: int = 3) -> bytes:
    return b"GGUF" + struct.pack("<IQQ", version, tensors, kvs)


def gguf_string(text: str, length: int | None = None) -> bytes:
    return struct.pack("<Q", len(text) if length is None else length) + text.encode()


def gguf_tensor(dims: tuple[int, ...], ggml_type: int = 0, offset: int = 0, data: int = 0) -> bytes:
    """One tensor described with ``dims``, followed by ``data`` bytes after the aligned header."""
    described = gguf_header(1, 0) + gguf_string("w") + struct.pack("<I", len(dims))
    described += struct.pack(f"<{len(dims)}QIQ", *dims, ggml_type, offset)
    return described + bytes(-len(described) % 32 + data)


GGUF = [
    ("tensor-count-2^60", gguf_header(1 << 60, 0)),
    ("kv-count-2^60", gguf_header(0, 1 << 60)),
    ("key-length-2^63", gguf_header(0, 1) + gguf_string("k", 1 << 63)),
    ("array-length-2^60", gguf_header(0, 1) + gguf_string("a") + struct.pack("<IIQ", 9, 4, 1 << 60)),
    ("unknown-value-type", gguf_header(0, 1) + gguf_string("a") + struct.pack("<I", 99)),
    ("version-99", gguf_header(0, 0, version=99)),
    ("tensor-past-the-end", gguf_tensor((16, 4), data=16)),
    ("tensor-offset-2^62", gguf_tensor((4,), offset=1 << 62, data=16)),
    ("tensor-dims-2^40", gguf_tensor((1 << 40, 1 << 40), data=16)),
    ("tensor-rank-1000", gguf_tensor((1,) * 1000, data=16)),
    ("tensor-unknown-type", gguf_tensor((4,), ggml_type=1000, data=16)),
    ("magic-only", b"GGUF"),
]

# ---------------------------------------------------------------------------- SafeTensors


def safetensors(header: dict | bytes, data: bytes = b"", length: int | None = None) -> bytes:
    text = header if isinstance(header, bytes) else json.dumps(header).encode()
    return struct.pack("<Q", len(text) if length is None else length) + text + data


def one_float(**fields) -> dict:
    return {"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16], **fields}}


SAFETENSORS = [
    ("length-past-the-end", safetensors(one_float(), bytes(16), length=1 << 20)),
    ("length-2^63", safetensors(one_float(), bytes(16), length=1 << 63)),
    ("offsets-past-the-end", safetensors(one_float(data_offsets=[0, 1 << 40]), bytes(16))),
    ("offsets-reversed", safetensors(one_float(data_offsets=[16, 0]), bytes(16))),
    ("offsets-negative", safetensors(one_float(data_offsets=[-16, 0]), bytes(16))),
    ("shape-disagrees", safetensors(one_float(shape=[1 << 40, 1 << 40]), bytes(16))),
    ("shape-negative", safetensors(one_float(shape=[-4]), bytes(16))),
    ("unknown-dtype", safetensors(one_float(dtype="F13"), bytes(16))),
    ("overlapping", safetensors({**one_float(), "v": one_float()["w"]}, bytes(16))),
    ("not-json", safetensors(b"{" + b"\xff" * 30, bytes(16))),
    ("nested-100000", safetensors(b"{" + b'"a":[' * 100_000, bytes(16))),
]

# ---------------------------------------------------------------------------- TFLite


def tflite_model(
    shape: tuple[int, ...] = (4,),
    buffer: int = 1,
    opcode: int = 0,
    operator_input: int = 0,
    data: bytes = bytes(16),
    subgraph_inputs: tuple[int, ...] = (0,),
) -> bytes:
    """``y = x + w`` with a float ``w`` of ``shape`` in ``buffer``; each argument can lie."""
    b = flatbuffers.Builder(256)

    def table(name: str, **fields) -> int:
        module = importlib.import_module(f"tflite.{name}")
        getattr(module, f"{name}Start")(b)
        for field, value in fields.items():
            getattr(module, f"{name}Add{field}")(b, value)
        return getattr(module, f"{name}End")(b)

    def offsets(items: list[int]) -> int:
        b.StartVector(4, len(items), 4)
        for item in reversed(items):
            b.PrependUOffsetTRelative(item)
        return b.EndVector()

    def ints(values: tuple[int, ...]) -> int:
        return b.CreateNumpyVector(np.asarray(values, np.int32))

    buffers = [table("Buffer"), table("Buffer", Data=b.CreateNumpyVector(np.frombuffer(data, np.uint8)))]
    tensors = [
        table("Tensor", Shape=ints(s), Type=tflite.TensorType.FLOAT32, Buffer=k, Name=b.CreateString(n))
        for n, s, k in (("x", (4,), 0), ("w", shape, buffer), ("y", (4,), 0))
    ]
    add = tflite.BuiltinOperator.ADD
    code = table("OperatorCode", BuiltinCode=add, DeprecatedBuiltinCode=add, Version=1)
    operator = table("Operator", OpcodeIndex=opcode, Inputs=ints((operator_input, 1)), Outputs=ints((2,)))
    subgraph = table(
        "SubGraph",
        Tensors=offsets(tensors),
        Inputs=ints(subgraph_inputs),
        Outputs=ints((2,)),
        Operators=offsets([operator]),
    )
    root = table(
        "Model",
        Version=3,
        OperatorCodes=offsets([code]),
        Subgraphs=offsets([subgraph]),
        Buffers=offsets(buffers),
    )
    b.Finish(root, file_identifier=b"TFL3")
    return bytes(b.Output())


def root_offset(data: bytes, offset: int) -> bytes:
    return struct.pack("<I", offset) + data[4:]


def operator_inputs_claim(count: int) -> bytes:
    """The model with its operator's input vector claiming ``count`` entries."""
    data = bytearray(tflite_model())
    operator = tflite.Model.GetRootAsModel(data, 0).Subgraphs(0).Operators(0)
    start = operator._tab.Vector(operator._tab.Offset(6))
    struct.pack_into("<I", data, start - 4, count)
    return bytes(data)


TFLITE = [
    ("buffer-index-99", tflite_model(buffer=99)),
    ("opcode-index-7", tflite_model(opcode=7)),
    ("operator-input-1000", tflite_model(operator_input=1000)),
    ("subgraph-input-negative", tflite_model(subgraph_inputs=(-5,))),
    ("shape-2^30-squared", tflite_model(shape=(1 << 30, 1 << 30))),
    ("shape-negative", tflite_model(shape=(-4,))),
    ("data-shorter-than-shape", tflite_model(shape=(64,))),
    ("root-offset-past-the-end", root_offset(tflite_model(), 0x7FFFFFF0)),
    ("truncated", tflite_model()[:120]),
    ("operator-inputs-2^20", operator_inputs_claim(1 << 20)),
]

HOSTILE = [
    *(Hostile(f"gguf-{name}", written("model.gguf", data), ModelLoadError) for name, data in GGUF),
    *(Hostile(f"safetensors-{n}", written("model.safetensors", d), ModelLoadError) for n, d in SAFETENSORS),
    *(Hostile(f"tflite-{name}", written("model.tflite", data), ModelLoadError) for name, data in TFLITE),
]
#: Files refused by a limit rather than as malformed.
LIMITED = {"gguf-tensor-dims-2^40", "safetensors-length-2^63"}
