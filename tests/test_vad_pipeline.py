"""Silero VAD on SpawnML against silero-vad's own ``get_speech_timestamps`` on onnxruntime.

The reference is ``load_silero_vad(onnx=True)`` (silero's ``OnnxWrapper`` over the same
``silero_vad.onnx``) on real read speech, ``beckett.wav`` of the moonshine-voice wheel,
alone and between stretches of silence and low noise. Speech probabilities agree within
1e-5 absolute (float32 LSTM steps summed in another order); timestamps are equal, sample
for sample. Needs ``scripts/fetch-models silero-vad beckett-speech``.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from spawnml_models.assets import asset_file
from spawnml_models.vad import (
    MODEL_ASSET,
    MODEL_FILE,
    SAMPLE_RATE,
    SegmentationParameters,
    VADPipeline,
    read_wav,
    speech_segments,
)

from tests.model_files import require

pytestmark = pytest.mark.real_model

PROBABILITY_ATOL = 1e-5
SPEECH_ASSET, SPEECH_FILE = "beckett-speech", "beckett.wav"
PARAMETERS = (
    SegmentationParameters(),
    SegmentationParameters(
        threshold=0.3, min_speech_duration_ms=100, min_silence_duration_ms=300, speech_pad_ms=100
    ),
    SegmentationParameters(
        threshold=0.7, min_speech_duration_ms=500, min_silence_duration_ms=50, speech_pad_ms=0
    ),
    SegmentationParameters(threshold=0.6, neg_threshold=0.2, speech_pad_ms=250),
)


@pytest.fixture(scope="module")
def silero():
    """silero-vad's (get_speech_timestamps, OnnxWrapper class, model); its import pins torch to 1 thread."""
    threads = torch.get_num_threads()
    from silero_vad import get_speech_timestamps, load_silero_vad
    from silero_vad.utils_vad import OnnxWrapper

    torch.set_num_threads(threads)
    return get_speech_timestamps, OnnxWrapper, load_silero_vad(onnx=True)


@pytest.fixture(scope="module")
def speech() -> np.ndarray:
    return read_wav(require(lambda: asset_file(SPEECH_ASSET, SPEECH_FILE)))


@pytest.fixture(scope="module")
def pipeline() -> VADPipeline:
    return VADPipeline(require(lambda: asset_file(MODEL_ASSET, MODEL_FILE)))


@pytest.fixture(scope="module", params=[False, True], ids=["speech", "with-silence"])
def scored(request, speech, pipeline) -> tuple[np.ndarray, np.ndarray]:
    """An audio clip and the pipeline's speech probabilities for it."""
    audio = padded_with_silence(speech) if request.param else speech
    return audio, pipeline.probabilities(audio)


def padded_with_silence(speech: np.ndarray) -> np.ndarray:
    """Speech between 1.3 s of silence and 2.1 s of faint noise, not a whole number of chunks."""
    noise = np.random.default_rng(5).normal(0, 1e-3, int(2.1 * SAMPLE_RATE)).astype(np.float32)
    return np.concatenate([np.zeros(int(1.3 * SAMPLE_RATE), np.float32), speech, noise, speech[:7000]])


def reference_probabilities(model, audio: np.ndarray) -> np.ndarray:
    model.reset_states()
    return model.audio_forward(torch.from_numpy(audio), SAMPLE_RATE).numpy().ravel()


def reference_segments(
    silero, audio: np.ndarray, parameters: SegmentationParameters
) -> list[tuple[int, int]]:
    get_speech_timestamps, _, model = silero
    found = get_speech_timestamps(
        torch.from_numpy(audio),
        model,
        threshold=parameters.threshold,
        neg_threshold=parameters.neg_threshold,
        min_speech_duration_ms=parameters.min_speech_duration_ms,
        min_silence_duration_ms=parameters.min_silence_duration_ms,
        speech_pad_ms=parameters.speech_pad_ms,
    )
    return [(segment["start"], segment["end"]) for segment in found]


@pytest.mark.parametrize("model_file", [MODEL_FILE, "silero_vad_op18_ifless.onnx"])
@pytest.mark.parametrize("padded", [False, True], ids=["speech", "with-silence"])
def test_probabilities_match_onnxruntime(silero, speech, model_file, padded):
    audio = padded_with_silence(speech) if padded else speech
    path = require(lambda: asset_file(MODEL_ASSET, model_file))
    expected = reference_probabilities(silero[1](str(path), force_onnx_cpu=True), audio)
    probabilities = VADPipeline(path).probabilities(audio)
    assert probabilities.shape == expected.shape == (-(-len(audio) // 512),)
    np.testing.assert_allclose(probabilities, expected, rtol=0, atol=PROBABILITY_ATOL)


@pytest.mark.parametrize("parameters", PARAMETERS, ids=lambda p: f"threshold{p.threshold}")
def test_timestamps_equal_get_speech_timestamps(silero, scored, parameters):
    audio, probabilities = scored
    expected = reference_segments(silero, audio, parameters)
    segments = speech_segments(probabilities, len(audio), parameters)
    assert [(segment.start, segment.end) for segment in segments] == expected
    assert len(expected) >= 2
    assert [segment.start_seconds for segment in segments] == [start / SAMPLE_RATE for start, _ in expected]


def test_beckett_segments(silero, pipeline, speech):
    """End to end with the defaults: six phrases of beckett.wav between 0.32 s and 8.93 s."""
    segments = pipeline(speech)
    expected = [
        (5152, 19936),
        (29728, 45536),
        (55840, 67552),
        (77856, 90080),
        (106016, 118752),
        (130080, 142816),
    ]
    assert [(segment.start, segment.end) for segment in segments] == expected
    assert reference_segments(silero, speech, SegmentationParameters()) == expected
