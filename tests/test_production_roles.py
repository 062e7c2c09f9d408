"""requirements.txt alone runs every role (docs/operations.md §1).

The test venv has the development requirements too, which pull in distributions (packaging, among
others) that requirements.txt may not bring: plain `celery` let every test pass while the image's worker
and beat crashed at import (kombu's Redis transport imports packaging, which only the `redis` extra
declares). So "it imports here" proves nothing. These tests compute the dependency closure of
requirements.txt from the installed metadata (extras and markers included), hide every other installed
distribution from a fresh interpreter, and import there what the roles import: web (settings, URLconf,
WSGI, gunicorn), the worker (Celery app, tasks, the Redis transport, the prefork pool) and beat. An
optional import (DRF's pygments, Celery's psutil) may fail quietly there, as in production; a required one
fails the test. .ci/production_roles proves the same with a real venv and real processes.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import subprocess
import sys
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent

# Runs in a fresh interpreter: hides the top-level modules in argv[1] (JSON), then imports the roles.
IMPORT_THE_ROLES = """
import importlib, json, sys

HIDDEN = frozenset(json.loads(sys.argv[1]))


class NotInRequirements:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in HIDDEN:
            raise ModuleNotFoundError(f"No module named {name!r} (not brought by requirements.txt)", name=name)
        return None


sys.meta_path.insert(0, NotInRequirements())
import django
django.setup()
import django.urls
django.urls.get_resolver().url_patterns
from clinic.celery import app
app.loader.import_default_modules()
for name in ("kombu.transport.redis", "celery.apps.worker", "celery.apps.beat", "celery.worker.consumer",
             "celery.concurrency.prefork", "clinic.wsgi", "gunicorn.app.wsgiapp", "clinic.gunicorn_config",
             "clinic.heartbeat"):
    importlib.import_module(name)
print(json.dumps(sorted({module.partition(".")[0] for module in list(sys.modules)})))
"""


def requirements_closure(lines: list[str]) -> set[str]:
    """Every distribution installing these requirement lines brings (names canonicalized)."""
    pending = [Requirement(line) for line in lines]
    seen: set[tuple[str, frozenset[str]]] = set()
    names: set[str] = set()
    while pending:
        requirement = pending.pop()
        name = canonicalize_name(requirement.name)
        key = (name, frozenset(requirement.extras))
        if key in seen:
            continue
        seen.add(key)
        names.add(name)
        for declared in metadata.requires(name) or []:
            dependency = Requirement(declared)
            environments = [{"extra": extra} for extra in (*requirement.extras, "")]
            if dependency.marker is None or any(dependency.marker.evaluate(env) for env in environments):
                pending.append(dependency)
    return names


def requirement_lines(path: Path) -> list[str]:
    lines = (line.split("#", 1)[0].strip() for line in path.read_text().splitlines())
    return [line for line in lines if line and not line.startswith("-")]


def import_the_roles_with_only(closure: set[str]) -> subprocess.CompletedProcess[str]:
    """Import what the roles import in a fresh interpreter that sees only the distributions in `closure`."""
    owners = metadata.packages_distributions()
    hidden = sorted(
        module
        for module, dists in owners.items()
        if not any(canonicalize_name(dist) in closure for dist in dists) and module != "_distutils_hack"
    )
    env = {
        **os.environ,
        "ENV_FILE": os.devnull,
        "DEBUG": "false",
        "SECRET_KEY": secrets.token_urlsafe(50),
        "FIELD_ENCRYPTION_KEY": base64.urlsafe_b64encode(secrets.token_bytes(32)).decode(),
        "DJANGO_SETTINGS_MODULE": "clinic.settings",
    }
    return subprocess.run(  # noqa: S603 - our own interpreter and a fixed script
        [sys.executable, "-c", IMPORT_THE_ROLES, json.dumps(hidden)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_roles_import_with_only_what_requirements_txt_brings():
    closure = requirements_closure(requirement_lines(ROOT / "requirements.txt"))

    result = import_the_roles_with_only(closure)

    assert result.returncode == 0, result.stderr[-3000:]
    imported = json.loads(result.stdout.strip().splitlines()[-1])
    assert {"kombu", "redis", "packaging", "celery", "gunicorn", "django"} <= set(imported)


def test_plain_celery_would_leave_the_worker_without_packaging():
    """The check above catches the original bug: with plain `celery` nothing in requirements.txt brings
    packaging, and importing the Redis transport fails as it did in the image."""
    lines = requirement_lines(ROOT / "requirements.txt")
    plain = [line.replace("celery[redis]", "celery", 1) if line.startswith("celery[") else line for line in lines]
    assert [line for line in plain if line not in lines] == ["celery==5.7.0"]

    result = import_the_roles_with_only(requirements_closure(plain))

    assert result.returncode == 1
    assert "No module named 'packaging' (not brought by requirements.txt)" in result.stderr
