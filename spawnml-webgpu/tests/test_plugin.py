"""The webgpu distribution registers its backend, which says what adapter it found, without
passing on the drivers' known harmless messages."""

import os
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

from spawnml import plugins
from spawnml_webgpu import WebGPUBackend
from spawnml_webgpu.driver_noise import filtered_stderr


def test_entry_point_registers_the_backend():
    names = [ep.name for ep in entry_points(group="spawnml") if ep.dist and ep.dist.name == "spawnml-webgpu"]
    assert names == ["webgpu"]
    assert isinstance(plugins.backends()["webgpu"], WebGPUBackend)


def test_availability_names_the_adapter_or_why_not():
    status = plugins.backends()["webgpu"].availability()
    assert status.reason
    if status.available:
        assert "adapter" in status.reason


NOISE = b"error: XDG_RUNTIME_DIR is invalid or not set in the environment.\n"


def test_spawnml_plugins_prints_no_driver_noise():
    """Mesa prints NOISE while wgpu probes adapters when XDG_RUNTIME_DIR is unset; it is dropped."""
    env = {key: value for key, value in os.environ.items() if key != "XDG_RUNTIME_DIR"}
    spawnml = Path(sys.executable).with_name("spawnml")
    result = subprocess.run([spawnml, "plugins"], capture_output=True, text=True, env=env, check=True)
    assert "webgpu" in result.stdout
    assert "XDG_RUNTIME_DIR" not in result.stderr


def test_other_lines_written_during_the_probe_come_through(monkeypatch, capfd):
    import wgpu

    real = wgpu.gpu.request_adapter_sync

    def noisy_probe(**options):
        os.write(2, NOISE + b"a real driver error\n" + NOISE)
        return real(**options)

    monkeypatch.setattr(wgpu.gpu, "request_adapter_sync", noisy_probe)
    WebGPUBackend().availability()
    assert capfd.readouterr().err == "a real driver error\n"


def test_filtered_stderr_drops_only_whole_known_lines(capfd):
    with filtered_stderr():
        os.write(2, NOISE)
        print("from Python", file=sys.stderr)
        os.write(2, b"warning: " + NOISE + b"no line end")
    assert capfd.readouterr().err == "from Python\nwarning: " + NOISE.decode() + "no line end"
