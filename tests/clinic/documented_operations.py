"""The operations of the OpenAPI document (built in-process, as served) and the references each one's
request makes to branch-bound objects, read from the document itself."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Operation:
    operation_id: str
    method: str
    path: str
    document: Mapping[str, Any]  # the operation object

    def __str__(self) -> str:
        return f"{self.operation_id} ({self.method} {self.path})"


def openapi_document() -> dict[str, Any]:
    """The document as served (JSON-compatible), built in-process."""
    from drf_spectacular.generators import SchemaGenerator
    from drf_spectacular.renderers import OpenApiJsonRenderer

    rendered = OpenApiJsonRenderer().render(SchemaGenerator().get_schema(request=None, public=True))
    return json.loads(rendered)  # as an integrator's validator reads it: plain JSON numbers


DOCUMENT = openapi_document()

OPERATIONS: list[Operation] = sorted(
    (
        Operation(operation["operationId"], method.upper(), path, operation)
        for path, item in DOCUMENT["paths"].items()
        for method, operation in item.items()
    ),
    key=lambda op: op.operation_id,
)


def _entities() -> set[str]:
    """The resources the document has collections of (`/api/v1/patients` -> patient, `branches` -> branch)."""
    found = set()
    for path in DOCUMENT["paths"]:
        last = path.rstrip("/").rsplit("/", 1)[-1]
        if "{" not in last:
            found.add(re.sub(r"(?<=ch)es$|s$", "", last))
    return found


def _schema(node: Mapping[str, Any]) -> Mapping[str, Any]:
    while "$ref" in node:
        node = DOCUMENT["components"]["schemas"][node["$ref"].rsplit("/", 1)[-1]]
    return node


def references(operation: Operation) -> list[str]:
    """The names by which the operation's request names branch-bound objects: its path parameters, and the
    query parameters and top-level body members called `<entity>_id` for a resource of the document."""
    entities = _entities()

    def is_reference(name: str) -> bool:
        return name.endswith("_id") and name[: -len("_id")] in entities

    names = [p["name"] for p in operation.document.get("parameters", []) if p["in"] == "path"]
    names += [
        p["name"] for p in operation.document.get("parameters", []) if p["in"] == "query" and is_reference(p["name"])
    ]
    content = operation.document.get("requestBody", {}).get("content", {})
    for media in content.values():
        names += [name for name in _schema(media.get("schema", {})).get("properties", {}) if is_reference(name)]
    assert len(names) == len(set(names)), (operation, names)  # one name, one reference
    return sorted(set(names))
