"""The GGUF loader on small files written with ``gguf.GGUFWriter``, compared with ``gguf.GGUFReader``;
and its bounds: damaged and oversized headers are refused before tensor data is touched."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest
import spawnml
from gguf import GGMLQuantizationType, GGUFReader, GGUFWriter
from gguf.quants import quantize
from spawnml import Limits
from spawnml.errors import ModelLimitError, ModelLoadError
from spawnml.formats import ModelSource
from spawnml_formats.gguf.loader import GGUFLoader, quant_type

rng = np.random.default_rng(0)
NORM = rng.standard_normal(64).astype(np.float32)
EMBED = rng.standard_normal((3, 64)).astype(np.float16)
WEIGHT = rng.standard_normal((16, 64)).astype(np.float32)
Q8 = quantize(WEIGHT, GGMLQuantizationType.Q8_0)


def write(path: Path) -> Path:
    """A small llama-like GGUF file: metadata of every kind, F32, F16 and Q8_0 tensors."""
    writer = GGUFWriter(path, "llama")
    writer.add_block_count(2)
    writer.add_float32("llama.attention.layer_norm_rms_epsilon", 1e-5)
    writer.add_bool("tokenizer.ggml.add_bos_token", True)
    writer.add_string("tokenizer.ggml.model", "gpt2")
    writer.add_array("tokenizer.ggml.tokens", ["<s>", "é", "b"])
    writer.add_array("tokenizer.ggml.scores", [0.5, -1.0, 2.0])
    writer.add_tensor("blk.0.attn_norm.weight", NORM)
    writer.add_tensor("token_embd.weight", EMBED)
    writer.add_tensor("blk.0.attn_q.weight", Q8, raw_shape=Q8.shape, raw_dtype=GGMLQuantizationType.Q8_0)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


@pytest.fixture
def gguf_file(tmp_path: Path) -> Path:
    return write(tmp_path / "tiny.gguf")


def test_metadata_is_stringified(gguf_file: Path) -> None:
    graph = spawnml.load(gguf_file)
    assert graph.metadata["gguf.version"] == "3"
    assert graph.metadata["general.architecture"] == "llama"
    assert graph.metadata["llama.block_count"] == "2"
    assert graph.metadata["llama.attention.layer_norm_rms_epsilon"] == "1e-05"
    assert graph.metadata["tokenizer.ggml.add_bos_token"] == "true"
    assert graph.metadata["tokenizer.ggml.tokens"] == '["<s>", "é", "b"]'
    assert graph.metadata["tokenizer.ggml.scores"] == "[0.5, -1.0, 2.0]"
    assert "GGUF.kv_count" not in graph.metadata


def test_tensors_are_initializers_in_numpy_order(gguf_file: Path) -> None:
    graph = spawnml.load(gguf_file)
    assert not graph.nodes and not graph.inputs
    np.testing.assert_array_equal(graph.initializers["blk.0.attn_norm.weight"], NORM)
    np.testing.assert_array_equal(graph.initializers["token_embd.weight"], EMBED)
    assert graph.initializers["token_embd.weight"].dtype == np.float16
    quantized = graph.initializers["blk.0.attn_q.weight"]
    assert quantized.dtype == np.uint8 and quantized.shape == (16, 68)
    np.testing.assert_array_equal(quantized, Q8)
    assert quant_type(graph, "blk.0.attn_q.weight") == "Q8_0"
    assert quant_type(graph, "token_embd.weight") is None
    reader = GGUFReader(gguf_file)
    assert sorted(graph.initializers) == sorted(tensor.name for tensor in reader.tensors)


def test_bytes_load_like_files(gguf_file: Path) -> None:
    graph = spawnml.load(gguf_file.read_bytes())
    np.testing.assert_array_equal(graph.initializers["blk.0.attn_q.weight"], Q8)
    assert graph.metadata["tokenizer.ggml.model"] == "gpt2"


def test_detected_by_magic_and_extension(gguf_file: Path) -> None:
    loader = GGUFLoader()
    assert loader.sniff(gguf_file.read_bytes()[:64]) and not loader.sniff(b"\x08\x01ONNX")
    assert not loader.has_graph and ".gguf" in loader.extensions


def load(data: bytes, limits: Limits | None = None) -> None:
    GGUFLoader().load(ModelSource.of(data), limits or Limits())


def header(tensors: int, kvs: int) -> bytes:
    return b"GGUF" + struct.pack("<IQQ", 3, tensors, kvs)


def kv_string(key: str, value_type: int) -> bytes:
    return struct.pack("<Q", len(key)) + key.encode() + struct.pack("<I", value_type)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"GGUF\x03\x00", "the version needs 4 bytes"),
        (b"GGUF" + struct.pack("<I", 7) + bytes(16), "version 7 is not one of"),
        (header(1 << 40, 0), "tensor descriptions needs"),
        (header(0, 1 << 40), "metadata entries needs"),
        (header(0, 1) + kv_string("a", 9) + struct.pack("<IQ", 4, 1 << 60), "items of a needs"),
        (header(0, 1) + kv_string("a", 99), "unknown value type 99"),
        (header(0, 1) + struct.pack("<Q", 1000) + bytes(20), "a metadata key needs"),
    ],
)
def test_damaged_headers_are_refused(data: bytes, message: str) -> None:
    with pytest.raises(ModelLoadError, match=message):
        load(data)


def tensor_info(name: str, dims: tuple[int, ...], ggml_type: int, offset: int) -> bytes:
    encoded = struct.pack("<Q", len(name)) + name.encode() + struct.pack("<I", len(dims))
    return encoded + struct.pack(f"<{len(dims)}QIQ", *dims, ggml_type, offset)


def one_tensor(dims: tuple[int, ...], ggml_type: int = 0, offset: int = 0, data: int = 0) -> bytes:
    described = header(1, 0) + tensor_info("w", dims, ggml_type, offset)
    return described + bytes(-len(described) % 32 + data)


def test_tensor_past_the_end_is_refused() -> None:
    with pytest.raises(ModelLoadError, match="pass the file"):
        load(one_tensor((16, 4), data=16 * 4 * 4 - 1))
    load(one_tensor((16, 4), data=16 * 4 * 4))


def test_misaligned_offset_and_partial_blocks_are_refused() -> None:
    with pytest.raises(ModelLoadError, match="misaligned"):
        load(one_tensor((4,), offset=4, data=64))
    with pytest.raises(ModelLoadError, match="not whole Q8_0 blocks"):
        load(one_tensor((48, 2), ggml_type=8, data=1024))
    with pytest.raises(ModelLoadError, match="unknown GGML type 200"):
        load(one_tensor((4,), ggml_type=200, data=64))


def test_limits_apply_before_data_is_read() -> None:
    with pytest.raises(ModelLimitError, match="tensor elements"):
        load(one_tensor((1 << 20, 1 << 20)), Limits(max_tensor_elements=1 << 30))
    with pytest.raises(ModelLimitError, match="rank"):
        load(one_tensor((1,) * 5, data=4), Limits(max_rank=4))
    long_key = header(0, 1) + struct.pack("<Q", 100) + b"k" * 100
    with pytest.raises(ModelLimitError, match="string length"):
        load(long_key, Limits(max_string_length=10))


def test_duplicate_tensor_names_are_refused() -> None:
    described = header(2, 0) + tensor_info("w", (8,), 0, 0) + tensor_info("w", (8,), 0, 32)
    with pytest.raises(ModelLoadError, match="appears twice"):
        load(described + bytes(-len(described) % 32 + 64))
