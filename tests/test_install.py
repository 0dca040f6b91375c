"""Each distribution installs on its own: core alone imports and says it has no backend.

The install is offline: pip takes no index and no dependencies, and the fresh environment
sees only core's own dependencies (and setuptools, to build it), linked from this one.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import venv
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]


def required(name: str) -> set[str]:
    """``name`` and, recursively, the distributions it requires (extras left out)."""
    found: set[str] = set()
    todo = [name]
    while todo:
        current = canonicalize_name(todo.pop())
        if current in found:
            continue
        found.add(current)
        for text in metadata.requires(current) or []:
            requirement = Requirement(text)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                todo.append(requirement.name)
    return found


def link_distributions(names: set[str], folder: Path) -> None:
    """Symlink the installed files (packages, modules, metadata) of ``names`` into ``folder``."""
    folder.mkdir()
    for name in sorted(names):
        distribution = metadata.distribution(name)
        tops = {file.parts[0] for file in distribution.files or () if file.parts[0] != ".."}
        for top in sorted(tops):
            link = folder / top
            if not link.exists():
                link.symlink_to(distribution.locate_file(top))


@pytest.mark.slow
def test_core_alone_in_an_empty_venv_reports_no_backend(tmp_path):
    dependencies = tmp_path / "dependencies"
    link_distributions((required("spawnml-core") - {"spawnml-core"}) | required("setuptools"), dependencies)
    venv.create(tmp_path / "env")
    python = tmp_path / "env" / "bin" / "python"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "PYTHONPATH", "SPAWNML_"))}
    purelib = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
        env=env,
    ).stdout.strip()
    Path(purelib, "dependencies.pth").write_text(f"{dependencies}\n", encoding="utf-8")
    # A copy, because setuptools builds in the source tree.
    source = tmp_path / "spawnml-core"
    shutil.copytree(ROOT / "spawnml-core", source, ignore=shutil.ignore_patterns("build", "*.egg-info"))
    subprocess.run(
        [
            *(sys.executable, "-m", "pip", "--python", python, "install", "--quiet"),
            *("--no-index", "--no-deps", "--no-build-isolation", source),
        ],
        check=True,
        env=env,
    )
    imported = subprocess.run(
        [python, "-c", "import spawnml, sys; print(spawnml.__version__, spawnml.__file__)"],
        check=True,
        capture_output=True,
        text=True,
        env=env,
    )
    assert str(tmp_path / "env") in imported.stdout  # the installed copy, not the checkout
    listed = subprocess.run(
        [tmp_path / "env" / "bin" / "spawnml", "plugins"], check=True, capture_output=True, text=True, env=env
    )
    assert "No backend is installed. Install one, e.g. `pip install spawnml-cpu`" in listed.stdout
    assert sys.executable != str(python)
