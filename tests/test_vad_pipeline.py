"""Silero VAD on SpawnML against silero-vad's own ``get_speech_timestamps`` on onnxruntime.

The reference is ``load_silero_vad(onnx=True)`` (silero's ``OnnxWrapper`` over the same
``silero_vad.onnx``) on real read speech, ``beckett.wav`` of the moonshine-voice wheel,
alone and between stretches of silence and low noise. Speech probabilities agree within
1e-5 absolute (float32 LSTM steps summed in another order); timestamps are equal, sample
for sample. On WebGPU (three seconds of the speech: two phrases) the If-less opset 18 export
runs whole on the GPU; the main model's LSTM has no GPU kernel yet, so WebGPU alone refuses it
by name and ["webgpu", "cpu"] places it alone on the CPU, both within the same tolerances.
Needs ``scripts/fetch-models silero-vad beckett-speech``.
"""

from __future__ import annotations

import collections

import numpy as np
import pytest
import torch
from spawnml import InvalidArgumentError
from spawnml_models.assets import asset_file
from spawnml_models.audio_io import read_audio
from spawnml_models.vad import (
    MODEL_ASSET,
    MODEL_FILE,
    SAMPLE_RATE,
    SegmentationParameters,
    VADPipeline,
    speech_segments,
)

from tests.audio_formats import FORMATS, write_format
from tests.backends import backend_or_skip, refused_operators
from tests.model_files import require

pytestmark = pytest.mark.real_model

PROBABILITY_ATOL = 1e-5
SPEECH_ASSET, SPEECH_FILE = "beckett-speech", "beckett.wav"
IFLESS_FILE = "silero_vad_op18_ifless.onnx"
#: The first two phrases of beckett.wav: short enough for a software Vulkan device.
GPU_CLIP = 3 * SAMPLE_RATE
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
    return read_audio(require(lambda: asset_file(SPEECH_ASSET, SPEECH_FILE)), SAMPLE_RATE)


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
    silero, audio: np.ndarray, parameters: SegmentationParameters, model=None
) -> list[tuple[int, int]]:
    """``get_speech_timestamps`` with silero's own model, or ``model`` (an ``OnnxWrapper``)."""
    get_speech_timestamps, _, default = silero
    found = get_speech_timestamps(
        torch.from_numpy(audio),
        model or default,
        threshold=parameters.threshold,
        neg_threshold=parameters.neg_threshold,
        min_speech_duration_ms=parameters.min_speech_duration_ms,
        min_silence_duration_ms=parameters.min_silence_duration_ms,
        speech_pad_ms=parameters.speech_pad_ms,
    )
    return [(segment["start"], segment["end"]) for segment in found]


@pytest.mark.parametrize("model_file", [MODEL_FILE, IFLESS_FILE])
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


def placements(pipeline: VADPipeline) -> collections.Counter[tuple[str, str]]:
    return collections.Counter((op, provider) for _, op, provider in pipeline.session.placement())


def assert_matches_silero(silero, pipeline: VADPipeline, path, audio: np.ndarray) -> None:
    """Probabilities within PROBABILITY_ATOL of silero's OnnxWrapper over the same file, and its
    get_speech_timestamps segments exactly."""
    wrapper = silero[1](str(path), force_onnx_cpu=True)
    probabilities = pipeline.probabilities(audio)
    np.testing.assert_allclose(
        probabilities, reference_probabilities(wrapper, audio), rtol=0, atol=PROBABILITY_ATOL
    )
    segments = [
        (s.start, s.end) for s in speech_segments(probabilities, len(audio), SegmentationParameters())
    ]
    assert segments == reference_segments(silero, audio, SegmentationParameters(), wrapper)
    assert len(segments) == 2


