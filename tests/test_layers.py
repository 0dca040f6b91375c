"""Core's import layers: no cycle among ``spawnml``'s modules, and each layer imports only its
own layer and the layers below, counting imports inside functions.

The layers, bottom first (a module belongs to the first entry naming it or a package above it):

0. ``ir``, ``dtypes``, ``errors``, ``limits`` and the leaf helpers every layer may use:
   ``graph_builder`` (writes IR), ``protobuf_wire`` (reads bytes), ``threads`` (a context
   variable), ``version``, and ``discovery``, where the layers below the plugins find what the
   plugins registered (the package installs the plugin layer there without importing it).
1. ``ops`` (operator schemas and shape rules), ``kernel`` (the kernel language), and
   ``backend``, the interface a device implements (kernel tables over the IR), which the
   planner, the tensor and ``gpu`` all program against.
2. ``passes``, ``planner``, ``tensor``; with them ``plan_compiler`` (the planner's plans made
   callable), ``gpu``, the kernel table built from ``ops`` and ``kernel`` that the planner's
   backends and the tensor run, and ``profiler``, which times what the planner runs.
3. ``session``, ``autograd``, ``nn``, ``optim``; with them ``serialization`` and ``utils``
   (for ``nn`` and ``optim``), ``_tensor_api`` (the public tensor functions over autograd), and
   ``formats`` (loading model files through the format loaders ``discovery`` finds).
4. ``plugins``, and what plugins provide: ``models``.
5. ``cli`` and its ``cli_*`` modules, ``conformance``, ``onnxruntime`` (the onnxruntime-compatible facade
   over sessions and plugins), and the package ``spawnml`` itself, the public facade.

A module may import its own layer and those below. Imports under ``if TYPE_CHECKING:`` are
annotations, never run, and do not count; imports inside functions do, and so does the
``__init__`` of each package an import enters.

``import spawnml.ir`` loads only the IR, what it imports, and what the package's ``__init__``
always holds: the errors, the version and ``discovery``.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "spawnml-core" / "src"
PACKAGE = "spawnml"

LAYERS: tuple[tuple[str, ...], ...] = (
    ("ir", "dtypes", "errors", "limits", "graph_builder", "protobuf_wire", "threads", "version", "discovery"),
    ("ops", "kernel", "backend"),
    ("passes", "planner", "plan_compiler", "tensor", "gpu", "profiler"),
    ("session", "autograd", "nn", "optim", "serialization", "utils", "_tensor_api", "formats"),
    ("plugins", "models"),
    ("cli", "cli_inputs", "cli_model", "cli_profile", "conformance", "onnxruntime", ""),
)

_TENSOR_AUTOGRAD = "Tensor's autograd state is driven by autograd, which builds on Tensor"

#: Imports that still go up a layer or close a cycle, (importer, imported), each with why;
#: the list only shrinks.
ALLOWED: dict[tuple[str, str], str] = {
    ("spawnml.tensor", "spawnml.autograd"): _TENSOR_AUTOGRAD,
    ("spawnml.tensor", "spawnml.autograd.functions"): _TENSOR_AUTOGRAD,
    ("spawnml.tensor", "spawnml.autograd.engine"): _TENSOR_AUTOGRAD,
    ("spawnml.tensor", "spawnml.autograd.function"): _TENSOR_AUTOGRAD,
    ("spawnml.tensor", "spawnml.autograd.functions.movement"): _TENSOR_AUTOGRAD,
    ("spawnml.tensor", "spawnml.autograd.mode"): _TENSOR_AUTOGRAD,
    ("spawnml.passes.constant_folding", "spawnml.planner"): "folds by running a plan; plans infer shapes",
    ("spawnml.planner", "spawnml.plan_compiler"): "planner.compile uses the compiler built on it",
    ("spawnml.autograd.engine", "spawnml.autograd.functions.creation"): "seeds gradients with ones",
}


def modules() -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its own name)."""
    found = {}
    for path in sorted((ROOT / PACKAGE).rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def _resolve(name: str, known: dict[str, Path]) -> str | None:
    """The longest known module that ``name`` names or lies in (a function or class of it)."""
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def _imported(module: str, path: Path, known: dict[str, Path]) -> Iterator[str]:
    """The package's modules ``module`` imports anywhere in its file, relative ones resolved."""
    is_package = path.name == "__init__.py"
    tree = ast.parse(path.read_text(), str(path))
    typing_only = {
        id(inner)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and ast.unparse(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING")
        for statement in node.body
        for inner in ast.walk(statement)
    }
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = module.split(".")
                anchor = anchor[: len(anchor) - node.level + (1 if is_package else 0)]
                base = ".".join([*anchor, *([node.module] if node.module else [])])
            else:
                base = node.module or ""
            names = [f"{base}.{alias.name}" for alias in node.names]
        else:
            continue
        for name in names:
            if name == PACKAGE or name.startswith(PACKAGE + "."):
                target = _resolve(name, known)
                if target and target != module:
                    yield target
                    yield from _packages_entered(module, target)


def _packages_entered(module: str, target: str) -> Iterator[str]:
    """The packages whose ``__init__`` importing ``target`` from ``module`` runs: those holding
    ``target`` but not ``module`` (the root package holds both)."""
    parts = target.split(".")
    for end in range(2, len(parts)):
        package = ".".join(parts[:end])
        if not module.startswith(package + ".") and module != package:
            yield package


def graph() -> dict[str, set[str]]:
    """Each module's imports of other modules of the package."""
    known = modules()
    return {module: set(_imported(module, path, known)) for module, path in known.items()}


def layer(module: str) -> int:
    """The index in ``LAYERS`` of the entry naming ``module`` or the package holding it."""
    top = module.split(".")[1] if "." in module else ""
    for index, names in enumerate(LAYERS):
        if top in names:
            return index
    raise AssertionError(f"{module} is in no layer: add it to LAYERS")


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    groups.append(sorted(group))
    return groups


def upward() -> list[tuple[str, str]]:
    """The imports of a module from a higher layer than its own."""
    return sorted((a, b) for a, targets in graph().items() for b in targets if layer(b) > layer(a))


def _allowed_removed(edges: dict[str, set[str]]) -> dict[str, set[str]]:
    return {a: {b for b in targets if (a, b) not in ALLOWED} for a, targets in edges.items()}


def test_every_module_has_a_layer() -> None:
    for module in modules():
        layer(module)


def test_no_import_goes_up_a_layer() -> None:
    assert [edge for edge in upward() if edge not in ALLOWED] == []


def test_no_import_cycle() -> None:
    assert cycles(_allowed_removed(graph())) == []


def test_the_allowlist_only_names_imports_that_exist() -> None:
    edges = graph()
    assert [edge for edge in ALLOWED if edge[1] not in edges.get(edge[0], set())] == []


@pytest.mark.parametrize("module", ["spawnml.ir"])
def test_importing_the_ir_loads_only_what_it_needs(module: str) -> None:
    code = f"import sys, {module}; print(sorted(m for m in sys.modules if m.startswith('spawnml')))"
    done = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    assert eval(done.stdout) == [
        "spawnml",
        "spawnml.discovery",
        "spawnml.errors",
        "spawnml.ir",
        "spawnml.version",
    ]


if __name__ == "__main__":
    edges = graph()
    for group in cycles(edges):
        print(f"cycle of {len(group)}:", " ".join(group))
    for a, b in upward():
        print(f"up: {a} (layer {layer(a)}) -> {b} (layer {layer(b)})")
