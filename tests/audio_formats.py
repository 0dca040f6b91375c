"""Speech written in other rates, channel counts, sample types and containers, for the audio tests.

The files are what a user would bring: 44.1 kHz stereo FLAC (the right channel at half level),
48 kHz 24-bit WAV, 22.05 kHz Ogg Vorbis and 8 kHz MP3. The tests read them with the pipelines'
reader and with faster-whisper's (PyAV's decoder and resampler) as the reference.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

#: name -> (rate, subtype or None for the container's default, stereo)
FORMATS = {
    "flac-44k-stereo": (44_100, None, True),
    "wav-48k-24bit": (48_000, "PCM_24", False),
    "ogg-22k": (22_050, None, False),
    "mp3-8k": (8_000, None, False),
}


def write_format(speech: np.ndarray, name: str, folder: Path) -> Path:
    """16 kHz mono ``speech`` written as the format ``name`` of :data:`FORMATS`."""
    import soundfile
    import soxr

    rate, subtype, stereo = FORMATS[name]
    samples = soxr.resample(speech, 16_000, rate)
    if stereo:
        samples = np.stack([samples, 0.5 * samples], axis=1)
    path = folder / f"speech.{name.split('-')[0]}"
    soundfile.write(path, samples, rate, subtype=subtype)
    return path
