"""Make an example plugin under ``tests/plugins`` importable and discoverable through its entry
points without installing it: the development environment equals its lock, so the plugins it
does not list are not installed into it."""

from __future__ import annotations

import tomllib
from pathlib import Path


def metadata_folder(package: Path, folder: Path) -> Path:
    """Write the ``.dist-info`` folder of the distribution at ``package`` (a folder holding its
    ``pyproject.toml``) into ``folder``, and return ``folder``: with it and the package's ``src``
    on ``sys.path``, ``importlib.metadata`` finds the distribution and its entry points as if
    installed."""
    project = tomllib.loads((package / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    name, version = project["name"], project["version"]
    info = folder / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n", encoding="utf-8"
    )
    lines = [
        f"[{group}]\n" + "".join(f"{key} = {value}\n" for key, value in entries.items())
        for group, entries in project.get("entry-points", {}).items()
    ]
    (info / "entry_points.txt").write_text("\n".join(lines), encoding="utf-8")
    return folder
