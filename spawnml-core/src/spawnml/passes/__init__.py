"""Graph passes: analyses and rewrites of the IR that serve every backend."""

from .optimizer import GraphOptimizationLevel, optimize
from .shape_inference import infer_shapes

__all__ = ["GraphOptimizationLevel", "infer_shapes", "optimize"]
