"""Finding fetched real-model files from tests: skip without them, or fail where CI needs them."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from spawnml_models.assets import MissingAssetError


def require(locate: Callable[[], Path]) -> Path:
    """The file ``locate`` finds; skips when it is not fetched, fails under SPAWNML_REQUIRE_MODELS=1."""
    try:
        return locate()
    except MissingAssetError as error:
        if os.environ.get("SPAWNML_REQUIRE_MODELS") == "1":
            pytest.fail(f"SPAWNML_REQUIRE_MODELS=1 and {error}")
        pytest.skip(f"model files not fetched (run {error.command})")
