"""``onnxruntime.capi.onnxruntime_inference_collection``: the Python-side classes."""

from __future__ import annotations

from ..devices import OrtDevice, OrtDeviceVendorId
from ..iobinding import IOBinding
from ..ortvalue import OrtValue
from ..providers import check_and_normalize_provider_args
from ..session import InferenceSession, ModelMetadata

Session = InferenceSession

__all__ = [
    "IOBinding",
    "InferenceSession",
    "ModelMetadata",
    "OrtDevice",
    "OrtDeviceVendorId",
    "OrtValue",
    "Session",
    "check_and_normalize_provider_args",
]
