"""The PyTorch checkpoint reader: zip and legacy pickle formats, without torch and without running code."""
