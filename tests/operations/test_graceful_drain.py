"""SIGTERM to the web role's gunicorn master (clinic/gunicorn_config.py): /readyz turns 503 "draining" at
once, requests keep being answered during the drain, a request in flight when the signal came finishes
with its 200, and the master exits cleanly. A real gunicorn on the test database; the request in flight is
held by a table lock the test takes on the access-token table, and releases when it chooses."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest
import requests
from oauth2_provider.models import get_access_token_model

from tests.helpers import stored_token
from tests.worker import _test_database_url

pytestmark = pytest.mark.django_db(transaction=True)
ROOT = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_until_serving(base: str, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert process.poll() is None, process.stderr.read() if process.stderr else ""
        try:
            if requests.get(f"{base}/readyz", timeout=5).status_code == 200:
                return
        except (requests.ConnectionError, requests.Timeout):
            time.sleep(0.2)
    raise AssertionError("gunicorn did not start")


def test_sigterm_drains_readiness_first_then_finishes_the_request_in_flight(api_client_factory: Any) -> None:
    token = stored_token(api_client_factory(scopes=["appointments:read"]))
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    env = {
        **os.environ,
        "DATABASE_URL": _test_database_url(),
        "DEBUG": "true",
        "ALLOWED_HOSTS": "127.0.0.1",
        "GUNICORN_DRAIN_SECONDS": "3",
        "PYTHONUNBUFFERED": "1",
    }
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    command = [sys.executable, "-m", "gunicorn", "clinic.wsgi:application", "--config", "python:clinic.gunicorn_config"]
    command += ["--bind", f"127.0.0.1:{port}", "--workers", "2", "--threads", "2"]
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)  # noqa: S603
    lock = psycopg.connect(_test_database_url(), autocommit=False)
    try:
        _wait_until_serving(base, process)
        assert requests.get(f"{base}/readyz", timeout=5).json()["status"] == "ok"
        lock.execute(f'LOCK TABLE "{get_access_token_model()._meta.db_table}" IN ACCESS EXCLUSIVE MODE')
        in_flight: dict[str, Any] = {}

        def call() -> None:
            in_flight["response"] = requests.get(
                f"{base}/api/v1/branches", headers={"Authorization": f"Bearer {token}"}, timeout=30
            )

        caller = threading.Thread(target=call)
        caller.start()
        time.sleep(1.0)  # the request is waiting on the lock inside a worker
        assert "response" not in in_flight

        signalled = time.monotonic()
        process.send_signal(signal.SIGTERM)
        readiness = None
        while time.monotonic() - signalled < 2:
            readiness = requests.get(f"{base}/readyz", timeout=2)
            if readiness.status_code == 503:
                break
            time.sleep(0.05)
        assert readiness is not None
        assert (readiness.status_code, readiness.json()) == (503, {"status": "draining", "checks": {}})
        assert requests.get(f"{base}/healthz", timeout=2).status_code == 200  # still served while draining

        lock.rollback()  # the request in flight goes on
        caller.join(timeout=30)
        assert in_flight["response"].status_code == 200
        assert in_flight["response"].json() == []
        assert process.wait(timeout=40) == 0
        assert time.monotonic() - signalled >= 3  # not before the drain
    finally:
        lock.close()
        if process.poll() is None:
            process.kill()
            process.wait()
