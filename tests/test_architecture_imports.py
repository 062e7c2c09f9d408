"""The import rules of the layering (docs/architecture.md), read from the source with ast, so that a module
breaking one fails here before anyone reviews it:

- an app imports another app's models, selectors, services, ports, errors, events, representations and
  locks, never its `api`, `pdf`, `tax`, `devdata`, `search` or `slots` modules (what several apps share is
  in clinic/lib/ or clinic/api/);
- a representations module imports no DRF nor drf-spectacular, neither itself nor through anything it
  imports from the project (clinic.api included): the domain core never depends on an interface.

Function-local imports count like the others: a cycle hidden inside a function is still a cycle."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
APPS = ("clinic", "patients", "appointments", "billing", "lab", "pharmacy", "emr", "integrations")
PRIVATE = {"api", "pdf", "tax", "devdata", "search", "slots"}
API_PACKAGES = ("rest_framework", "drf_spectacular")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {
    _module_name(path): path
    for app in APPS
    for path in sorted((ROOT / app).rglob("*.py"))
    if "migrations" not in path.parts and "__pycache__" not in path.parts
}


def imported(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """(line, dotted name) of every import in the tree; `from a import b` yields a.b, since b may be a module.
    A relative import yields its dots as written (the apps write none: test_the_apps_import_absolutely)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            base = "." * node.level + (node.module or "")
            yield node.lineno, base
            for alias in node.names:
                yield node.lineno, f"{base}.{alias.name}"


def sideways_imports(module: str, source: str) -> list[str]:
    """The imports of `module` that reach into another app's private modules."""
    app = module.split(".")[0]
    found: dict[tuple[int, str], str] = {}
    for line, name in imported(ast.parse(source)):
        parts = name.split(".")
        # clinic.api and clinic.lib are the shared plumbing every app builds on, not clinic's private parts.
        if parts[0] not in APPS or parts[0] in (app, "clinic") or len(parts) < 2 or parts[1] not in PRIVATE:
            continue
        # The data generators compose each other's, and the two commands that span every app call them all.
        if parts[1] == "devdata" and (".devdata" in module or module.startswith("clinic.management.commands.")):
            continue
        found.setdefault((line, ".".join(parts[:2])), f"{module}:{line} imports {'.'.join(parts[:2])}")
    return list(found.values())


def _project_imports(module: str) -> set[str]:
    """The project modules `module` imports (a `from a import b` counts as a.b when that is a module, else a)."""
    out = set()
    for _, name in imported(ast.parse(MODULES[module].read_text())):
        while name and name not in MODULES:
            name = name.rpartition(".")[0]
        if name and name != module:
            out.add(name)
    return out


def api_reach(module: str) -> list[str]:
    """The chain by which `module` comes to import DRF or drf-spectacular, [] when it does not."""
    parents: dict[str, str | None] = {module: None}
    queue = [module]
    while queue:
        current = queue.pop(0)
        for _, name in imported(ast.parse(MODULES[current].read_text())):
            if name.split(".")[0] in API_PACKAGES:
                chain = [name, current]
                while (step := parents[chain[-1]]) is not None:
                    chain.append(step)
                return chain[::-1]
        for name in sorted(_project_imports(current) - parents.keys()):
            parents[name] = current
            queue.append(name)
    return []


def test_the_apps_import_absolutely():
    # A relative import would name no app, and so slip past the check below.
    relative = [
        f"{module}:{line}"
        for module, path in MODULES.items()
        for line, name in imported(ast.parse(path.read_text()))
        if name.startswith(".")
    ]

    assert relative == []


def test_no_app_imports_another_apps_api_pdf_tax_devdata_search_or_slots_modules():
    found = [hit for module, path in MODULES.items() for hit in sideways_imports(module, path.read_text())]

    assert found == []


REPRESENTATIONS = sorted(module for module in MODULES if module.endswith(".representations"))


def test_every_domain_app_has_a_representations_module():
    assert {module.split(".")[0] for module in REPRESENTATIONS} >= {
        "clinic",
        "patients",
        "appointments",
        "billing",
        "lab",
        "pharmacy",
        "emr",
    }


@pytest.mark.parametrize("module", REPRESENTATIONS)
def test_a_representations_module_imports_no_drf_nor_drf_spectacular_even_indirectly(module):
    assert api_reach(module) == []


# The checks themselves, on sources made up for the purpose: each rule refuses what it is meant to refuse.


@pytest.mark.parametrize(
    "source",
    [
        "from patients.api.serializers import visible_patient",
        "from billing.pdf import PDF",
        "import billing.tax",
        "from patients import search",
        "def f():\n    from appointments.slots import free_cells",
        "from appointments.devdata.demo import seed_demo_schedule",
    ],
)
def test_an_import_of_another_apps_private_module_is_refused(source):
    assert len(sideways_imports("lab.services", source)) == 1


@pytest.mark.parametrize(
    "source",
    [
        "from patients.selectors import patient_visible_get",
        "from billing import services",
        "from clinic.api.serializers import visible",
        "from clinic.lib.pdf import PDF",
        "from lab.api.serializers import OrderInput",  # its own api
    ],
)
def test_an_import_of_a_public_or_shared_module_is_accepted(source):
    assert sideways_imports("lab.services", source) == []


def test_the_data_generators_may_compose_each_others():
    source = "from patients.devdata.scale import Patients"

    assert sideways_imports("billing.devdata.scale", source) == []
    assert sideways_imports("clinic.management.commands.seed_demo", source) == []
