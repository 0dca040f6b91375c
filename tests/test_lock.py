"""The environment the tests run in is the one requirements-dev.lock describes, package for package."""

from __future__ import annotations

import re
import sysconfig
from importlib import metadata
from pathlib import Path

from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
LOCK = ROOT / "requirements-dev.lock"
#: Installed editable from the working tree by scripts/setup, so left out of the lock.
WORKSPACE = {path.parent.name for path in ROOT.glob("spawnml-*/pyproject.toml")} | {"spawnml-example-plugin"}
PINNED = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)")


def locked() -> dict[str, str]:
    """Each package of the lock, by canonical name, with its exact version."""
    pins = (PINNED.match(line) for line in LOCK.read_text().splitlines())
    return {canonicalize_name(pin[1]): pin[2] for pin in pins if pin}


def installed() -> dict[str, str]:
    """Each distribution installed in this environment's site-packages but the workspace's, with
    its version. Only there: a package may put its own vendored copies on ``sys.path`` once
    imported (Ray adds its ``thirdparty_files``), and those are not what the environment holds."""
    sites = sorted({sysconfig.get_paths()[key] for key in ("purelib", "platlib")})
    dists = metadata.distributions(path=sites)
    found = {canonicalize_name(dist.metadata["Name"]): dist.version for dist in dists}
    return {name: version for name, version in found.items() if name not in WORKSPACE}


def test_the_lock_pins_every_package_with_hashes() -> None:
    text = LOCK.read_text()
    assert len(locked()) > 100
    assert text.count("--hash=sha256:") >= len(locked())
    assert not re.search(r"^[A-Za-z0-9._-]+(>=|<=|~=|>|<)", text, re.MULTILINE)


def test_installed_environment_equals_the_lock() -> None:
    lock, here = locked(), installed()
    assert {name: here.get(name) for name in lock if here.get(name) != lock[name]} == {}
    assert sorted(set(here) - set(lock)) == []
