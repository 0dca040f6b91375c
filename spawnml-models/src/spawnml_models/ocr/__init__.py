"""OCR: PP-OCRv4 text detection, direction classification and recognition on SpawnML."""

from .pipeline import OCRPipeline, TextLine

__all__ = ["OCRPipeline", "TextLine"]
