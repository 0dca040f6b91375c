"""Until the webgpu backend is built, installing its distribution must add no plugin."""

from importlib.metadata import distribution, entry_points


def test_distribution_is_installed_and_declares_no_plugin():
    assert distribution("spawnml-webgpu").version
    assert not [ep for ep in entry_points(group="spawnml") if ep.dist and ep.dist.name == "spawnml-webgpu"]


def test_package_imports():
    import spawnml_webgpu

    assert "not built yet" in spawnml_webgpu.__doc__
