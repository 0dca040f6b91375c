"""Silero VAD segmentation and ``spawnml vad`` without the model files.

:func:`speech_segments` is checked against silero-vad's ``get_speech_timestamps_from_probs``
on random probability sequences: the segments must be equal, sample for sample.
"""

from __future__ import annotations

import argparse
import wave

import numpy as np
import pytest
import torch
from spawnml import InvalidArgumentError
from spawnml_models import vad
from spawnml_models.audio_io import read_audio, resample
from spawnml_models.vad import VAD, SegmentationParameters, SpeechSegment, speech_segments

PARAMETERS = (
    SegmentationParameters(),
    SegmentationParameters(
        threshold=0.3, min_speech_duration_ms=64, min_silence_duration_ms=200, speech_pad_ms=90
    ),
    SegmentationParameters(threshold=0.6, neg_threshold=0.5, min_silence_duration_ms=0, speech_pad_ms=0),
)


@pytest.fixture(scope="module")
def from_probs():
    threads = torch.get_num_threads()  # importing silero_vad pins torch to one thread
    from silero_vad import get_speech_timestamps_from_probs

    torch.set_num_threads(threads)
    return get_speech_timestamps_from_probs


def random_probabilities(rng: np.random.Generator, chunks: int) -> list[float]:
    """Runs of high and low probabilities of random lengths, with noise, as a real VAD gives."""
    levels = np.repeat(rng.uniform(0, 1, chunks), rng.integers(1, 30, chunks))[:chunks]
    return list(np.clip(levels + rng.normal(0, 0.15, chunks), 0, 1))


@pytest.mark.parametrize("parameters", PARAMETERS, ids=lambda p: f"threshold{p.threshold}")
def test_segments_equal_silero(from_probs, parameters):
    rng = np.random.default_rng(7)
    for _ in range(50):
        chunks = int(rng.integers(1, 400))
        probabilities = random_probabilities(rng, chunks)
        samples = chunks * 512 - int(rng.integers(0, 512))
        expected = from_probs(
            probabilities,
            threshold=parameters.threshold,
            neg_threshold=parameters.neg_threshold,
            min_speech_duration_ms=parameters.min_speech_duration_ms,
            min_silence_duration_ms=parameters.min_silence_duration_ms,
            speech_pad_ms=parameters.speech_pad_ms,
            audio_length_samples=samples,
        )
        found = speech_segments(probabilities, samples, parameters)
        assert [(s.start, s.end) for s in found] == [(s["start"], s["end"]) for s in expected]


def test_segment_seconds():
    segment = SpeechSegment(8000, 24000)
    assert (segment.start_seconds, segment.end_seconds) == (0.5, 1.5)


def write_wav(path, samples: np.ndarray, rate: int = 16_000, channels: int = 1) -> None:
    with wave.open(str(path), "wb") as file:
        file.setnchannels(channels)
        file.setsampwidth(2)
        file.setframerate(rate)
        file.writeframes(samples.astype("<i2").tobytes())


def test_read_audio_of_16_bit_wav_as_the_wave_module_reads_it(tmp_path):
    samples = np.array([0, 16384, -32768, 32767, -1, 5])
    write_wav(tmp_path / "a.wav", samples)
    with wave.open(str(tmp_path / "a.wav"), "rb") as file:
        expected = np.frombuffer(file.readframes(file.getnframes()), dtype="<i2") / 32768
    np.testing.assert_array_equal(read_audio(tmp_path / "a.wav", 16_000), expected.astype(np.float32))


def test_read_audio_averages_channels(tmp_path):
    write_wav(tmp_path / "stereo.wav", np.array([100, 300, -50, 50]), channels=2)
    np.testing.assert_array_equal(read_audio(tmp_path / "stereo.wav", 16_000), [200 / 32768, 0])


def test_read_audio_refuses_missing_and_empty_files(tmp_path):
    with pytest.raises(InvalidArgumentError, match="cannot read audio"):
        read_audio(tmp_path / "missing.wav", 16_000)
    write_wav(tmp_path / "empty.wav", np.zeros(0))
    with pytest.raises(InvalidArgumentError, match="no audio samples"):
        read_audio(tmp_path / "empty.wav", 16_000)


def test_resample_refuses_bad_rates_and_shapes():
    with pytest.raises(InvalidArgumentError, match="must be positive"):
        resample(np.zeros(4), 0, 16_000)
    with pytest.raises(InvalidArgumentError, match="1-D"):
        resample(np.zeros((2, 4)), 8_000, 16_000)


def test_vad_command(tmp_path, monkeypatch, capsys):
    class FakePipeline:
        def __init__(self, providers=None):
            assert providers == ["cpu"]

        def __call__(self, audio, parameters):
            assert parameters == SegmentationParameters(0.4, 250, 100, 10)
            return [SpeechSegment(512, 16_512)]

    monkeypatch.setattr(vad, "VADPipeline", FakePipeline)
    write_wav(tmp_path / "a.wav", np.zeros(32_000))
    parser = argparse.ArgumentParser()
    VAD.configure(parser)
    args = parser.parse_args(
        [str(tmp_path / "a.wav"), "--threshold", "0.4", "--speech-pad-ms", "10", "--providers", "cpu"]
    )
    assert VAD.run(args) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].split() == ["512", "16512", "0.032", "1.032"]
