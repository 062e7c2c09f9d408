"""The migrate role takes a PostgreSQL advisory lock (docs/operations.md section 1): two
`docker/entrypoint.sh migrate` processes started at once on a fresh database both exit 0 and every migration is
applied once, straight to PostgreSQL and through a real PgBouncer in transaction mode with the manifests'
settings (bench/fault_services.py reads them from deploy/kubernetes/base/pgbouncer.yaml). Without the lock
the second crashed on the first's half-made tables (issue 35)."""

from __future__ import annotations

import base64
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import psycopg
import pytest
from django.conf import settings

from tests.helpers import own_database_address

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
from fault_services import PgBouncer, free_port  # noqa: E402

if shutil.which("pgbouncer") is None and os.environ.get("REQUIRE_PGBOUNCER") != "1":
    pytest.skip("pgbouncer is not installed (REQUIRE_PGBOUNCER=1 makes this a failure)", allow_module_level=True)


@pytest.fixture
def fresh_database() -> Iterator[tuple[str, int, str]]:
    """(host, port, name) of a database created empty for the test on the tests' server, dropped after. The
    host is a directory when the server listens on a Unix socket (the quick start's embedded PostgreSQL)."""
    db = settings.DATABASES["default"]
    host, port = own_database_address()
    name = f"{db['TEST']['NAME']}_migrate_lock"
    admin = {"host": host, "port": port, "user": db["USER"], "password": db["PASSWORD"] or None, "dbname": "postgres"}
    with psycopg.connect(**admin, autocommit=True) as connection:
        connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        connection.execute(f'CREATE DATABASE "{name}"')
    yield host, port, name
    with psycopg.connect(**admin, autocommit=True) as connection:
        connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _url(host: str, port: int, name: str) -> str:
    db = settings.DATABASES["default"]
    credentials = quote(db["USER"] or "", safe="") + (":" + quote(db["PASSWORD"], safe="") if db["PASSWORD"] else "")
    if host.startswith("/"):
        return f"postgresql://{credentials}@/{name}?host={quote(host, safe='')}&port={port}"
    return f"postgresql://{credentials}@{host}:{port}/{name}"


def _role_env(database_url: str, transaction_pooling: bool) -> dict[str, str]:
    return {
        **{k: v for k, v in os.environ.items() if k in ("HOME", "LANG", "TMPDIR", "USER")},
        "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
        "ENV_FILE": os.devnull,
        "DEBUG": "false",
        "SECRET_KEY": secrets.token_urlsafe(50),
        "FIELD_ENCRYPTION_KEY": base64.urlsafe_b64encode(secrets.token_bytes(32)).decode(),
        "DATABASE_URL": database_url,
        "DATABASE_TRANSACTION_POOLING": "true" if transaction_pooling else "false",
        "REDIS_URL": "",
        "PYTHONDONTWRITEBYTECODE": "1",
    }


def _two_migrate_roles_at_once(database_url: str, transaction_pooling: bool) -> list[tuple[int, list[dict[str, Any]]]]:
    env = _role_env(database_url, transaction_pooling)
    processes = [
        subprocess.Popen(  # noqa: S603 - the image's entrypoint with a fixed role
            [str(ROOT / "docker" / "entrypoint.sh"), "migrate"],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for _ in range(2)
    ]
    results = []
    for process in processes:
        output, _ = process.communicate(timeout=600)
        # Every line the role writes is a JSON log line (DEBUG off): Django's progress lines are not printed.
        results.append((process.returncode, [json.loads(line) for line in output.splitlines() if line.strip()]))
    return results


def _check(results: list[tuple[int, list[dict[str, Any]]]], database_url: str) -> None:
    assert [code for code, _ in results] == [0, 0], results
    messages = [[line["message"] for line in lines] for _, lines in results]
    applied = sorted(
        int(next(m for m in ms if m.startswith("migrations applied: ")).rpartition(" ")[2]) for ms in messages
    )
    with psycopg.connect(database_url, prepare_threshold=None) as connection:
        rows = connection.execute("SELECT app, name, count(*) FROM django_migrations GROUP BY app, name").fetchall()
    assert applied == [0, len(rows)], messages  # one applied everything, the other waited and found nothing
    assert len(rows) > 50
    assert {count for _, _, count in rows} == {1}
    waited = [ms for ms in messages if any(m.startswith("another migrate holds the lock") for m in ms)]
    assert len(waited) == 1, messages
    assert not any("lost" in m for ms in messages for m in ms), messages


def test_two_migrate_roles_at_once_straight_to_postgresql(fresh_database: tuple[str, int, str]) -> None:
    url = _url(*fresh_database)

    results = _two_migrate_roles_at_once(url, transaction_pooling=False)

    _check(results, url)


def test_two_migrate_roles_at_once_through_pgbouncer_in_transaction_mode(fresh_database: tuple[str, int, str]) -> None:
    host, port, name = fresh_database
    if host not in ("127.0.0.1", "localhost"):
        # PgBouncer runs as the postgres user and reaches its upstream over TCP; the quick start's embedded
        # server listens on a socket in the checkout. `make test` (CI) runs this case on the machine's server.
        pytest.skip("the tests' PostgreSQL listens on a Unix socket only (the quick start's embedded one)")
    with tempfile.TemporaryDirectory() as folder:
        # idle_transaction_timeout well under the migrate's length (tens of seconds): the lock's transaction
        # survives it only by its keep-alive statements.
        bouncer = PgBouncer(Path(folder), free_port(57100, 57199), port, {"idle_transaction_timeout": "8"})
        bouncer.start()
        try:
            results = _two_migrate_roles_at_once(bouncer.url(name), transaction_pooling=True)
        finally:
            bouncer.stop()
        log, config = bouncer.log.read_text(), bouncer.config.read_text()
    _check(results, _url(host, port, name))
    assert "pool_mode = transaction" in config
    assert "idle transaction timeout" not in log, log[-2000:]
