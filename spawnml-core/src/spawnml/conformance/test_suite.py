"""The conformance suite as pytest items, collected by ``pytest --pyargs spawnml.conformance``.

Without ``--backend NAME`` the suite has nothing to check and reports one skip.
"""

from __future__ import annotations

import pytest

from .case import KINDS, Case
from .pytest_plugin import check_case, suite_params


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    backend = metafunc.config.getoption("backend", None)
    if backend is None:
        skip = pytest.mark.skip(reason="run the conformance suite with --backend NAME")
        params = [pytest.param(None, None, id="no-backend", marks=skip)]
    else:
        kinds = metafunc.config.getoption("conformance_kind") or KINDS
        params = list(suite_params([backend], kinds, metafunc.config.getoption("fallback")))
    metafunc.parametrize(("backend", "case"), params)


def test_case(backend: str, case: Case, request: pytest.FixtureRequest) -> None:
    check_case(backend, case, request.config.getoption("fallback"))
