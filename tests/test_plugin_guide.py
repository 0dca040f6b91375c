"""docs/writing-a-plugin.md's code blocks are true and run.

A block headed ``# file: PATH`` is a whole file: under an example plugin's folder it must equal
the file in tests/plugins, and the second example plugin, built from those blocks alone into a
temporary folder and found through its entry point, runs the guide's script. Every other
Python and TOML block is an excerpt of the first example plugin or of its test.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from spawnml import plugins

from tests.plugins.entry_points import metadata_folder

ROOT = Path(__file__).resolve().parents[1]
GUIDE = ROOT / "docs/writing-a-plugin.md"
PLUGINS = ROOT / "tests/plugins"
EXAMPLE = PLUGINS / "spawnml-example-plugin"
HEADER = "# file: "
BACKENDS = ("cpu", "webgpu", "opencl", "cuda")
#: The guide's plugin and the backends its script tries: other installed plugins stay out.
SELECTED = ",".join(["mish", *BACKENDS])


def blocks() -> list[str]:
    """The Python and TOML code blocks of the guide, in order."""
    text = GUIDE.read_text(encoding="utf-8")
    return re.findall(r"```(?:python|toml)\n(.*?)```", text, flags=re.DOTALL)


def whole_files() -> dict[str, str]:
    """The blocks headed ``# file: PATH``, by PATH, without the header."""
    files = {}
    for block in blocks():
        first, _, body = block.partition("\n")
        if first.startswith(HEADER):
            files[first.removeprefix(HEADER)] = body
    return files


def test_whole_file_blocks_are_the_example_plugins_files():
    files = {path: body for path, body in whole_files().items() if path.startswith("spawnml-")}
    assert {path.split("/")[0] for path in files} == {"spawnml-mish-plugin"}
    package = PLUGINS / "spawnml-mish-plugin"
    on_disk = {
        str(path.relative_to(PLUGINS)) for path in package.rglob("*") if path.suffix in (".py", ".toml")
    }
    assert set(files) == on_disk - {"spawnml-mish-plugin/src/spawnml_mish/__init__.py"}
    for path, body in files.items():
        assert body == (PLUGINS / path).read_text(encoding="utf-8"), path


def test_every_other_block_is_an_excerpt_of_the_first_example_or_its_test():
    sources = [*EXAMPLE.rglob("*.py"), EXAMPLE / "pyproject.toml", ROOT / "tests/test_third_party_plugin.py"]
    texts = [unindented(path.read_text(encoding="utf-8")) for path in sources]
    excerpts = [block for block in blocks() if not block.startswith(HEADER)]
    assert len(excerpts) >= 6
    for excerpt in excerpts:
        assert any(unindented(excerpt) in text for text in texts), excerpt


def unindented(text: str) -> str:
    """``text`` with each line's leading whitespace removed, so excerpts may be dedented."""
    return "\n".join(line.lstrip() for line in text.splitlines())


@pytest.fixture
def selected(monkeypatch):
    """Only :data:`SELECTED` loads, here and in the script's process."""
    monkeypatch.setenv("SPAWNML_PLUGINS", SELECTED)
    plugins.reset()
    yield
    plugins.reset()


def test_the_second_plugin_built_from_the_guide_runs_its_script(tmp_path, selected):
    for path, body in whole_files().items():
        target = tmp_path / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(body, encoding="utf-8")
    package = tmp_path / "spawnml-mish-plugin"
    (package / "src/spawnml_mish/__init__.py").touch()  # the one file the guide leaves out: a docstring
    path = [str(package / "src"), str(metadata_folder(package, tmp_path / "site"))]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(path)}
    done = subprocess.run(
        [sys.executable, "try_mish.py"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout + done.stderr
    ran = [name for name in BACKENDS if available(name)]
    assert done.stdout.splitlines() == [f"{name}: Mish matches numpy" for name in ran]


def available(name: str) -> bool:
    backend = plugins.backends().get(name)
    return backend is not None and backend.availability().available
