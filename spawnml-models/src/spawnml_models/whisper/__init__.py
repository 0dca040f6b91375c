"""Speech recognition with Whisper from CTranslate2 model files: log-mel front end, graphs, decoding."""

from .audio import log_mel_spectrogram
from .graph import WhisperConfig, build_decoder_graph, build_encoder_graph
from .pipeline import Segment, SpeechRecognitionPipeline

__all__ = [
    "Segment",
    "SpeechRecognitionPipeline",
    "WhisperConfig",
    "build_decoder_graph",
    "build_encoder_graph",
    "log_mel_spectrogram",
]
