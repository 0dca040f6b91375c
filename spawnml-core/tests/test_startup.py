"""Start-up: what ``import spawnml`` and plugin discovery import, and the names loaded on first use."""

from __future__ import annotations

import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest
import spawnml


def _fresh(code: str) -> str:
    """What ``code`` prints in a new interpreter."""
    done = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    return done.stdout.strip()


def test_import_leaves_the_training_stack_and_narrow_types_alone() -> None:
    heavy = ("spawnml.autograd", "spawnml.nn", "spawnml.optim", "spawnml.conformance", "ml_dtypes")
    code = f"import sys, spawnml; print([m for m in {heavy!r} if m in sys.modules])"
    assert _fresh(code) == "[]"


def test_discovery_leaves_kernels_and_pipelines_alone() -> None:
    heavy = ("spawnml.gpu.table", "spawnml.gpu.attention", "jinja2", "gguf", "tflite", "PIL", "tokenizers")
    code = (
        "import sys, spawnml\n"
        "from spawnml.plugins import registry\n"
        "registry()\n"
        f"print([m for m in {heavy!r} if m in sys.modules])\n"
        "from spawnml.gpu import GPU_KERNELS\n"
        "print(('', 'Add') in GPU_KERNELS.ops())\n"  # the first lookup imports the kernel modules
    )
    assert _fresh(code).splitlines() == ["[]", "True"]


def test_every_public_name_resolves() -> None:
    for name in spawnml.__all__:
        assert getattr(spawnml, name) is not None, name
    assert callable(spawnml.tensor)  # the function, not the spawnml.tensor submodule
    assert spawnml.bfloat16 == np.dtype(ml_dtypes.bfloat16)
    with pytest.raises(AttributeError):
        spawnml.no_such_name  # noqa: B018


def test_tensor_math_is_there_on_first_use() -> None:
    code = "import spawnml; x = spawnml.tensor([1.0, 2.0]); print(((x + x) * 2).numpy().tolist())"
    assert _fresh(code) == "[4.0, 8.0]"


def test_narrow_types_join_the_tables_once_ml_dtypes_is_imported() -> None:
    code = (
        "import ml_dtypes, numpy as np\n"
        "from spawnml import dtypes\n"
        "print(dtypes.to_onnx(np.dtype(ml_dtypes.int4)), dtypes.name(np.dtype(ml_dtypes.float8_e4m3fn)))"
    )
    assert _fresh(code) == "22 float8e4m3fn"
    assert _fresh("from spawnml import dtypes; print(dtypes.from_onnx(16))") == "bfloat16"
