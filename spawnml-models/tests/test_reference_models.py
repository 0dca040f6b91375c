"""The reference models' registration, manifest entries and drivers, without the model files."""

from __future__ import annotations

import numpy as np
import pytest
from spawnml_models import plugin
from spawnml_models.assets import MissingAssetError, manifest
from spawnml_models.reference_models import REFERENCE_MODELS, drive_vad, run_each


class RecordingSession:
    """Answers ``run`` with zeros shaped like the feeds, recording each call's feeds."""

    def __init__(self, outputs):
        self.outputs = outputs
        self.calls = []

    def run(self, output_names, feeds):
        assert output_names is None
        self.calls.append({name: np.array(value) for name, value in feeds.items()})
        return self.outputs(feeds)


def test_plugin_registers_every_reference_model():
    registered = []
    plugin.register_reference_models(register=registered.append)
    assert registered == list(REFERENCE_MODELS)
    assert len({model.name for model in registered}) == len(registered)


@pytest.mark.parametrize("model", REFERENCE_MODELS, ids=lambda model: model.name)
def test_each_model_file_is_pinned_and_missing_ones_say_how_to_fetch(model, monkeypatch, tmp_path):
    monkeypatch.setenv("SPAWNML_CACHE", str(tmp_path))
    with pytest.raises(MissingAssetError) as info:
        model.path()
    assert info.value.asset in manifest().values()
    assert info.value.command.endswith(f"scripts/fetch-models {info.value.asset.name}")


@pytest.mark.parametrize("model", REFERENCE_MODELS, ids=lambda model: model.name)
def test_drivers_feed_the_same_inputs_every_time(model):
    def outputs(feeds):
        return [np.zeros(1, np.float32), feeds.get("state", np.zeros(1, np.float32))]

    first, second = RecordingSession(outputs), RecordingSession(outputs)
    model.drive(first)
    model.drive(second)
    assert len(first.calls) >= 2
    for a, b in zip(first.calls, second.calls, strict=True):
        assert a.keys() == b.keys()
        for name in a:
            np.testing.assert_array_equal(a[name], b[name])


def test_run_each_returns_every_output_of_every_run():
    session = RecordingSession(lambda feeds: [feeds["x"] * 2, feeds["x"] + 1])
    drive = run_each(lambda: iter([{"x": np.array([1.0])}, {"x": np.array([5.0])}]))
    assert [float(out[0]) for out in drive(session)] == [2.0, 2.0, 10.0, 6.0]


def test_vad_driver_feeds_the_state_back_with_64_samples_of_context():
    def outputs(feeds):
        batch = feeds["input"].shape[0]
        return [np.full((batch, 1), 0.5, np.float32), feeds["state"] + 1]

    session = RecordingSession(outputs)
    drive_vad(session)
    first = session.calls[0]
    assert first["input"].shape == (1, 576) and first["input"].dtype == np.float32
    assert first["sr"].dtype == np.int64 and first["sr"] == 16000
    np.testing.assert_array_equal(first["state"], np.zeros((2, 1, 128)))
    np.testing.assert_array_equal(first["input"][:, :64], 0)
    second = session.calls[1]
    np.testing.assert_array_equal(second["state"], 1)
    np.testing.assert_array_equal(second["input"][:, :64], first["input"][:, -64:])
    assert {call["input"].shape[0] for call in session.calls} == {1, 2}
