"""Behind a real PgBouncer in transaction mode (docs/operations.md §5 and §7): a PgBouncer restart under a write leaves no
idempotency reservation behind (the retry with the same key is executed, not refused with 409 for two
minutes as before), and PgBouncer's own errors (`query_wait_timeout`) are 503 with Retry-After.

The test starts its own PgBouncer (the `pgbouncer` binary of the Debian package) in front of the test
database; it is skipped where there is none. The fault suite (bench/faults.py) covers the deployment.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from django.db import connection
from django.test import Client

from clinic.models import Department
from integrations.models import IdempotencyRecord
from tests import plumbing_urls
from tests.helpers import assert_problem, bearer, own_database_address
from tests.operations.test_database_resource_errors import server_owner

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.urls("tests.plumbing_urls")]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class PgBouncer:
    def __init__(self, directory: Path, port: int, binary: str, owner: tuple[int, int] | None) -> None:
        self.directory, self.port, self.binary, self.owner = directory, port, binary, owner
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.process = subprocess.Popen(  # noqa: S603 - our own binary and file
            [self.binary, str(self.directory / "pgbouncer.ini")],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            user=self.owner[0] if self.owner else None,
            group=self.owner[1] if self.owner else None,
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("PgBouncer did not start")

    def stop(self) -> None:
        if self.process is not None:
            self.process.send_signal(signal.SIGTERM)  # a fast shutdown: every connection dropped
            self.process.wait(10)
            self.process = None

    def restart(self) -> None:
        self.stop()
        self.start()


@pytest.fixture
def pgbouncer() -> Iterator[PgBouncer]:
    """PgBouncer in transaction mode in front of the test database; Django's connection goes through it,
    configured as DATABASE_TRANSACTION_POOLING configures it. Restored afterwards."""
    binary = shutil.which("pgbouncer") or ("/usr/sbin/pgbouncer" if Path("/usr/sbin/pgbouncer").exists() else None)
    if binary is None:
        pytest.skip("no pgbouncer binary (the Debian package pgbouncer)")
    settings_dict = connection.settings_dict
    host, port = own_database_address()
    user = settings_dict["USER"] or "postgres"
    owner = None
    if os.geteuid() == 0:  # PgBouncer refuses to run as root: as PostgreSQL's own user
        owner = server_owner()
        if owner is None:
            pytest.skip("running as root, and no local PostgreSQL user to run PgBouncer as")
    # Not pytest's tmp_path: its parents are private to the user running the tests.
    tmp_path = Path(tempfile.mkdtemp(prefix="pgbouncer-test-"))
    if owner:
        os.chown(tmp_path, *owner)
    bouncer_port = _free_port()
    (tmp_path / "users.txt").write_text(f'"{user}" "{settings_dict["PASSWORD"] or ""}"\n')
    password = f" password={settings_dict['PASSWORD']}" if settings_dict["PASSWORD"] else ""
    (tmp_path / "pgbouncer.ini").write_text(
        "[databases]\n"
        f"{settings_dict['NAME']} = host={host} port={port} dbname={settings_dict['NAME']} user={user}{password}\n"
        "[pgbouncer]\n"
        f"listen_addr = 127.0.0.1\nlisten_port = {bouncer_port}\nunix_socket_dir =\n"
        f"auth_type = trust\nauth_file = {tmp_path / 'users.txt'}\n"
        "pool_mode = transaction\ndefault_pool_size = 2\nmax_client_conn = 20\n"
        "query_wait_timeout = 2\nserver_login_retry = 1\n"
    )
    if owner:
        for path in tmp_path.iterdir():
            os.chown(path, *owner)
    bouncer = PgBouncer(tmp_path, bouncer_port, binary, owner)
    bouncer.start()
    original = (settings_dict["HOST"], settings_dict["PORT"], dict(settings_dict["OPTIONS"]))
    original_cursors = settings_dict.get("DISABLE_SERVER_SIDE_CURSORS", False)
    connection.close()
    settings_dict["HOST"], settings_dict["PORT"] = "127.0.0.1", str(bouncer_port)
    settings_dict["OPTIONS"].pop("host", None)
    settings_dict["OPTIONS"].pop("port", None)
    settings_dict["OPTIONS"]["prepare_threshold"] = None
    settings_dict["DISABLE_SERVER_SIDE_CURSORS"] = True
    try:
        yield bouncer
    finally:
        connection.close()
        settings_dict["HOST"], settings_dict["PORT"] = original[0], original[1]
        settings_dict["OPTIONS"].clear()
        settings_dict["OPTIONS"].update(original[2])
        settings_dict["DISABLE_SERVER_SIDE_CURSORS"] = original_cursors
        bouncer.stop()
        shutil.rmtree(tmp_path, ignore_errors=True)


@pytest.fixture
def gate() -> Iterator[tuple[threading.Event, threading.Event]]:
    with plumbing_urls.held_in_handler() as held:
        yield held


def post(client: Client, token: str, key: str) -> Any:
    return client.post(
        "/api/v1/test/departments",
        json.dumps({"name": "Cardiology"}),
        content_type="application/json",
        HTTP_IDEMPOTENCY_KEY=key,
        **bearer(token),
    )


def test_a_pgbouncer_restart_under_a_write_leaves_no_reservation_and_the_retry_is_executed(
    pgbouncer: PgBouncer, gate: Any, api_client_factory: Any, issue_token: Any
) -> None:
    token = issue_token(api_client_factory(scopes=["appointments:write"]))
    entered, release = gate
    results: dict[str, Any] = {}

    def first() -> None:
        try:
            results["first"] = post(Client(), token, "pgb-1")
        finally:
            connection.close()

    thread = threading.Thread(target=first)
    thread.start()
    assert entered.wait(10), "the request never reached its handler"
    pgbouncer.stop()  # the request's transaction (its reservation included) is gone with the connection
    release.set()
    thread.join(20)
    pgbouncer.start()  # back after the request has ended: nothing could be cleaned up meanwhile

    assert_problem(results["first"], 503, "service_unavailable")
    assert results["first"]["Retry-After"] == "5"
    connection.close()  # what Django does at the end of a request whose connection broke
    retry = post(Client(), token, "pgb-1")
    assert retry.status_code == 201, retry.content
    assert not retry.has_header("Idempotent-Replayed")
    assert Department.objects.count() == 1
    assert IdempotencyRecord.objects.get().state == IdempotencyRecord.State.COMPLETED


def test_pgbouncer_query_wait_timeout_is_503_with_retry_after(
    pgbouncer: PgBouncer, api_client_factory: Any, issue_token: Any
) -> None:
    token = issue_token(api_client_factory(scopes=["appointments:read"]))
    connection.close()
    # Both server connections of the pool held by transactions that do not end: the next query queues in
    # PgBouncer until query_wait_timeout (2 s), which PgBouncer reports as 08P01.
    url = f"postgresql://{connection.settings_dict['USER'] or 'postgres'}@127.0.0.1:{pgbouncer.port}/"
    holders = [psycopg.connect(url + connection.settings_dict["NAME"]) for _ in range(2)]
    try:
        for holder in holders:
            holder.execute("SELECT 1")  # BEGIN (psycopg's default) and a statement: the server is assigned
        refused = Client().get("/api/v1/branches", **bearer(token))
    finally:
        for holder in holders:
            holder.close()

    assert_problem(refused, 503, "service_unavailable")
    assert refused["Retry-After"] == "5"
    connection.close()
    assert Client().get("/api/v1/branches", **bearer(token)).status_code == 200
