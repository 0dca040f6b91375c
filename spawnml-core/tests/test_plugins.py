import pytest
from spawnml import PluginError, plugins
from spawnml.ops import OpSchema


def register_and_refresh(plugin, name):
    plugins.get_plugin_manager().register(plugin, name=name)
    return plugins.refresh()


def test_mock_plugin_is_listed_with_what_it_provides(mock_plugins):
    info = plugins.registry().plugins["mock"]
    assert info.provides["backends"] == ["mock", "absent"]
    assert "test.mock::Scale-1" in info.provides["operators"]
    assert plugins.operators().lookup("test.mock", "Scale", 7).since_version == 1


def test_builtin_operator_plugin_loads_even_when_entry_points_are_restricted(mock_plugins):
    assert plugins.registry().plugins["spawnml.ops.builtin"].builtin
    assert set(plugins.registry().plugins) == {"spawnml.ops.builtin", "mock"}


class _Duplicate:
    @plugins.hookimpl
    def register_operators(self, register):
        register(OpSchema("Scale", "test.mock", 1))


class _NotABackend:
    @plugins.hookimpl
    def register_backends(self, register):
        register(object)


@pytest.mark.parametrize(
    ("plugin", "message"),
    [
        (_Duplicate(), "operator test.mock::Scale version 1 is registered twice"),
        (_NotABackend(), "registered <class 'object'>, not a Backend subclass"),
    ],
)
def test_invalid_registrations_raise_plugin_error(mock_plugins, plugin, message):
    with pytest.raises(PluginError, match=message):
        register_and_refresh(plugin, "bad")


def test_same_backend_name_twice_is_refused(mock_plugins):
    mock_class = type(plugins.backends()["mock"])

    class SecondMock:
        @plugins.hookimpl
        def register_backends(self, register):
            register(mock_class)

    with pytest.raises(PluginError, match="registers backend 'mock', which is already registered"):
        register_and_refresh(SecondMock(), "second")


def test_two_kernels_for_the_same_opsets_are_refused():
    from spawnml.backend import KernelTable

    table = KernelTable()
    table.register("Relu", since=1, until=6)(lambda ctx, x: x)
    table.register("Relu", since=6)(lambda ctx, x: x)
    with pytest.raises(PluginError, match=r"two kernels for ai\.onnx::Relu cover the same opsets"):
        table.register("Relu", since=13)(lambda ctx, x: x)
