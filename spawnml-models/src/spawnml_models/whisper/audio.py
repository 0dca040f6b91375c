"""Whisper's log-mel front end in numpy: 16 kHz audio to 80 log-mel bins every 10 ms.

As Whisper computes it: a 400-point STFT (periodic Hann window, centred frames with
reflect padding, hop 160) whose last frame is dropped, power spectrum, Slaney-scale mel
filters (80 bands, 0 to 8 kHz, area-normalised), ``log10`` of the energies clamped at
1e-10, floored 8 below their maximum, then ``(x + 4) / 4``.
"""

from __future__ import annotations

import numpy as np
from spawnml import InvalidArgumentError

SAMPLE_RATE = 16_000
N_FFT = 400
HOP_LENGTH = 160
N_MELS = 80
#: Frames in one 30 s window, what the encoder takes.
WINDOW_FRAMES = 3000

_LINEAR_HZ_PER_MEL = 200.0 / 3  # Slaney: linear below 1 kHz ...
_LOG_START_HZ = 1000.0
_LOG_STEP = np.log(6.4) / 27.0  # ... logarithmic above


def _hz_to_mel(hz: np.ndarray) -> np.ndarray:
    start_mel = _LOG_START_HZ / _LINEAR_HZ_PER_MEL
    log_part = start_mel + np.log(np.maximum(hz, _LOG_START_HZ) / _LOG_START_HZ) / _LOG_STEP
    return np.where(hz < _LOG_START_HZ, hz / _LINEAR_HZ_PER_MEL, log_part)


def _mel_to_hz(mel: np.ndarray) -> np.ndarray:
    start_mel = _LOG_START_HZ / _LINEAR_HZ_PER_MEL
    return np.where(
        mel < start_mel, mel * _LINEAR_HZ_PER_MEL, _LOG_START_HZ * np.exp(_LOG_STEP * (mel - start_mel))
    )


def mel_filters(n_mels: int = N_MELS, n_fft: int = N_FFT, sample_rate: int = SAMPLE_RATE) -> np.ndarray:
    """Slaney-scale triangular filters ``[n_mels, n_fft // 2 + 1]``, each of unit area per Hz."""
    edges = _mel_to_hz(np.linspace(0.0, _hz_to_mel(np.array(sample_rate / 2)), n_mels + 2))
    bins = np.fft.rfftfreq(n_fft, 1.0 / sample_rate)
    rising = (bins - edges[:-2, None]) / (edges[1:-1] - edges[:-2])[:, None]
    falling = (edges[2:, None] - bins) / (edges[2:] - edges[1:-1])[:, None]
    triangles = np.maximum(0.0, np.minimum(rising, falling))
    return triangles * (2.0 / (edges[2:] - edges[:-2]))[:, None]


def log_mel_spectrogram(audio: np.ndarray, padding: int = HOP_LENGTH) -> np.ndarray:
    """Log-mel features ``[80, frames]`` (float32) of mono 16 kHz ``audio`` followed by ``padding``
    zero samples; ``frames`` is ``(len(audio) + padding) // 160``."""
    audio = np.asarray(audio, dtype=np.float32)
    if audio.ndim != 1 or not len(audio):
        raise InvalidArgumentError(f"audio must be a non-empty 1-D array of samples, not shape {audio.shape}")
    if not np.isfinite(audio).all():
        raise InvalidArgumentError("audio samples must be finite (found NaN or infinity)")
    padded = np.pad(audio.astype(np.float64), (0, padding))
    if len(padded) <= N_FFT // 2:
        raise InvalidArgumentError(f"audio of {len(audio)} samples is shorter than one STFT frame")
    centred = np.pad(padded, N_FFT // 2, mode="reflect")
    frames = np.lib.stride_tricks.sliding_window_view(centred, N_FFT)[::HOP_LENGTH]
    window = np.hanning(N_FFT + 1)[:-1]
    power = np.abs(np.fft.rfft(frames * window, axis=-1)[:-1]) ** 2
    log_mel = np.log10(np.maximum(mel_filters() @ power.T, 1e-10))
    log_mel = np.maximum(log_mel, log_mel.max() - 8.0)
    return ((log_mel + 4.0) / 4.0).astype(np.float32)


def fit_window(features: np.ndarray) -> np.ndarray:
    """``features`` cut or zero-padded to one 30 s window of :data:`WINDOW_FRAMES` frames."""
    features = features[:, :WINDOW_FRAMES]
    return np.pad(features, ((0, 0), (0, WINDOW_FRAMES - features.shape[1])))
