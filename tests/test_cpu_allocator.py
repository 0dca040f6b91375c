"""Loading the CPU plugin leaves glibc's allocator as it is; asked (``SPAWNML_CPU_ALLOCATOR=reuse`` or
``spawnml_cpu.allocator.keep_freed_memory()``), it sets it so that large arrays freed by one run
serve the next without faulting their pages in again. The reference is the kernel's count of minor
page faults (``getrusage``), in a fresh process each."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

#: Loads the plugins (then runs ``{call}``), then 20 times fills four 8 MiB arrays at once and frees
#: them (as a run's activations live and die): the minor faults per array.
FAULTS_PER_ARRAY = """
import resource
import numpy as np
from spawnml import plugins
plugins.backends()
{call}
def run():
    return [np.ones(1 << 21, np.float32) for _ in range(4)]
run()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(20):
    run()
print((resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 80)
"""

PAGES = (8 << 20) // os.sysconf("SC_PAGE_SIZE")


def run_script(allocator: str | None, call: str = "") -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("SPAWNML_CPU_ALLOCATOR", "GLIBC_TUNABLES")}
    if allocator is not None:
        env["SPAWNML_CPU_ALLOCATOR"] = allocator
    script = FAULTS_PER_ARRAY.format(call=call)
    return subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True)


def faults_per_array(allocator: str | None, call: str = "") -> float:
    result = run_script(allocator, call)
    assert result.returncode == 0, result.stderr
    return float(result.stdout.split()[-1])


glibc_only = pytest.mark.skipif(
    not (os.confstr("CS_GNU_LIBC_VERSION") or "").startswith("glibc"), reason="glibc's allocator only"
)


@glibc_only
@pytest.mark.parametrize("allocator", [None, "system"])
def test_loading_the_plugin_leaves_glibc_as_it_is(allocator):
    assert faults_per_array(allocator) > 0.1 * PAGES


@glibc_only
@pytest.mark.parametrize(
    ("allocator", "call"),
    [
        ("reuse", ""),
        (None, "from spawnml_cpu.allocator import keep_freed_memory; assert keep_freed_memory()"),
    ],
    ids=["environment", "function"],
)
def test_asked_freed_arrays_are_reused_without_page_faults(allocator, call):
    assert faults_per_array(allocator, call) < 0.01 * PAGES


def test_an_unknown_setting_is_refused_naming_the_choices():
    result = run_script("fast")
    assert result.returncode != 0
    assert "SPAWNML_CPU_ALLOCATOR='fast'" in result.stderr and "'reuse'" in result.stderr
