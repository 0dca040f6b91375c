"""The SafeTensors loader against the ``safetensors`` library's own reader and writer."""

from __future__ import annotations

import struct
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
import spawnml
from safetensors.numpy import load_file, save, save_file
from spawnml import Limits, ModelLimitError, ModelLoadError
from spawnml.formats import ModelSource
from spawnml_formats.safetensors.loader import SafeTensorsLoader

RNG = np.random.default_rng(0)
TENSORS = {
    "f32": RNG.standard_normal((3, 4)).astype(np.float32),
    "f16": RNG.standard_normal((5,)).astype(np.float16),
    "f64": RNG.standard_normal((2, 2)),
    "i64": np.arange(-6, 6, dtype=np.int64).reshape(2, 3, 2),
    "i8": np.array([-128, 0, 127], dtype=np.int8),
    "u8": np.array([0, 255], dtype=np.uint8),
    "bool": np.array([True, False, True]),
    "scalar": np.array(2.5, dtype=np.float32),
    "empty": np.zeros((0, 3), dtype=np.float32),
}


def _load(data: bytes, limits: Limits | None = None):
    return SafeTensorsLoader().load(ModelSource.of(data), limits or Limits())


def _raw(header: bytes, data: bytes = b"") -> bytes:
    return struct.pack("<Q", len(header)) + header + data


@pytest.mark.parametrize("from_path", [True, False])
def test_tensors_and_metadata_match_the_library(tmp_path, from_path):
    path = tmp_path / "weights.safetensors"
    save_file(TENSORS, path, metadata={"format": "np", "author": "spawnml"})
    graph = spawnml.load(path) if from_path else spawnml.load(path.read_bytes())
    want = load_file(path)
    assert graph.nodes == [] and graph.outputs == []
    assert graph.metadata == {"format": "np", "author": "spawnml"}
    assert set(graph.initializers) == set(want)
    for name, array in want.items():
        got = graph.initializers[name]
        assert got.dtype == array.dtype and got.shape == array.shape
        np.testing.assert_array_equal(got, array)


def test_file_tensors_are_read_only_views_of_a_mapping(tmp_path):
    path = tmp_path / "weights.safetensors"
    save_file(TENSORS, path)
    graph = spawnml.load(path)
    array = graph.initializers["f32"]
    assert not array.flags.writeable and not array.flags.owndata
    base = array
    while not isinstance(base, np.memmap):
        base = base.base
    assert Path(base.filename) == path.resolve()


def test_ml_dtypes_are_views_of_the_raw_bits():
    values = {
        "BF16": np.array([1.5, -2.0, 3.25], dtype=ml_dtypes.bfloat16),
        "F8_E4M3": np.array([0.5, -448.0], dtype=ml_dtypes.float8_e4m3fn),
        "F8_E5M2": np.array([0.25, 57344.0], dtype=ml_dtypes.float8_e5m2),
    }
    offsets, data = {}, b""
    for name, array in values.items():
        offsets[name] = (len(data), len(data) + array.nbytes)
        data += array.tobytes()
    header = ",".join(
        f'"{name}":{{"dtype":"{name}","shape":[{len(array)}],"data_offsets":[{begin},{end}]}}'
        for (name, array), (begin, end) in zip(values.items(), offsets.values(), strict=True)
    )
    graph = _load(_raw(("{" + header + "}").encode(), data))
    for name, array in values.items():
        assert graph.initializers[name].dtype == array.dtype
        np.testing.assert_array_equal(graph.initializers[name].view(np.uint8), array.view(np.uint8))


def test_detected_by_magic_bytes_whatever_the_extension(tmp_path):
    path = tmp_path / "weights.bin"
    path.write_bytes(save({"x": np.ones(2, np.float32)}))
    assert SafeTensorsLoader().sniff(path.read_bytes()[:64])
    np.testing.assert_array_equal(spawnml.load(path).initializers["x"], [1, 1])


def test_header_length_is_bounded_before_parsing():
    data = _raw(b'{"x":' + b" " * 4096 + b'{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}', b"\0" * 4)
    with pytest.raises(ModelLimitError, match="string length in SafeTensors header"):
        _load(data, Limits(max_string_length=1024))


def test_header_longer_than_the_file_is_refused():
    with pytest.raises(ModelLoadError, match="declares a 1,000,000-byte SafeTensors header"):
        _load(struct.pack("<Q", 1_000_000) + b"{}")


@pytest.mark.parametrize(
    "header, data",
    [
        (b'{"x":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}}', b"\0" * 4),  # size mismatch
        (b'{"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}', b"\0" * 8),  # trailing bytes
        (b'{"x":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}', b"\0" * 8),  # hole
        (b'{"x":{"dtype":"NOPE","shape":[1],"data_offsets":[0,4]}}', b"\0" * 4),  # unknown type
        (b'{"x":', b""),  # not JSON
    ],
)
@pytest.mark.parametrize("from_path", [True, False])
def test_invalid_files_are_refused(tmp_path, header, data, from_path):
    raw = _raw(header, data)
    path = tmp_path / "bad.safetensors"
    path.write_bytes(raw)
    with pytest.raises(ModelLoadError, match="not a valid SafeTensors file"):
        SafeTensorsLoader().load(ModelSource.of(path if from_path else raw), Limits())


def test_tensor_elements_are_bounded():
    data = save({"x": np.zeros((4, 4), np.float32)})
    with pytest.raises(ModelLimitError, match="tensor elements in tensor 'x'"):
        _load(data, Limits(max_tensor_elements=8))
