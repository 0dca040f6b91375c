"""Saving tensors and whole training states as SafeTensors files.

``save_safetensors`` / ``load_safetensors`` exchange flat ``{name: tensor}`` dicts (a module's
``state_dict``) with torch and every other SafeTensors reader. ``save_checkpoint`` /
``load_checkpoint`` keep any nesting of dicts, lists and numbers around the tensors (model,
optimizer and scheduler state, the RNG state, the step): tensors are stored as tensors, the
structure as JSON in the file's metadata, so a checkpoint holds no code and resumes exactly.
The ``safetensors`` package is imported only here, when called.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from os import PathLike
from typing import Any

import numpy as np

from .autograd.functions.creation import generator
from .errors import InvalidArgumentError
from .tensor import Tensor, backend_named

Path = str | PathLike[str]
_STRUCTURE = "spawnml.checkpoint"


def _safetensors_numpy() -> Any:
    try:
        import safetensors.numpy
    except ImportError as error:
        raise ImportError(
            "reading and writing SafeTensors files needs the safetensors package: "
            "pip install 'spawnml-core[train]'"
        ) from error
    return safetensors.numpy


def save_safetensors(
    tensors: Mapping[str, Tensor], path: Path, metadata: dict[str, str] | None = None
) -> None:
    """Write ``tensors`` (read back to the host) to a SafeTensors file."""
    arrays = {name: np.ascontiguousarray(t.detach().numpy()) for name, t in tensors.items()}
    _safetensors_numpy().save_file(arrays, str(path), metadata=metadata)


def load_safetensors(path: Path, device: str = "cpu") -> dict[str, Tensor]:
    """Every tensor of a SafeTensors file, on ``device``."""
    backend = backend_named(device)
    arrays = _safetensors_numpy().load_file(str(path))
    return {name: Tensor(backend.from_numpy(a), backend) for name, a in arrays.items()}


def get_rng_state() -> dict[str, Any]:
    """The state of the generator behind ``rand``, dropout, weight initialisation and shuffling."""
    return dict(generator().bit_generator.state)


def set_rng_state(state: dict[str, Any]) -> None:
    """Put the generator back in a state :func:`get_rng_state` returned."""
    generator().bit_generator.state = state


def save_checkpoint(obj: Any, path: Path) -> None:
    """Write ``obj`` — dicts, lists, tuples, numbers, strings, None and tensors — to ``path``."""
    tensors: dict[str, Tensor] = {}
    structure = _encode(obj, tensors)
    save_safetensors(tensors, path, {_STRUCTURE: json.dumps(structure)})


def load_checkpoint(path: Path, device: str = "cpu") -> Any:
    """What :func:`save_checkpoint` wrote, its tensors on ``device``."""
    _safetensors_numpy()
    from safetensors import safe_open

    with safe_open(str(path), framework="numpy") as f:
        metadata = f.metadata() or {}
    if _STRUCTURE not in metadata:
        raise InvalidArgumentError(f"{path} is a SafeTensors file but not a spawnml checkpoint")
    return _decode(json.loads(metadata[_STRUCTURE]), load_safetensors(path, device))


def _encode(obj: Any, tensors: dict[str, Tensor]) -> Any:
    if isinstance(obj, Tensor):
        key = str(len(tensors))
        tensors[key] = obj
        return {"tensor": key}
    if isinstance(obj, Mapping):
        return {"dict": [[_encode(k, tensors), _encode(v, tensors)] for k, v in obj.items()]}
    if isinstance(obj, tuple | list):
        return {type(obj).__name__: [_encode(v, tensors) for v in obj]}
    if isinstance(obj, np.generic):
        return obj.item()
    if obj is None or isinstance(obj, bool | int | float | str):
        return obj
    raise InvalidArgumentError(
        f"a checkpoint holds tensors, containers and numbers, not {type(obj).__name__}"
    )


def _decode(node: Any, tensors: dict[str, Tensor]) -> Any:
    if not isinstance(node, dict):
        return node
    ((kind, value),) = node.items()
    if kind == "tensor":
        return tensors[value]
    if kind == "dict":
        return {_decode(k, tensors): _decode(v, tensors) for k, v in value}
    items = [_decode(v, tensors) for v in value]
    return tuple(items) if kind == "tuple" else items
