"""rapidocr-onnxruntime: text detection, direction classification and recognition of a rendered page."""

from _media import bgr, result, text_image
from rapidocr_onnxruntime import RapidOCR

image = bgr(text_image(["SpawnML runs ONNX models", "on CPU and GPU 2024", "Hello world"]))
lines, _ = RapidOCR()(image)
result(
    [
        {"text": text, "score": float(score), "box": [[float(v) for v in p] for p in box]}
        for box, text, score in lines
    ]
)
