"""faster-whisper's voice activity detector (Silero, run through onnxruntime)."""

from _media import result, speechlike_audio
from faster_whisper.vad import VadOptions, get_speech_timestamps, get_vad_model

audio = speechlike_audio()
probabilities = get_vad_model()(audio)
stamps = get_speech_timestamps(audio, VadOptions(threshold=0.3))
result(
    {
        "probabilities": [float(p) for p in probabilities.reshape(-1)],
        "stamps": [[s["start"], s["end"]] for s in stamps],
    }
)
