"""The methods autograd installs on Tensor are the ones declared for type checkers."""

import ast
import importlib
import inspect

from spawnml.autograd.methods import METHODS


def test_declared_methods_match_installed() -> None:
    # The module, not the ``spawnml.tensor`` function that shares its name.
    tree = ast.parse(inspect.getsource(importlib.import_module("spawnml.tensor")))
    stub = next(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == "_Methods")
    declared = {n.name for n in stub.body if isinstance(n, ast.FunctionDef)}
    assert declared == set(METHODS) - {"__hash__"}
