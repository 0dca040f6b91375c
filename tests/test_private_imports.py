"""No module of the distributions imports another module's private name.

A helper two modules share is public, in a module named for what it does; ``from x import
_name`` across modules hides that it is shared and lets copies drift apart. Importing a
private *module* (``from . import _tensor_api``) is fine: the underscore there marks the
module as internal to its package, not a name as internal to a module.
"""

from __future__ import annotations

import ast
from collections.abc import Collection
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCES = sorted(ROOT.glob("spawnml-*/src"))


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _modules() -> dict[str, tuple[Path, bool]]:
    """Every module of the distributions: dotted name -> (file, whether it is a package)."""
    found = {}
    for source in SOURCES:
        for path in source.rglob("*.py"):
            parts = path.relative_to(source).with_suffix("").parts
            package = parts[-1] == "__init__"
            found[".".join(parts[:-1] if package else parts)] = (path, package)
    return found


def _resolve(module: str, package: bool, node: ast.ImportFrom) -> str:
    """The absolute name of the module ``node`` (in ``module``) imports from."""
    if not node.level:
        return node.module or ""
    base = module.split(".") if package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def _imports_in(module: str, package: bool, text: str, modules: Collection[str]) -> set[tuple[str, str, str]]:
    """(``module``, imported module, name) for each private name ``module`` imports from another
    module of ``modules``: by ``from m import _name``, or as an attribute ``m._name`` of an
    imported module ``m``."""
    tree = ast.parse(text)
    found = set()
    aliases: dict[str, str] = {}  # local name -> imported module of ours
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            source = _resolve(module, package, node)
            for alias in node.names:
                if f"{source}.{alias.name}" in modules:
                    aliases[alias.asname or alias.name] = f"{source}.{alias.name}"
                elif _private(alias.name) and source != module:
                    found.add((module, source, alias.name))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname and alias.name in modules:
                    aliases[alias.asname] = alias.name
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in aliases
            and _private(node.attr)
        ):
            found.add((module, aliases[node.value.id], node.attr))
    return found


def _private_imports() -> set[tuple[str, str, str]]:
    modules = _modules()
    found = set()
    for module, (path, package) in modules.items():
        found |= _imports_in(module, package, path.read_text(encoding="utf-8"), modules)
    return found


def test_no_private_name_is_imported_across_modules():
    found = sorted(_private_imports())
    assert not found, "make these public in a module named for what they do:\n" + "\n".join(
        f"{importer} imports {name} from {source}" for importer, source, name in found
    )


def test_the_check_sees_relative_imports_and_attributes_and_allows_private_modules():
    modules = {"spawnml", "spawnml.gpu", "spawnml.gpu.table", "spawnml.gpu.vision", "spawnml._tensor_api"}
    text = (
        "from .table import _host, public\n"
        "from . import table\n"
        "from .. import _tensor_api\n"
        "import spawnml.gpu.table as shared\n"
        "table._axis(1, 2)\n"
        "shared._strides([])\n"
        "def _own(): ...\n"
    )
    assert _imports_in("spawnml.gpu.vision", False, text, modules) == {
        ("spawnml.gpu.vision", "spawnml.gpu.table", "_host"),
        ("spawnml.gpu.vision", "spawnml.gpu.table", "_axis"),
        ("spawnml.gpu.vision", "spawnml.gpu.table", "_strides"),
    }
