"""The example C guests, compiled to wasm32-wasi, classify a photo through ``spawnml wasi run``.

Their top five classes and scores must be a SpawnML session's on the same model and tensor
(scores within 1e-5 relative: the guest prints six decimals of the same float32 logits).
The model is torchvision's MobileNetV2 with its ImageNet weights, written as an ONNX file.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import spawnml
from skimage import data
from spawnml.formats import save_onnx
from spawnml_models.assets import asset_file
from spawnml_models.classification import preprocess
from spawnml_models.mobilenet import INPUT, WEIGHTS_ASSET, WEIGHTS_FILE, mobilenet_v2_graph

from tests.model_files import require

pytestmark = pytest.mark.real_model
EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "classify"
SPAWNML = Path(sys.executable).with_name("spawnml")


def build_guest(name: str, output: Path) -> Path:
    """Compile ``examples/classify/{name}.c`` to ``output/{name}.wasm``."""
    wasm = output / f"{name}.wasm"
    command = [sys.executable, "-m", "ziglang", "cc", "-target", "wasm32-wasi", "-O2", "-s"]
    subprocess.run([*command, "-o", str(wasm), str(EXAMPLES / f"{name}.c")], check=True, timeout=900)
    return wasm


def spawnml_wasi(*args: str) -> subprocess.CompletedProcess[str]:
    """``spawnml wasi ARGS`` in a process of its own, its output captured."""
    return subprocess.run(
        [str(SPAWNML), "wasi", *args], capture_output=True, text=True, timeout=600, check=False
    )


def top5(stdout: str) -> list[tuple[int, float]]:
    """The (class, score) pairs a guest printed as ``rank class score`` lines."""
    rows = [line.split() for line in stdout.splitlines() if line.strip()]
    return [(int(index), float(score)) for _, index, score in rows]


SHAPE = ("1", "3", "224", "224")


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with the guests, the model and the input tensor, preopened for the guests."""
    folder = tmp_path_factory.mktemp("wasi")
    weights = require(lambda: asset_file(WEIGHTS_ASSET, WEIGHTS_FILE))
    save_onnx(mobilenet_v2_graph(spawnml.load(str(weights)).initializers), folder / "mobilenet.onnx")
    preprocess(data.chelsea())[None].astype("<f4").tofile(folder / "chelsea.f32")
    for name in ("classify", "classify_named"):
        build_guest(name, folder)
    return folder


@pytest.fixture(scope="module")
def expected(workdir: Path) -> list[tuple[int, float]]:
    """The top five of a SpawnML session on the same file and tensor."""
    session = spawnml.InferenceSession(str(workdir / "mobilenet.onnx"))
    batch = np.fromfile(workdir / "chelsea.f32", "<f4").reshape(1, 3, 224, 224)
    logits = session.run(None, {INPUT: batch})[0][0]
    best = np.argsort(-logits, kind="stable")[:5]
    return [(int(i), float(logits[i])) for i in best]


def assert_same_top5(stdout: str, expected: list[tuple[int, float]]) -> None:
    printed = top5(stdout)
    assert [index for index, _ in printed] == [index for index, _ in expected]
    np.testing.assert_allclose([s for _, s in printed], [s for _, s in expected], rtol=1e-5, atol=1e-6)


def test_guest_loads_a_model_file_and_prints_the_sessions_top5(workdir, expected):
    run = spawnml_wasi(
        "run", str(workdir / "classify.wasm"), "--dir", f"{workdir}::/data",
        "--", "/data/mobilenet.onnx", "/data/chelsea.f32", *SHAPE,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert_same_top5(run.stdout, expected)
    assert expected[0][0] in range(281, 286)  # a cat: ImageNet's classes 281-285


def test_second_guest_opens_a_preloaded_model_by_name(workdir, expected):
    run = spawnml_wasi(
        "run", str(workdir / "classify_named.wasm"), "--dir", f"{workdir}::/data",
        "--model", f"mobilenet={workdir / 'mobilenet.onnx'}",
        "--", "mobilenet", "/data/chelsea.f32", *SHAPE,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert_same_top5(run.stdout, expected)


def test_unknown_name_is_not_found(workdir):
    run = spawnml_wasi(
        "run", str(workdir / "classify_named.wasm"), "--dir", f"{workdir}::/data",
        "--", "absent", "/data/chelsea.f32", *SHAPE,
    )  # fmt: skip
    assert run.returncode == 2
    assert "wasi-nn load_by_name failed: error 8" in run.stderr  # not_found


def test_gpu_target_never_runs_on_the_cpu(workdir):
    run = spawnml_wasi(
        "run", str(workdir / "classify.wasm"), "--dir", f"{workdir}::/data", "--providers", "cpu",
        "--", "/data/mobilenet.onnx", "/data/chelsea.f32", *SHAPE, "gpu",
    )  # fmt: skip
    assert run.returncode == 2
    assert "wasi-nn load failed: error 6" in run.stderr  # unsupported_operation


def test_gpu_target_runs_on_an_allowed_gpu(workdir, expected):
    from spawnml.plugins import backends

    gpu = next((name for name in ("opencl", "webgpu") if backends()[name].availability().available), None)
    if gpu is None:
        pytest.skip("neither opencl nor webgpu has a device here")
    run = spawnml_wasi(
        "run", str(workdir / "classify.wasm"), "--dir", f"{workdir}::/data", "--providers", f"cpu,{gpu}",
        "--", "/data/mobilenet.onnx", "/data/chelsea.f32", *SHAPE, "gpu",
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    printed = top5(run.stdout)
    assert [index for index, _ in printed] == [index for index, _ in expected]
    np.testing.assert_allclose([s for _, s in printed], [s for _, s in expected], rtol=1e-3, atol=1e-3)
