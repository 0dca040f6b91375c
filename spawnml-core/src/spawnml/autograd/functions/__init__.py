"""Differentiable operations with torch's names and semantics, one module per family."""
