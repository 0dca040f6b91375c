"""The GGUF format loader: llama.cpp's weights files, read with the ``gguf`` library."""
