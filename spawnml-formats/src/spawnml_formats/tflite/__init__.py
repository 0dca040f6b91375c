"""TFLite format loader: flatbuffer ``.tflite`` models lowered to the IR."""
