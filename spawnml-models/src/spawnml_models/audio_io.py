"""Audio of any rate, channel count and file format, as the speech pipelines take it: mono float32
samples at the model's rate.

libsndfile (through soundfile) decodes WAV of any sample type, FLAC, Ogg Vorbis and Opus, and
MP3; soxr resamples. Both come with the ``audio`` extra and are imported when audio is first
read or resampled, so that registering the pipelines does not load them.
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from types import ModuleType

import numpy as np
from spawnml import InvalidArgumentError

EXTRA = 'pip install "spawnml-models[audio]"'
#: What the commands that read audio say their argument is.
FILE_HELP = "an audio file (WAV, FLAC, Ogg, MP3; any rate and channel count)"


def read_audio(path: str | os.PathLike[str], sample_rate: int) -> np.ndarray:
    """The samples of the audio file at ``path``, channels averaged to mono, at ``sample_rate``."""
    soundfile = _required("soundfile")
    try:
        samples, rate = soundfile.read(os.fspath(path), dtype="float32", always_2d=True)
    except soundfile.LibsndfileError as error:
        raise InvalidArgumentError(f"cannot read audio from {Path(path)}: {error}") from error
    if not len(samples):
        raise InvalidArgumentError(f"{Path(path)} holds no audio samples")
    return resample(samples.mean(axis=1), rate, sample_rate)


def resample(audio: np.ndarray, rate: int, sample_rate: int) -> np.ndarray:
    """Mono ``audio`` sampled at ``rate`` Hz as float32 samples at ``sample_rate`` Hz (soxr, high quality)."""
    audio = np.asarray(audio, dtype=np.float32)
    if audio.ndim != 1 or not len(audio):
        raise InvalidArgumentError(f"audio must be a non-empty 1-D array of samples, not shape {audio.shape}")
    if rate <= 0:
        raise InvalidArgumentError(f"a sample rate must be positive, not {rate}")
    if rate == sample_rate:
        return audio
    return _required("soxr").resample(audio, rate, sample_rate).astype(np.float32, copy=False)


def _required(module: str) -> ModuleType:
    try:
        return importlib.import_module(module)
    except ImportError as error:
        raise InvalidArgumentError(
            f"reading or resampling audio needs {module} ({EXTRA}): {error}"
        ) from error
