"""The FHIR R4 (4.0.1) models of `fhir.resources` 6.4.0, which every resource the server emits is checked
against (docs/api-rules.md §15).

6.4.0 is the last release that models 4.0.1 (later ones model R4B and R5), and it is written for pydantic 1.
This project runs pydantic 2 (openapi-python-client needs it), which still ships the pydantic 1 API as
`pydantic.v1`. So the `fhir.resources` modules are loaded by a finder of our own that rewrites their
`import pydantic...` statements to `pydantic.v1...` as it compiles them: no global alias of `pydantic` in
sys.modules (which would break pydantic 2 users in the same process), and the package's lazy imports of
resource modules (`get_fhir_model_class`) go through the same finder. The rewritten code is compiled from
source and never written to __pycache__, so a plain import elsewhere cannot pick up a stale variant.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import re
import sys
import threading
from collections.abc import Sequence
from types import ModuleType
from typing import Any

from django.conf import settings

_PACKAGE = "fhir.resources"
# `from pydantic import X`, `from pydantic.errors import Y`, `import pydantic` (never pydantic.v1 itself).
_IMPORT = re.compile(r"^(\s*)(from|import)\s+pydantic(?!\.v1\b)(?=[\s.])", re.MULTILINE)


class _PydanticV1Loader(importlib.machinery.SourceFileLoader):
    def source_to_code(self, data: Any, path: Any, *, _optimize: int = -1) -> Any:  # type: ignore[override]
        source = importlib.util.decode_source(data)
        return compile(_IMPORT.sub(r"\1\2 pydantic.v1", source), path, "exec", dont_inherit=True)

    def get_code(self, fullname: str) -> Any:
        path = self.get_filename(fullname)
        return self.source_to_code(self.get_data(path), path)


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None) -> Any:
        if fullname != _PACKAGE and not fullname.startswith(_PACKAGE + "."):
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or not isinstance(spec.loader, importlib.machinery.SourceFileLoader):
            return spec
        spec.loader = _PydanticV1Loader(fullname, spec.loader.path)
        return spec


_installed = threading.Lock()


def _install() -> None:
    with _installed:
        if not any(isinstance(finder, _Finder) for finder in sys.meta_path):
            sys.meta_path.insert(0, _Finder())


_install()

# Imported through importlib after the finder is in place (a plain import statement would have to sit
# below it, and would run before it under any reordering of the imports).
_package: Any = importlib.import_module(_PACKAGE)
FHIRAbstractModel: Any = _package.FHIRAbstractModel
construct_fhir_element: Any = _package.construct_fhir_element
FHIR_VERSION: str = _package.__fhir_version__

assert FHIR_VERSION == "4.0.1", FHIR_VERSION  # the models must be R4's exactly


def model_class(resource_type: str) -> Any:
    module = importlib.import_module(f"{_PACKAGE}.{resource_type.lower()}")
    return getattr(module, resource_type)


class ValueSetError(ValueError):
    """A code outside the required value set of its element."""


def validate(resource: dict[str, Any]) -> dict[str, Any]:
    """Check a resource we built against its R4 model (required elements, cardinality, primitive formats,
    reference targets) and the codes of required bindings (which the models list as `enum_values` but do
    not enforce); returns it unchanged, or raises pydantic.v1's ValidationError or ValueSetError."""
    _check_codes(construct_fhir_element(resource["resourceType"], resource), resource["resourceType"])
    return resource


def check(resource: dict[str, Any]) -> dict[str, Any]:
    """What the views emit goes through here: `validate` as much of it as FHIR_VALIDATE_OUTPUT asks for.
    `sample` checks a Bundle's own elements with the first entry of each resource type (a mapping that is
    wrong for a type is wrong for its first row too); a single resource is checked whole."""
    mode = settings.FHIR_VALIDATE_OUTPUT
    if mode == "off":
        return resource
    if mode == "sample" and resource.get("resourceType") == "Bundle" and resource.get("entry"):
        validate({**resource, "entry": _first_of_each_type(resource["entry"])})
        return resource
    return validate(resource)


def check_line(resource: dict[str, Any], index: int, *, every: int) -> dict[str, Any]:
    """An export line: every line under `all`, one in `every` (the first of each chunk) under `sample`."""
    mode = settings.FHIR_VALIDATE_OUTPUT
    if mode == "all" or (mode == "sample" and index % every == 0):
        validate(resource)
    return resource


def _first_of_each_type(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    seen: dict[str, dict[str, Any]] = {}
    for entry in entries:
        seen.setdefault(entry.get("resource", {}).get("resourceType", ""), entry)
    return list(seen.values())


# Required value sets the models list abridged, ending in "+" (the specification's "registered | partial |
# preliminary | final +" for a status of the same family): their full R4 codes.
ABRIDGED_STATUSES: dict[tuple[str, str], tuple[str, ...]] = {
    ("DiagnosticReport", "status"): (
        "registered",
        "partial",
        "preliminary",
        "final",
        "amended",
        "corrected",
        "appended",
        "cancelled",
        "entered-in-error",
        "unknown",
    ),
    ("Encounter", "status"): (
        "planned",
        "arrived",
        "triaged",
        "in-progress",
        "onleave",
        "finished",
        "cancelled",
        "entered-in-error",
        "unknown",
    ),
    ("Observation", "status"): (
        "registered",
        "preliminary",
        "final",
        "amended",
        "corrected",
        "cancelled",
        "entered-in-error",
        "unknown",
    ),
}  # fmt: skip  (the only three among the types we emit: tests/integrations/fhir/test_resources.py)


def _check_codes(model: Any, path: str) -> None:
    fields = model.__fields__
    # Only the elements the resource set: a model declares dozens, a resource of ours sets a few.
    for name in model.__fields_set__:
        field = fields[name]
        value = getattr(model, name, None)
        if value is None:
            continue
        codes = field.field_info.extra.get("enum_values")
        if codes and "mime" in codes:
            # CapabilityStatement.format: the generator wrote the value set's description ("xml | json | ttl
            # | a mime type") as if it were its codes; any mime type is allowed there.
            codes = None
        if codes and "+" in codes:
            codes = ABRIDGED_STATUSES[(type(model).__name__, field.alias)]
        for index, item in enumerate(value if isinstance(value, list) else [value]):
            where = f"{path}.{field.alias}" + (f"[{index}]" if isinstance(value, list) else "")
            if codes and isinstance(item, str) and item not in codes:
                raise ValueSetError(f"{where}: {item!r} is not one of {codes}")
            if isinstance(item, FHIRAbstractModel):
                _check_codes(item, where)
