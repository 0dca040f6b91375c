"""``python -m spawnml.onnxruntime SCRIPT [ARGS]`` (or ``-m MODULE [ARGS]``).

Runs the script with ``import onnxruntime`` resolved to SpawnML.
"""

from __future__ import annotations

import os
import runpy
import sys

from .install import install

USAGE = "usage: python -m spawnml.onnxruntime SCRIPT [ARGS...] | -m MODULE [ARGS...]"


def main(argv: list[str]) -> None:
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE, file=sys.stderr if not argv else sys.stdout)
        raise SystemExit(2 if not argv else 0)
    install()
    if argv[0] == "-m":
        if len(argv) < 2:
            raise SystemExit(USAGE)
        sys.argv = [argv[1], *argv[2:]]
        runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
        return
    script = argv[0]
    sys.argv = list(argv)
    # As `python SCRIPT` does: the script's folder first on the import path.
    sys.path[0] = os.path.dirname(os.path.abspath(script))
    runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    main(sys.argv[1:])
