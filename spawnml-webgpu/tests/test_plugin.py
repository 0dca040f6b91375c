"""The webgpu distribution registers its backend, which says what adapter it found."""

from importlib.metadata import entry_points

from spawnml import plugins
from spawnml_webgpu import WebGPUBackend


def test_entry_point_registers_the_backend():
    names = [ep.name for ep in entry_points(group="spawnml") if ep.dist and ep.dist.name == "spawnml-webgpu"]
    assert names == ["webgpu"]
    assert isinstance(plugins.backends()["webgpu"], WebGPUBackend)


def test_availability_names_the_adapter_or_why_not():
    status = plugins.backends()["webgpu"].availability()
    assert status.reason
    if status.available:
        assert "adapter" in status.reason
