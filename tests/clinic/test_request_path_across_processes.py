"""What the request path promises across processes (issue 21), on a real gunicorn with two workers:

- a revoked token, a deactivated client and a narrowed branch list hold on the very next request on every
  worker (each warmed with requests of the token first; the change made by this test process through the
  API and the services, never through the workers);
- the audit row of a request is committed before its response leaves: none is lost when every worker is
  SIGKILLed right after answering."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from django.test import Client

from integrations.clients.services import api_client_set_active
from integrations.models import ApiClient, AuditLogEntry
from tests.factories import BranchFactory
from tests.worker import _test_database_url

pytestmark = pytest.mark.django_db(transaction=True)
ROOT = Path(__file__).resolve().parents[2]
# Enough requests that both workers have answered with the token (the kernel spreads the connections).
WARM_REQUESTS = 12


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def gunicorn(django_db_setup: Any, django_db_blocker: Any) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    with django_db_blocker.unblock():
        env = {**os.environ, "DATABASE_URL": _test_database_url(), "DEBUG": "false", "ALLOWED_HOSTS": "127.0.0.1"}
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    command = [sys.executable, "-m", "gunicorn", "clinic.wsgi:application", "--config", "python:clinic.gunicorn_config"]
    command += ["--bind", f"127.0.0.1:{port}", "--workers", "2", "--threads", "1", "--log-level", "warning"]
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)  # noqa: S603
    try:
        deadline = time.monotonic() + 60
        while True:
            assert process.poll() is None, process.stderr.read() if process.stderr else ""
            try:
                if requests.get(f"{base}/healthz", timeout=5).status_code == 200:
                    break
            except (requests.ConnectionError, requests.Timeout):
                assert time.monotonic() < deadline, "gunicorn did not start"
                time.sleep(0.2)
        yield base, process
    finally:
        process.terminate()
        process.wait(30)


def _serving(base: str) -> None:
    deadline = time.monotonic() + 60
    while True:
        try:
            if requests.get(f"{base}/healthz", timeout=5).status_code == 200:
                return
        except (requests.ConnectionError, requests.Timeout):
            pass
        assert time.monotonic() < deadline, "gunicorn did not come back"
        time.sleep(0.2)


@pytest.fixture
def server(gunicorn: tuple[str, subprocess.Popen[bytes]]) -> str:
    _serving(gunicorn[0])  # workers a test killed have been replaced
    return gunicorn[0]


def _workers(master: int) -> list[int]:
    children = Path(f"/proc/{master}/task/{master}/children").read_text().split()
    return [int(pid) for pid in children]


def _get(base: str, path: str, token: str) -> requests.Response:
    # A new connection per request, so both workers answer over the warm-up.
    return requests.get(
        f"{base}{path}", headers={"Authorization": f"Bearer {token}", "Connection": "close"}, timeout=30
    )


def _warm(base: str, token: str) -> list[Any]:
    bodies = []
    for _ in range(WARM_REQUESTS):
        response = _get(base, "/api/v1/branches", token)
        assert response.status_code == 200, response.content
        bodies.append(response.json())
    return bodies


def test_a_token_revoked_in_another_process_fails_on_the_very_next_request(
    server: str, client: Client, api_client_factory: Any, issue_token: Any
) -> None:
    api_client = api_client_factory(scopes=["appointments:read"])
    token = issue_token(api_client)
    _warm(server, token)

    revoked = client.post(
        "/api/v1/auth/revoke", {"token": token, "client_id": api_client.client_id, "client_secret": api_client.secret}
    )
    assert revoked.status_code == 200, revoked.content

    for _ in range(4):
        response = _get(server, "/api/v1/branches", token)
        assert response.status_code == 401
        assert response.json()["code"] == "invalid_token"
        assert 'error_description="The access token is invalid."' in response.headers["WWW-Authenticate"]


def test_a_client_deactivated_in_another_process_fails_on_the_very_next_request(
    server: str, api_client_factory: Any, issue_token: Any
) -> None:
    api_client = api_client_factory(scopes=["appointments:read"])
    token = issue_token(api_client)
    _warm(server, token)

    api_client_set_active(client=api_client, active=False)
    for _ in range(4):
        response = _get(server, "/api/v1/branches", token)
        assert (response.status_code, response.json()["code"]) == (401, "invalid_token")


def test_the_active_flag_alone_is_read_on_every_request(server: str, api_client_factory: Any, issue_token: Any) -> None:
    """The flag without the revocation that deactivation also does (as an UPDATE from elsewhere would leave
    it): the token stays, and works again once the client is active again."""
    api_client = api_client_factory(scopes=["appointments:read"])
    token = issue_token(api_client)
    _warm(server, token)

    ApiClient.objects.filter(pk=api_client.pk).update(is_active=False)
    for _ in range(4):
        response = _get(server, "/api/v1/branches", token)
        assert (response.status_code, response.json()["code"]) == (401, "invalid_token")

    ApiClient.objects.filter(pk=api_client.pk).update(is_active=True)
    assert _get(server, "/api/v1/branches", token).status_code == 200


def test_a_branch_restriction_changed_in_another_process_applies_on_the_very_next_request(
    server: str, api_client_factory: Any, issue_token: Any
) -> None:
    north, south = BranchFactory(code="NTH"), BranchFactory(code="STH")
    api_client = api_client_factory(scopes=["appointments:read"])
    token = issue_token(api_client)
    assert {tuple(b["code"] for b in body) for body in _warm(server, token)} == {("NTH", "STH")}

    api_client.branches.set([south])
    for _ in range(4):
        assert [b["code"] for b in _get(server, "/api/v1/branches", token).json()] == ["STH"]

    api_client.branches.set([north, south])
    assert [b["code"] for b in _get(server, "/api/v1/branches", token).json()] == ["NTH", "STH"]


def test_the_audit_row_survives_every_worker_killed_right_after_the_response(
    gunicorn: tuple[str, subprocess.Popen[bytes]], server: str, api_client_factory: Any, issue_token: Any
) -> None:
    token = issue_token(api_client_factory(scopes=["appointments:read"]))
    for n in range(3):
        request_id = f"sigkill-{n}-{time.time_ns()}"
        response = requests.get(
            f"{server}/api/v1/branches",
            headers={"Authorization": f"Bearer {token}", "X-Request-ID": request_id, "Connection": "close"},
            timeout=30,
        )
        assert response.status_code == 200
        for pid in _workers(gunicorn[1].pid):
            os.kill(pid, signal.SIGKILL)

        rows = list(AuditLogEntry.objects.filter(request_id=request_id).values_list("status", "route"))
        assert rows == [(200, "api/v1/branches")]
        _serving(server)
