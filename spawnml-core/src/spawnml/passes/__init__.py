"""Graph passes: analyses and rewrites of the IR that serve every backend."""

from .shape_inference import infer_shapes

__all__ = ["infer_shapes"]
