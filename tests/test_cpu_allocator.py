"""The CPU plugin sets glibc's allocator so that large arrays freed by one run serve the next without
faulting their pages in again; ``SPAWNML_CPU_ALLOCATOR=system`` leaves glibc's defaults. The
reference is the kernel's count of minor page faults (``getrusage``), in a fresh process each."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

#: Loads the plugins, then 20 times fills four 8 MiB arrays at once and frees them (as a run's
#: activations live and die): the minor faults per array.
FAULTS_PER_ARRAY = """
import resource
import numpy as np
from spawnml import plugins
plugins.backends()
def run():
    return [np.ones(1 << 21, np.float32) for _ in range(4)]
run()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(20):
    run()
print((resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 80)
"""


def faults_per_array(allocator: str | None) -> float:
    env = {k: v for k, v in os.environ.items() if k not in ("SPAWNML_CPU_ALLOCATOR", "GLIBC_TUNABLES")}
    if allocator:
        env["SPAWNML_CPU_ALLOCATOR"] = allocator
    result = subprocess.run([sys.executable, "-c", FAULTS_PER_ARRAY], env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return float(result.stdout.split()[-1])


@pytest.mark.skipif(
    not (os.confstr("CS_GNU_LIBC_VERSION") or "").startswith("glibc"), reason="glibc's allocator only"
)
def test_freed_arrays_are_reused_without_page_faults():
    pages = (8 << 20) // os.sysconf("SC_PAGE_SIZE")
    assert faults_per_array(None) < 0.01 * pages
    assert faults_per_array("system") > 0.1 * pages
