"""Until the cuda backend is built, installing its distribution must add no plugin."""

from importlib.metadata import distribution, entry_points


def test_distribution_is_installed_and_declares_no_plugin():
    assert distribution("spawnml-cuda").version
    assert not [ep for ep in entry_points(group="spawnml") if ep.dist and ep.dist.name == "spawnml-cuda"]


def test_package_imports():
    import spawnml_cuda

    assert "not built yet" in spawnml_cuda.__doc__
