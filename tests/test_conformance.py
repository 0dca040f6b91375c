"""The conformance suite against every installed backend, one test per backend and case.

Nothing here is specific to a backend: each declares its expected failures, and an
installed backend without a device is reported as skipped with its availability reason.
"""

from __future__ import annotations

import pytest
from spawnml import plugins
from spawnml.conformance.pytest_plugin import check_case, suite_params


@pytest.mark.parametrize(("backend", "case"), list(suite_params(sorted(plugins.backends()))))
def test_conformance(backend, case):
    check_case(backend, case)
