"""Each distribution installs on its own: core alone imports and says it has no backend."""

from __future__ import annotations

import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_core_alone_in_an_empty_venv_reports_no_backend(tmp_path):
    venv.create(tmp_path / "env", with_pip=True)
    python = tmp_path / "env" / "bin" / "python"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "PYTHONPATH", "SPAWNML_"))}
    subprocess.run(
        [python, "-m", "pip", "install", "--quiet", str(ROOT / "spawnml-core")], check=True, env=env
    )
    imported = subprocess.run(
        [python, "-c", "import spawnml, sys; print(spawnml.__version__, spawnml.__file__)"],
        check=True,
        capture_output=True,
        text=True,
        env=env,
    )
    assert str(tmp_path) in imported.stdout  # the installed copy, not the checkout
    listed = subprocess.run(
        [tmp_path / "env" / "bin" / "spawnml", "plugins"], check=True, capture_output=True, text=True, env=env
    )
    assert "No backend is installed. Install one, e.g. `pip install spawnml-cpu`" in listed.stdout
    assert sys.executable != str(python)
