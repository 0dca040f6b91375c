"""Core ML format loader: ``.mlmodel`` files and ``.mlpackage`` folders (neural networks, ML programs)."""
