"""The PyTorch checkpoint reader against ``torch.load(weights_only=True)``, and hostile pickles."""

from __future__ import annotations

import io
import os
import pickle
import subprocess
import sys
import zipfile
from collections import OrderedDict

import numpy as np
import pytest
import spawnml
import torch
from spawnml import Limits, ModelLimitError, ModelLoadError
from spawnml.formats import ModelSource
from spawnml_formats.torch.loader import TorchCheckpointLoader
from spawnml_formats.torch.unpickler import UnsafePickleError


def _state_dict() -> OrderedDict:
    generator = torch.Generator().manual_seed(0)
    weight = torch.randn(4, 6, generator=generator)
    return OrderedDict(
        weight=weight,
        transposed=weight.t(),  # shares the storage, other strides
        row=weight[2],  # a storage offset
        half=torch.randn(3, generator=generator).half(),
        bf16=torch.randn(2, 2, generator=generator).bfloat16(),
        steps=torch.tensor(7),
        ids=torch.arange(5, dtype=torch.int32),
        mask=torch.tensor([True, False]),
        empty=torch.zeros(0, 3),
        param=torch.nn.Parameter(torch.ones(2)),
    )


def _as_numpy(tensor) -> np.ndarray:
    if tensor.dtype == torch.bfloat16:
        return tensor.view(torch.int16).numpy()
    return tensor.detach().numpy()


def _saved(obj, zip_format: bool) -> bytes:
    buffer = io.BytesIO()
    torch.save(obj, buffer, _use_new_zipfile_serialization=zip_format)
    return buffer.getvalue()


def _load(data: bytes, limits: Limits | None = None):
    return TorchCheckpointLoader().load(ModelSource.of(data), limits or Limits())


@pytest.mark.parametrize("zip_format", [True, False], ids=["zip", "legacy"])
def test_state_dict_matches_torch_load(tmp_path, zip_format):
    path = tmp_path / "model.pt"
    path.write_bytes(_saved(_state_dict(), zip_format))
    graph = spawnml.load(path)
    want = torch.load(path, weights_only=True)
    assert list(graph.initializers) == list(want)
    for name, tensor in want.items():
        got = graph.initializers[name]
        assert got.shape == tuple(tensor.shape), name
        if tensor.dtype == torch.bfloat16:
            got = got.view(np.int16)
        assert got.dtype == _as_numpy(tensor).dtype, name
        np.testing.assert_array_equal(got, _as_numpy(tensor), err_msg=name)


@pytest.mark.parametrize("zip_format", [True, False], ids=["zip", "legacy"])
def test_nested_checkpoints_flatten_with_dotted_names(zip_format):
    checkpoint = {"model": {"fc.weight": torch.ones(2)}, "epoch": 3, "lr": [0.1, None], "name": "run"}
    graph = _load(_saved(checkpoint, zip_format))
    np.testing.assert_array_equal(graph.initializers["model.fc.weight"], [1, 1])
    assert graph.metadata == {"epoch": "3", "lr.0": "0.1", "lr.1": "None", "name": "run"}


class _Evil:
    def __init__(self, func, *args):
        self.func, self.args = func, args

    def __reduce__(self):
        return self.func, self.args


def _zip_with_pickle(payload: bytes) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("archive/data.pkl", payload)
        archive.writestr("archive/version", "3\n")
    return buffer.getvalue()


def _legacy_with_object(obj) -> bytes:
    head = (0x1950A86A20F9469CFC6C, 1001, {"little_endian": True})
    return (
        b"".join(pickle.dumps(item, protocol=2) for item in head)
        + pickle.dumps(obj, protocol=4)
        + pickle.dumps([])
    )


@pytest.mark.parametrize(
    "func, args",
    [
        (os.system, ("touch {marker}",)),
        (eval, ("open({marker!r}, 'w')",)),
        (exec, ("open({marker!r}, 'w')",)),
        (open, ("{marker}", "w")),
        (subprocess.call, (["touch", "{marker}"],)),
    ],
)
@pytest.mark.parametrize("wrap", [_zip_with_pickle, _legacy_with_object], ids=["zip", "legacy"])
def test_malicious_pickles_are_refused_and_nothing_runs(tmp_path, func, args, wrap):
    marker = tmp_path / "pwned"
    args = tuple(
        [a.format(marker=str(marker)) for a in arg]
        if isinstance(arg, list)
        else arg.format(marker=str(marker))
        for arg in args
    )
    payload = OrderedDict(weight=_Evil(func, *args))
    data = wrap(pickle.dumps(payload, protocol=4)) if wrap is _zip_with_pickle else wrap(payload)
    global_name = f"{func.__module__}.{func.__qualname__}"
    with pytest.raises(UnsafePickleError, match=f"global {global_name}, which is not on") as caught:
        _load(data)
    assert isinstance(caught.value, ModelLoadError)
    assert not marker.exists()


def test_refused_global_is_never_imported(tmp_path):
    payload = b"\x80\x02cspawnml_never_imported_module\nboom\n)R."
    with pytest.raises(UnsafePickleError, match=r"spawnml_never_imported_module\.boom"):
        _load(_zip_with_pickle(payload))
    assert "spawnml_never_imported_module" not in sys.modules


@pytest.mark.parametrize(
    "payload, message",
    [
        (b"\x80\x02X\x01\x00\x00\x00xQ.", "not a storage"),  # persistent id that is not a storage
        (b"\x80\x02", "not a valid checkpoint pickle"),  # truncated
        (b"\x80\x02ctorch\nFloatStorage\n)R.", "not a valid checkpoint pickle"),  # calling a marker
    ],
)
def test_malformed_pickles_are_refused(payload, message):
    with pytest.raises(ModelLoadError, match=message):
        _load(_zip_with_pickle(payload))


def test_tensor_reaching_past_its_storage_is_refused():
    data = _saved({"x": torch.zeros(4)}, zip_format=True)
    archive = zipfile.ZipFile(io.BytesIO(data))
    forged = io.BytesIO()
    with zipfile.ZipFile(forged, "w") as out:
        for info in archive.infolist():
            raw = archive.read(info)
            if info.filename.endswith("data.pkl"):  # size (4,) -> (9,): past the 4-element storage
                raw = raw.replace(b"K\x04\x85", b"K\x09\x85")
            out.writestr(info.filename, raw)
    with pytest.raises(ModelLoadError, match="reads element 8 of storage '0', which has only 4"):
        _load(forged.getvalue())


def test_zip_bomb_is_bounded():
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("archive/data.pkl", pickle.dumps({}, protocol=2))
        archive.writestr("archive/data/0", b"\0" * (64 << 20))
    data = buffer.getvalue()
    assert len(data) < 1 << 20
    with pytest.raises(ModelLimitError, match="file size in unpacked archive"):
        _load(data, Limits(max_file_bytes=32 << 20))


def test_absurd_storage_size_is_bounded():
    data = _saved({"x": torch.zeros(1000)}, zip_format=False)
    with pytest.raises(ModelLimitError, match="tensor elements in storage"):
        _load(data, Limits(max_tensor_elements=100))


@pytest.mark.parametrize("zip_format", [True, False], ids=["zip", "legacy"])
def test_sniffed_by_magic_bytes(tmp_path, zip_format):
    path = tmp_path / "weights.bin"
    path.write_bytes(_saved({"x": torch.ones(1)}, zip_format))
    assert TorchCheckpointLoader().sniff(path.read_bytes()[:64])
    assert list(spawnml.load(path).initializers) == ["x"]
