"""Real applications that use onnxruntime, each run twice in its own process: once on the real
onnxruntime and once under ``python -m spawnml.onnxruntime``. Results must agree: the same
structure and strings (recognised text, labels, detection counts), numbers within
``RTOL``/``ATOL``. The applications' pinned wheels (applications.toml) are unpacked into the model
cache by scripts/fetch-models and put on their PYTHONPATH; without them a test skips, or fails
under SPAWNML_REQUIRE_MODELS=1 (the list is in docs/onnxruntime.md)."""

from __future__ import annotations

import functools
import json
import math
import os
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
from spawnml_models.assets import cache_dir

APPS = Path(__file__).parent / "apps"
MANIFEST = Path(__file__).with_name("applications.toml")
FETCH = f"scripts/fetch-models --manifest {MANIFEST.relative_to(Path(__file__).parents[2])}"
#: Probabilities and pixel coordinates agree to about 1e-6 (float32 kernels summing in
#: another order); these bounds leave room for other BLAS builds, never for another answer.
RTOL = 1e-5
ATOL = 1e-5

#: One script an application (apps/_media.py makes their images and audio).
APPLICATIONS = sorted(path.stem for path in APPS.glob("*.py") if not path.name.startswith("_"))


@functools.cache
def unpacked_applications() -> str:
    """The PYTHONPATH of the applications' unpacked wheels; skips (or fails under
    SPAWNML_REQUIRE_MODELS=1) when one is not fetched."""
    folders = [
        cache_dir() / "models" / f"{entry['package']}-{entry['version']}"
        for entry in tomllib.loads(MANIFEST.read_text(encoding="utf-8")).values()
    ]
    missing = [folder.name for folder in folders if not (folder / ".unpacked").is_file()]
    if missing:
        message = f"applications {missing} not unpacked in the cache (run {FETCH})"
        if os.environ.get("SPAWNML_REQUIRE_MODELS") == "1":
            pytest.fail(f"SPAWNML_REQUIRE_MODELS=1 and {message}")
        pytest.skip(message)
    return os.pathsep.join(map(str, folders))


def run_app(script: str, *prefix: str) -> Any:
    """Run one application script and return the result it printed."""
    path = os.pathsep.join(filter(None, [unpacked_applications(), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONWARNINGS": "ignore", "PYTHONPATH": path}
    done = subprocess.run(
        [sys.executable, *prefix, str(APPS / f"{script}.py")],
        cwd=APPS,
        capture_output=True,
        text=True,
        timeout=900,
        env=env,
    )
    assert done.returncode == 0, f"{script} {' '.join(prefix)} failed:\n{done.stderr[-3000:]}"
    runtime = "spawnml.onnxruntime" if prefix else "onnxruntime"
    assert f"RUNTIME {runtime}\n" in done.stdout, f"{script} did not run on {runtime}"
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert lines, f"{script} printed no result:\n{done.stdout[-2000:]}"
    return json.loads(lines[-1][len("RESULT ") :])


def differences(real: Any, ours: Any, path: str = "$") -> list[str]:
    """Where ``ours`` departs from ``real`` (empty when they agree)."""
    if isinstance(real, bool) or isinstance(ours, bool):
        return [] if real == ours else [f"{path}: {real!r} != {ours!r}"]
    if isinstance(real, int | float) and isinstance(ours, int | float):
        if math.isclose(real, ours, rel_tol=RTOL, abs_tol=ATOL):
            return []
        return [f"{path}: {real!r} vs {ours!r}"]
    if isinstance(real, list) and isinstance(ours, list):
        if len(real) != len(ours):
            return [f"{path}: {len(real)} items != {len(ours)} items"]
        return [
            d
            for i, (a, b) in enumerate(zip(real, ours, strict=True))
            for d in differences(a, b, f"{path}[{i}]")
        ]
    if isinstance(real, dict) and isinstance(ours, dict):
        if set(real) != set(ours):
            return [f"{path}: keys {sorted(real)} != {sorted(ours)}"]
        return [d for key in real for d in differences(real[key], ours[key], f"{path}.{key}")]
    return [] if real == ours else [f"{path}: {real!r} != {ours!r}"]


@pytest.mark.slow
@pytest.mark.parametrize("script", APPLICATIONS)
def test_application_matches_onnxruntime(script: str) -> None:
    real = run_app(script)
    ours = run_app(script, "-m", "spawnml.onnxruntime")
    found = differences(real, ours)
    assert not found, f"{script}: {len(found)} difference(s), first: {found[:5]}"


def test_differences_tell_apart() -> None:
    assert differences({"a": [1.0, "x"]}, {"a": [1.0 + 1e-7, "x"]}) == []
    assert differences({"a": [1.0]}, {"a": [1.1]})
    assert differences(["x"], ["y"])
    assert differences([1], [1, 2])
