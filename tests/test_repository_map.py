"""The README's repository map and the links to docs/ stay true to the tree (docs/architecture.md section 7).

Every app (a top-level package with an apps.py) and every integrations sub-package must have its line in the
README's "Repository map", and every link to a Markdown document in README.md or docs/*.md must name a file
that exists (and, with an #anchor, a heading that exists in it). Reads files only: no database.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"

# Packages Django itself asks for inside an app; they are part of integrations/, not sub-packages of their own.
_DJANGO_PACKAGES = frozenset({"management", "migrations"})

_LINK = re.compile(r"\]\(([^)\s]+)\)")  # [text](target)
_DOCS_MENTION = re.compile(r"(?<![\w./-])docs/([\w.-]+\.md)\b")  # docs/name.md in prose or a comment


def _apps() -> list[str]:
    return sorted(
        path.parent.name
        for path in ROOT.glob("*/apps.py")
        if not path.parent.name.startswith(".") and (path.parent / "__init__.py").exists()
    )


def _integration_packages() -> list[str]:
    return sorted(
        f"integrations/{path.parent.name}"
        for path in (ROOT / "integrations").glob("*/__init__.py")
        if path.parent.name not in _DJANGO_PACKAGES
    )


def _repository_map(text: str) -> str:
    match = re.search(r"^## Repository map\n(.*?)(?=^## )", text, flags=re.MULTILINE | re.DOTALL)
    assert match, 'README.md has no "## Repository map" section'
    return match.group(1)


def _map_entries(section: str) -> set[str]:
    """The paths in the first column of the map's table: `clinic/` -> clinic."""
    return {m.group(1) for m in re.finditer(r"^\| `([\w./-]+)/` \|", section, flags=re.MULTILINE)}


def _documents() -> list[Path]:
    return [README, *sorted(DOCS.glob("*.md"))]


def _slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    text = path.read_text(encoding="utf-8")
    text = re.sub(r"^```.*?^```", "", text, flags=re.MULTILINE | re.DOTALL)  # a "# comment" in a code block
    return {_slug(m.group(1)) for m in re.finditer(r"^#{1,6} (.+)$", text, flags=re.MULTILINE)}


def _broken_links(document: Path) -> list[str]:
    text = document.read_text(encoding="utf-8")
    broken = []
    for target in _LINK.findall(text):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto: ...
            continue
        path_part, _, anchor = target.partition("#")
        linked = (document.parent / path_part).resolve() if path_part else document
        if path_part and not path_part.endswith(".md"):
            continue  # a link to a source file or directory is not a document
        if not linked.is_file():
            broken.append(f"{target}: no such file")
        elif anchor and anchor not in _anchors(linked):
            broken.append(f"{target}: no heading with that anchor")
    for name in _DOCS_MENTION.findall(text):
        if not (DOCS / name).is_file():
            broken.append(f"docs/{name}: no such file")
    return broken


def test_the_tree_has_the_apps_and_integration_packages_the_map_is_checked_against():
    # Guards the two finders: a glob gone wrong would make the map tests pass vacuously.
    assert {"clinic", "patients", "appointments", "billing", "lab", "pharmacy", "emr", "integrations"} <= set(_apps())
    assert {"integrations/clients", "integrations/webhooks", "integrations/fhir"} <= set(_integration_packages())


@pytest.mark.parametrize("app", _apps())
def test_every_app_has_a_line_in_the_readme_repository_map(app):
    entries = _map_entries(_repository_map(README.read_text(encoding="utf-8")))
    assert app in entries, f"README.md's Repository map has no line for the app `{app}/`"


@pytest.mark.parametrize("package", _integration_packages())
def test_every_integrations_sub_package_has_a_line_in_the_readme_repository_map(package):
    entries = _map_entries(_repository_map(README.read_text(encoding="utf-8")))
    assert package in entries, f"README.md's Repository map has no line for `{package}/`"


def test_every_directory_the_repository_map_names_exists():
    entries = _map_entries(_repository_map(README.read_text(encoding="utf-8")))
    assert sorted(entry for entry in entries if not (ROOT / entry).is_dir()) == []


@pytest.mark.parametrize("document", _documents(), ids=lambda path: str(path.relative_to(ROOT)))
def test_every_link_to_a_document_points_at_an_existing_file_and_heading(document):
    assert _broken_links(document) == []


def test_no_document_points_outside_the_repository():
    outside = [
        f"{document.relative_to(ROOT)}: {target}"
        for document in _documents()
        for target in _LINK.findall(document.read_text(encoding="utf-8"))
        if not re.match(r"^[a-z][a-z0-9+.-]*:", target)
        and not (document.parent / target.partition("#")[0]).resolve().is_relative_to(ROOT)
    ]
    assert outside == []
    # The contract the service was first built from lives outside; its rules are docs/api-rules.md now.
    assert [d.name for d in _documents() if re.search(r"\.\./shared/|CONTRACT", d.read_text(encoding="utf-8"))] == []
