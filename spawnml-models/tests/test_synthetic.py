"""The synthetic inputs: deterministic, in range, and shaped like what the models expect."""

from __future__ import annotations

import numpy as np
from spawnml_models.synthetic import CLS, PAD, SEP, speech, text_image, token_batch


def rng() -> np.random.Generator:
    return np.random.default_rng(7)


def test_text_image_is_a_light_page_with_dark_strokes_in_each_line():
    page = text_image(rng(), 96, 160, lines=3)
    assert page.shape == (96, 160, 3) and page.dtype == np.float32
    assert page.min() >= 0 and page.max() <= 1
    dark = page.mean(-1) < 0.4
    assert 0.03 < dark.mean() < 0.4
    assert all(band.any() for band in np.split(dark, 3))  # every text line has ink
    np.testing.assert_array_equal(page, text_image(rng(), 96, 160, lines=3))


def test_speech_is_bounded_voiced_audio_with_pauses():
    audio = speech(rng(), 16_000)
    assert audio.shape == (16_000,) and audio.dtype == np.float32
    assert np.abs(audio).max() <= 0.52
    loudness = np.abs(audio).reshape(50, -1).max(-1)  # 20 ms frames
    assert loudness.max() > 0.3 and loudness.min() < 0.05
    spectrum = np.abs(np.fft.rfft(audio))
    assert np.argmax(spectrum) < 4000  # the energy lies in the speech band (bins are 1 Hz)
    np.testing.assert_array_equal(audio, speech(rng(), 16_000))


def test_token_batch_pads_to_the_longest_sentence():
    feeds = token_batch(rng(), [5, 3])
    ids, mask = feeds["input_ids"], feeds["attention_mask"]
    assert ids.dtype == mask.dtype == feeds["token_type_ids"].dtype == np.int64
    assert ids.shape == mask.shape == (2, 5)
    assert ids[0, 0] == ids[1, 0] == CLS and ids[0, 4] == ids[1, 2] == SEP
    assert list(ids[1, 3:]) == [PAD, PAD]
    assert mask.tolist() == [[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]]
    assert not feeds["token_type_ids"].any()
