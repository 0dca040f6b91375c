"""The operator registry: every schema of every operator set, selected by opset version."""

from __future__ import annotations

import bisect
from collections.abc import Iterable

from ..errors import PluginError
from ..ir import Graph
from .schema import OpSchema


def _canonical(domain: str) -> str:
    return "" if domain == "ai.onnx" else domain


class OperatorRegistry:
    """Holds the schemas that plugins register, by ``(domain, name)`` and version."""

    def __init__(self, schemas: Iterable[OpSchema] = ()) -> None:
        self._versions: dict[tuple[str, str], list[OpSchema]] = {}
        #: What :meth:`lookup` found, by its arguments (a session asks thousands of times).
        self._found: dict[tuple[str, str, int], OpSchema | None] = {}
        for schema in schemas:
            self.register(schema)

    def register(self, schema: OpSchema) -> None:
        key = (_canonical(schema.domain), schema.name)
        versions = self._versions.setdefault(key, [])
        if any(existing.since_version == schema.since_version for existing in versions):
            raise PluginError(
                f"operator {schema.qualified_name} version {schema.since_version} is registered twice"
            )
        bisect.insort(versions, schema, key=lambda s: s.since_version)
        self._found.clear()

    def lookup(self, domain: str, name: str, opset: int) -> OpSchema | None:
        """The schema in force at ``opset``: the newest version not newer than it."""
        key = (domain, name, opset)
        if key in self._found:
            return self._found[key]
        versions = self._versions.get((_canonical(domain), name), [])
        index = bisect.bisect_right(versions, opset, key=lambda s: s.since_version)
        found = self._found[key] = versions[index - 1] if index else None
        return found

    def validate(self, graph: Graph) -> None:
        """Refuse nodes whose arity or attributes contradict their schema, subgraphs included.

        Runs at load, before any pass reads the nodes; operators without a schema are left
        to the planner, which lists them all at once.
        """
        for node, _ in graph.walk():
            schema = self.lookup(node.domain, node.op_type, graph.opset(node.domain))
            if schema is not None:
                schema.check_arity(node)
                schema.resolve_attrs(node)

    def versions(self, domain: str, name: str) -> list[OpSchema]:
        return list(self._versions.get((_canonical(domain), name), []))

    def operators(self) -> list[tuple[str, str]]:
        """Every known ``(domain, name)``, sorted."""
        return sorted(self._versions)

    def __contains__(self, key: tuple[str, str]) -> bool:
        return (_canonical(key[0]), key[1]) in self._versions

    def __len__(self) -> int:
        return len(self._versions)
