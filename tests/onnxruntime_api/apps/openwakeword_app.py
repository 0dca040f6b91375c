"""openWakeWord: melspectrogram and speech-embedding models, then the wake-word classifiers."""

import numpy as np
from _media import result, speechlike_audio
from openwakeword.model import Model

audio = (speechlike_audio() * 32767).astype(np.int16)
model = Model()
scores = []
for start in range(0, len(audio) - 1279, 1280):
    prediction = model.predict(audio[start : start + 1280])
    scores.append({name: float(value) for name, value in sorted(prediction.items())})
result(scores)
