"""Inputs named on the command line, ``-i NAME=FILE.npy``: read alike by ``run`` and ``profile``."""

from __future__ import annotations

import numpy as np

from .errors import InvalidArgumentError


def read_input(spec: str) -> tuple[str, np.ndarray]:
    """The feed ``NAME=FILE.npy`` names: its name and the array the file holds."""
    name, sep, path = spec.partition("=")
    if not sep or not name or not path:
        raise InvalidArgumentError(f"--input takes NAME=FILE.npy, got {spec!r}")
    try:
        return name, np.load(path, allow_pickle=False)
    except (OSError, ValueError) as error:
        raise InvalidArgumentError(f"cannot read input {name!r} from {path!r}: {error}") from error
