"""Until the opencl backend is built, installing its distribution must add no plugin."""

from importlib.metadata import distribution, entry_points


def test_distribution_is_installed_and_declares_no_plugin():
    assert distribution("spawnml-opencl").version
    assert not [ep for ep in entry_points(group="spawnml") if ep.dist and ep.dist.name == "spawnml-opencl"]


def test_package_imports():
    import spawnml_opencl

    assert "not built yet" in spawnml_opencl.__doc__
