"""With DEBUG off every line every role writes is one JSON object (docs/operations.md
section 10), the gunicorn access and error logs included, and a clean start and stop writes no error line
(gunicorn logged `[ERROR] Control server error` at every start on a read-only $HOME). The roles run as the
image runs them, through docker/entrypoint.sh (as .ci/production_roles does), against the test database and
a private Redis: migrate, web, worker, beat, hl7-listener and dicom-worklist; each is stopped with SIGTERM."""

from __future__ import annotations

import base64
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.helpers import own_database_url

pytestmark = pytest.mark.django_db(transaction=True)
ROOT = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _listening(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _wait(what: str, check: Any, processes: dict[str, subprocess.Popen[bytes]], timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for name, process in processes.items():
            assert process.poll() is None, f"{name} exited with {process.returncode}"
        try:
            if check():
                return
        except requests.RequestException:
            pass
        time.sleep(0.3)
    raise AssertionError(f"{what}: not within {timeout:.0f} s")


def test_every_line_of_every_role_is_json_and_a_clean_start_logs_no_error(private_redis: Any) -> None:
    web_port, hl7_port, dicom_port = _free_port(), _free_port(), _free_port()
    env = {
        **{k: v for k, v in os.environ.items() if k in ("HOME", "LANG", "TMPDIR", "USER")},
        "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
        "ENV_FILE": os.devnull,  # the checkout's .env (DEBUG on) stays out; LOG_FORMAT and ACCESS_LOG_FORMAT unset
        "DEBUG": "false",
        "SECRET_KEY": secrets.token_urlsafe(50),
        "FIELD_ENCRYPTION_KEY": base64.urlsafe_b64encode(secrets.token_bytes(32)).decode(),
        "DATABASE_URL": own_database_url(),
        "REDIS_URL": private_redis.url,
        "ALLOWED_HOSTS": "127.0.0.1",
        "LOG_LEVEL": "INFO",
        "GUNICORN_BIND": f"127.0.0.1:{web_port}",
        "GUNICORN_WORKERS": "1",
        "GUNICORN_DRAIN_SECONDS": "0",
        "CELERY_CONCURRENCY": "1",
        "HL7_LISTENER_PORT": str(hl7_port),
        "DICOM_PORT": str(dicom_port),
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    if os.geteuid() == 0:
        # Celery warns about running as root (the image runs as uid 10001, so production never sees it).
        env["PYTHONWARNINGS"] = "ignore:You're running the worker with superuser privileges"
    with tempfile.TemporaryDirectory() as folder:
        logs = {
            role: Path(folder) / f"{role}.log"
            for role in ("migrate", "web", "worker", "beat", "hl7-listener", "dicom-worklist")
        }
        migrate = subprocess.run(  # noqa: S603 - the image's entrypoint with a fixed role
            [str(ROOT / "docker" / "entrypoint.sh"), "migrate"], cwd=ROOT, env=env, capture_output=True, timeout=300
        )
        logs["migrate"].write_bytes(migrate.stdout + migrate.stderr)
        assert migrate.returncode == 0, migrate.stderr[-2000:]
        processes: dict[str, subprocess.Popen[bytes]] = {}
        try:
            for role in ("web", "worker", "beat", "hl7-listener", "dicom-worklist"):
                with logs[role].open("wb") as output:
                    processes[role] = subprocess.Popen(  # noqa: S603
                        [str(ROOT / "docker" / "entrypoint.sh"), role],
                        cwd=ROOT,
                        # The web role's metrics of its own (the entrypoint creates the folder).
                        env=env | ({"PROMETHEUS_MULTIPROC_DIR": f"{folder}/metrics"} if role == "web" else {}),
                        stdout=output,
                        stderr=subprocess.STDOUT,
                        start_new_session=True,
                    )
            base = f"http://127.0.0.1:{web_port}"
            _wait("web /healthz", lambda: requests.get(f"{base}/healthz", timeout=2).status_code == 200, processes)
            _wait("hl7-listener", lambda: _listening(hl7_port), processes)
            _wait("dicom-worklist", lambda: _listening(dicom_port), processes)
            _wait("worker ready", lambda: " ready." in logs["worker"].read_text(), processes)
            _wait(
                "beat ticking",
                lambda: "Scheduler" in logs["beat"].read_text() or "beat" in logs["beat"].read_text(),
                processes,
                30,
            )
            assert requests.get(f"{base}/readyz", timeout=5).status_code == 200
            assert requests.get(f"{base}/api/v1/patients", params={"search": "Kavitha"}, timeout=5).status_code == 401
            assert requests.get(f"{base}/no-such-page", timeout=5).status_code == 404
        finally:
            for process in processes.values():
                process.send_signal(signal.SIGTERM)
            for name, process in processes.items():
                try:
                    process.wait(60)
                except subprocess.TimeoutExpired:
                    os.killpg(process.pid, signal.SIGKILL)
                    raise AssertionError(f"{name} did not stop within 60 s of SIGTERM") from None
        lines = {role: log.read_text().splitlines() for role, log in logs.items()}

    for role, role_lines in lines.items():
        assert role_lines, role
        for line in role_lines:
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                raise AssertionError(f"{role} wrote a line that is not JSON: {line!r}") from None
            assert isinstance(record, dict), (role, line)
            assert {"time", "level", "message"} <= set(record), (role, line)
            assert record["level"] not in ("ERROR", "CRITICAL"), (role, line)
            assert "Kavitha" not in line, (role, line)
    access = [json.loads(line) for line in lines["web"] if '"gunicorn.access"' in line]
    assert [a["status"] for a in access if a["status"] in (401, 404)] == [401, 404]
    assert not any("/" in a["route"] for a in access)  # a route name or "-", never a path
    gunicorn = [json.loads(line)["message"] for line in lines["web"] if '"gunicorn.error"' in line]
    assert any(message.startswith("Booting worker with pid") for message in gunicorn)
    messages = {role: [json.loads(line)["message"] for line in role_lines] for role, role_lines in lines.items()}
    assert "migrations applied: 0" in messages["migrate"]
    assert "worker: Warm shutdown (MainProcess)" in messages["worker"]
    assert f"DICOM worklist CLINIC_MWL listening on 0.0.0.0:{dicom_port}" in messages["dicom-worklist"]
