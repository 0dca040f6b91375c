"""silero-vad's ONNX path: per-chunk speech probabilities and speech timestamps."""

import torch
from _media import result, speechlike_audio
from silero_vad import get_speech_timestamps, load_silero_vad

model = load_silero_vad(onnx=True)
audio = torch.from_numpy(speechlike_audio())
probabilities = [float(model(audio[i : i + 512], 16000)) for i in range(0, len(audio) - 511, 512)]
model.reset_states()
stamps = get_speech_timestamps(audio, model, threshold=0.3)
result({"probabilities": probabilities, "stamps": [[s["start"], s["end"]] for s in stamps]})
