"""The ONNX format loader."""
