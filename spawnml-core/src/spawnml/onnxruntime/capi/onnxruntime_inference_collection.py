"""``onnxruntime.capi.onnxruntime_inference_collection``: the Python-side classes."""

from __future__ import annotations

from ..iobinding import IOBinding
from ..ortvalue import OrtValue
from ..session import InferenceSession, ModelMetadata

Session = InferenceSession

__all__ = ["IOBinding", "InferenceSession", "ModelMetadata", "OrtValue", "Session"]