def test_ifless_model_whole_on_webgpu_matches_silero(silero, speech):
    backend_or_skip("webgpu")
    path = require(lambda: asset_file(MODEL_ASSET, IFLESS_FILE))
    gpu = VADPipeline(path, providers=["webgpu"])
    assert {provider for _, provider in placements(gpu)} == {"webgpu"}
    assert_matches_silero(silero, gpu, path, speech[:GPU_CLIP])


def test_main_model_on_webgpu_and_the_cpu_places_on_the_cpu_only_what_webgpu_refuses(silero, speech):
    """The model's Ifs are gone at load (sr bound to 16 kHz). What WebGPU alone refuses by name (its
    LSTM, while the GPU has no LSTM kernel) is exactly what ["webgpu", "cpu"] places on the CPU,
    with the transfers into it listed; the results are silero's."""
    backend_or_skip("webgpu")
    path = require(lambda: asset_file(MODEL_ASSET, MODEL_FILE))
    refused = refused_operators("webgpu", lambda providers: VADPipeline(path, providers=providers))
    mixed = VADPipeline(path, providers=["webgpu", "cpu"])
    assert "If" not in {op for op, _ in placements(mixed)}
    assert {op for op, provider in placements(mixed) if provider == "cpu"} == refused
    on_cpu = {name for name, _, provider in mixed.session.placement() if provider == "cpu"}
    assert {t.node for t in mixed.session.transfers() if t.target == "cpu"} == on_cpu
    assert_matches_silero(silero, mixed, path, speech[:GPU_CLIP])


def test_a_model_without_silero_inputs_is_refused(tmp_path):
    import onnx

    graph = onnx.helper.make_graph(
        [onnx.helper.make_node("Relu", ["input"], ["output"])],
        "not_vad",
        [onnx.helper.make_tensor_value_info("input", onnx.TensorProto.FLOAT, [1, 576])],
        [onnx.helper.make_tensor_value_info("output", onnx.TensorProto.FLOAT, [1, 576])],
    )
    path = tmp_path / "relu.onnx"
    onnx.save(onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 17)]), path)
    with pytest.raises(InvalidArgumentError, match=r"not a Silero VAD model: its inputs are \['input'\]"):
        VADPipeline(path)


#: Two decoders and resamplers (libsndfile and soxr here, PyAV in the reference) differ by up to
#: 3.4e-3 of a 0.29 peak (measured); speech probabilities near a threshold then move the segment
#: edges by a chunk or two.
EDGE_TOLERANCE = 2 * 512


@pytest.mark.parametrize("name", FORMATS)
def test_other_rates_channels_and_formats(silero, pipeline, speech, name, tmp_path):
    """The file read and resampled to 16 kHz mono, against faster-whisper's decoder (PyAV) feeding
    silero's own segmentation."""
    from faster_whisper.audio import decode_audio

    path = write_format(speech, name, tmp_path)
    audio, decoded = read_audio(path, SAMPLE_RATE), decode_audio(str(path), SAMPLE_RATE)
    assert abs(len(audio) - len(decoded)) <= 1
    length = min(len(audio), len(decoded))
    np.testing.assert_allclose(audio[:length], decoded[:length], rtol=0, atol=1e-2)
    expected = reference_segments(silero, decoded, SegmentationParameters())
    segments = pipeline(audio)
    assert len(segments) == len(expected) >= 5
    np.testing.assert_allclose([(s.start, s.end) for s in segments], expected, rtol=0, atol=EDGE_TOLERANCE)


def test_arrays_at_another_rate_are_resampled(pipeline, speech):
    import soxr

    resampled = soxr.resample(speech, SAMPLE_RATE, 44_100)
    assert pipeline(resampled, sample_rate=44_100) == pipeline(soxr.resample(resampled, 44_100, SAMPLE_RATE))


def test_unreadable_files_are_refused(tmp_path):
    path = tmp_path / "noise.wav"
    path.write_bytes(b"RIFF\x00\x00not audio at all")
    with pytest.raises(InvalidArgumentError, match="cannot read audio"):
        read_audio(path, SAMPLE_RATE)
