import pytest
import spawnml
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
    assert plugins.registry().plugins["spawnml.plugins.builtin"].builtin
    assert set(plugins.registry().plugins) == {"spawnml.plugins.builtin", "mock"}


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


class _Typo:
    @plugins.hookimpl
    def register_operator(self, register):
        register(OpSchema("Typo", "test.typo", 1))


class _Returns:
    @plugins.hookimpl
    def register_operators(self, register):
        return [OpSchema("Listed", "test.listed", 1)]


class _Raises:
    @plugins.hookimpl
    def register_backends(self, register):
        raise RuntimeError("no driver")


@pytest.mark.parametrize(
    ("plugin", "message"),
    [
        (
            _Typo(),
            "plugin 'bad' implements unknown hook 'register_operator' "
            "(did you mean 'register_operators'?); the hooks are register_backends, ",
        ),
        (
            _Returns(),
            "plugin 'bad': hook register_operators returned [OpSchema(...)] instead of calling "
            "register(...) once for each item; it must return None",
        ),
        (_Raises(), "plugin 'bad': hook register_backends raised RuntimeError: no driver"),
    ],
)
def test_hook_mistakes_fail_loading_naming_the_plugin(mock_plugins, plugin, message):
    with pytest.raises(PluginError) as raised:
        register_and_refresh(plugin, "bad")
    assert str(raised.value).startswith(message.split("[OpSchema")[0])


def test_duplicates_name_both_plugins(mock_plugins):
    with pytest.raises(PluginError) as raised:
        register_and_refresh(_Duplicate(), "bad")
    assert str(raised.value) == (
        "operator test.mock::Scale version 1 is registered twice: "
        "first by plugin 'mock', again by plugin 'bad'"
    )


def test_a_missing_backend_is_said_to_be_installed_by_nobody(mock_plugins):
    from spawnml.session import resolve_providers

    with pytest.raises(spawnml.BackendUnavailableError) as raised:
        resolve_providers(["gpu9"])
    assert str(raised.value) == (
        "provider 'gpu9' is not installed: no installed distribution provides backend 'gpu9' "
        "(loaded backends: ['absent', 'mock'])"
    )
    assert "pip install" not in str(raised.value)
