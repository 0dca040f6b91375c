"""Model files taken out of pinned PyPI wheels, found in the local cache and never downloaded here.

``assets.toml`` (package data) lists each asset set; ``scripts/fetch-models`` fetches them into
``<cache>/models/<package>-<version>/<path inside the wheel>``.
"""

from __future__ import annotations

import os
import shlex
import tomllib
from dataclasses import dataclass
from functools import cache
from importlib.resources import files
from pathlib import Path

from spawnml import InvalidArgumentError, SpawnMLError

#: Overrides the cache directory, ``~/.cache/spawnml`` by default.
CACHE_ENV = "SPAWNML_CACHE"
FETCH_SCRIPT = "scripts/fetch-models"


class MissingAssetError(SpawnMLError):
    """A model file has not been fetched into the cache; the message says how to fetch it."""

    def __init__(self, asset: Asset, inner_path: str, path: Path) -> None:
        self.asset, self.path = asset, path
        self.command = fetch_command(asset.name)
        super().__init__(
            f"model file {inner_path} of asset {asset.name!r} ({asset.package}=={asset.version}) "
            f"is missing: {path} does not exist. Fetch it from the SpawnML repository root with:\n"
            f"  {self.command}"
        )


@dataclass(frozen=True, eq=False)
class Asset:
    """One asset set: files taken out of one pinned wheel."""

    name: str
    description: str
    package: str
    version: str
    sha256: str
    files: dict[str, str]  # path inside the wheel -> sha256 of the file

    @property
    def directory(self) -> Path:
        """Where the wheel's files are extracted in the cache."""
        return cache_dir() / "models" / f"{self.package}-{self.version}"

    def path(self, name: str) -> Path:
        """The cached file whose path inside the wheel is ``name`` or ends with ``/name``."""
        matches = [inner for inner in self.files if inner == name or inner.endswith("/" + name)]
        if len(matches) != 1:
            found = "several files" if matches else "no file"
            raise InvalidArgumentError(
                f"asset {self.name!r} has {found} named {name!r}; it lists {sorted(self.files)}"
            )
        path = self.directory / matches[0]
        if not path.is_file():
            raise MissingAssetError(self, matches[0], path)
        return path


def cache_dir() -> Path:
    """Where fetched model files live: ``$SPAWNML_CACHE``, else ``~/.cache/spawnml``."""
    configured = os.environ.get(CACHE_ENV)
    return Path(configured).expanduser() if configured else Path.home() / ".cache" / "spawnml"


def fetch_command(name: str) -> str:
    """The shell command that fetches asset ``name`` into the current cache directory."""
    configured = os.environ.get(CACHE_ENV)
    prefix = f"{CACHE_ENV}={shlex.quote(configured)} " if configured else ""
    return f"{prefix}{FETCH_SCRIPT} {name}"


@cache
def manifest() -> dict[str, Asset]:
    """Every asset set in ``assets.toml``, by name."""
    text = files(__package__).joinpath("assets.toml").read_text(encoding="utf-8")
    return {name: Asset(name=name, **entry) for name, entry in tomllib.loads(text).items()}


def asset_file(asset: str, name: str) -> Path:
    """The cached file ``name`` of asset set ``asset``; raises :class:`MissingAssetError` if absent."""
    assets = manifest()
    if asset not in assets:
        raise InvalidArgumentError(f"unknown asset {asset!r}; known: {sorted(assets)}")
    return assets[asset].path(name)
