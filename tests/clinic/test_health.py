"""/healthz (the process is alive) and /readyz (PostgreSQL and Redis answer, and whether a Celery worker of the
default queue, one of the export queue and beat have a fresh heartbeat, each reported on its own), both
without a token."""

from __future__ import annotations

import time

import pytest
from django.db import OperationalError

from clinic import heartbeat
from clinic.api import meta_views
from clinic.drain import DRAIN_FILE_VARIABLE
from integrations.models import AuditLogEntry
from tests.worker import worker_process  # noqa: F401 - fixture

pytestmark = pytest.mark.django_db

NO_WORKER = "missing: no heartbeat in the last 30 s"


@pytest.fixture(autouse=True)
def no_heartbeats():
    """Heartbeats left by another test's killed worker must not make a role look alive here."""
    connection = heartbeat.redis_connection()
    connection.delete(*(heartbeat.heartbeat_key(role) for role in heartbeat.ROLES))
    yield
    connection.delete(*(heartbeat.heartbeat_key(role) for role in heartbeat.ROLES))


def test_healthz_is_ok_without_a_token(client):
    response = client.get("/healthz")

    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    assert response.json() == {"status": "ok"}
    assert response.has_header("X-Request-ID")


def test_healthz_ignores_a_bad_token(client):
    response = client.get("/healthz", HTTP_AUTHORIZATION="Bearer not-a-token")

    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


def test_readyz_reports_database_and_redis_ok_and_no_worker_without_failing(client):
    """By default a missing worker or beat is reported, not fatal: a web pod must not leave the load
    balancer because a worker is down (the worker's liveness command restarts it)."""
    response = client.get("/readyz")

    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    assert response.json() == {
        "status": "ok",
        "checks": {
            "database": "ok",
            "migrations": "ok",
            "encryption": "ok",
            "redis": "ok",
            "worker": NO_WORKER,
            "export-worker": NO_WORKER,
            "beat": NO_WORKER,
        },
    }


def test_readyz_is_503_without_a_worker_when_the_worker_is_required(client, settings):
    settings.READYZ_REQUIRE_ROLES = ["worker"]

    response = client.get("/readyz")

    assert response.status_code == 503
    assert response.json() == {
        "status": "unavailable",
        "checks": {
            "database": "ok",
            "migrations": "ok",
            "encryption": "ok",
            "redis": "ok",
            "worker": "error: no heartbeat in the last 30 s",
            "export-worker": NO_WORKER,
            "beat": NO_WORKER,
        },
    }


def test_readyz_with_only_an_export_worker_reports_the_default_worker_missing(client, settings):
    """A worker of the export queue alone keeps the export-worker heartbeat, not the worker one: webhooks,
    notifications and HL7 sends have no worker, and /readyz says so."""
    heartbeat.heartbeat_record(role="export-worker", node="fhir-export@export-worker-0")

    response = client.get("/readyz")

    assert response.status_code == 200
    assert response.json() == {
        "status": "ok",
        "checks": {
            "database": "ok",
            "migrations": "ok",
            "encryption": "ok",
            "redis": "ok",
            "worker": NO_WORKER,
            "export-worker": "ok",
            "beat": NO_WORKER,
        },
    }

    settings.READYZ_REQUIRE_ROLES = ["worker"]

    response = client.get("/readyz")

    assert response.status_code == 503
    assert response.json() == {
        "status": "unavailable",
        "checks": {
            "database": "ok",
            "migrations": "ok",
            "encryption": "ok",
            "redis": "ok",
            "worker": "error: no heartbeat in the last 30 s",
            "export-worker": "ok",
            "beat": NO_WORKER,
        },
    }


def test_readyz_with_only_a_default_worker_reports_the_export_worker_missing(client, settings):
    settings.READYZ_REQUIRE_ROLES = ["export-worker"]
    heartbeat.heartbeat_record(role="worker", node="celery@worker-0")

    response = client.get("/readyz")

    assert response.status_code == 503
    assert response.json() == {
        "status": "unavailable",
        "checks": {
            "database": "ok",
            "migrations": "ok",
            "encryption": "ok",
            "redis": "ok",
            "worker": "ok",
            "export-worker": "error: no heartbeat in the last 30 s",
            "beat": NO_WORKER,
        },
    }

    heartbeat.heartbeat_record(role="export-worker", node="fhir-export@export-worker-0")

    response = client.get("/readyz")

    assert response.status_code == 200
    assert response.json()["checks"] == {
        "database": "ok",
        "migrations": "ok",
        "encryption": "ok",
        "redis": "ok",
        "worker": "ok",
        "export-worker": "ok",
        "beat": NO_WORKER,
    }


@pytest.mark.parametrize(
    ("queues", "roles"),
    [
        (["celery"], ("worker",)),
        (["fhir-export"], ("export-worker",)),
        (["celery", "fhir-export"], ("worker", "export-worker")),  # make run: one worker for both
        (["test.123.abc"], ("worker",)),
    ],
)
def test_a_worker_keeps_the_heartbeat_of_the_queues_it_consumes(queues, roles):
    assert heartbeat.worker_roles(queues) == roles


def test_readyz_counts_only_fresh_heartbeats(client, settings):
    settings.READYZ_REQUIRE_ROLES = ["worker", "beat"]
    connection = heartbeat.redis_connection()
    connection.zadd(heartbeat.heartbeat_key("worker"), {"celery@gone": time.time() - 31})
    heartbeat.heartbeat_record(role="beat", node="1@somewhere")

    response = client.get("/readyz")

    assert response.status_code == 503
    assert response.json()["checks"] == {
        "database": "ok",
        "migrations": "ok",
        "encryption": "ok",
        "redis": "ok",
        "worker": "error: no heartbeat in the last 30 s",
        "export-worker": NO_WORKER,
        "beat": "ok",
    }

    heartbeat.heartbeat_record(role="worker", node="celery@gone")

    response = client.get("/readyz")

    assert response.status_code == 200
    assert response.json() == {
        "status": "ok",
        "checks": {
            "database": "ok",
            "migrations": "ok",
            "encryption": "ok",
            "redis": "ok",
            "worker": "ok",
            "export-worker": NO_WORKER,
            "beat": "ok",
        },
    }


def test_readyz_sees_a_real_worker_and_beat_come_and_go(client, settings, worker_process):  # noqa: F811
    settings.READYZ_REQUIRE_ROLES = ["worker", "beat"]
    worker = worker_process(beat=True)
    deadline = time.monotonic() + 20  # embedded beat starts a moment after the worker is ready
    while client.get("/readyz").status_code != 200 and time.monotonic() < deadline:
        time.sleep(0.2)

    response = client.get("/readyz")

    assert response.status_code == 200
    assert response.json()["checks"] == {
        "database": "ok",
        "migrations": "ok",
        "encryption": "ok",
        "redis": "ok",
        "worker": "ok",
        "export-worker": NO_WORKER,  # a worker of the test's own queue is a default-queue worker
        "beat": "ok",
    }

    worker.stop()  # a clean stop removes both heartbeats at once

    response = client.get("/readyz")

    assert response.status_code == 503
    assert response.json()["checks"] == {
        "database": "ok",
        "migrations": "ok",
        "encryption": "ok",
        "redis": "ok",
        "worker": "error: no heartbeat in the last 30 s",
        "export-worker": NO_WORKER,
        "beat": "error: no heartbeat in the last 30 s",
    }


def test_readyz_stays_ready_but_degraded_when_redis_does_not_answer(client, settings):
    # Failing it took every pod out of the balancer at once while the API could serve (docs/operations.md §1).
    settings.REDIS_URL = "redis://127.0.0.1:1/0"

    response = client.get("/readyz")

    assert response.status_code == 200
    assert response.json() == {
        "status": "degraded",
        "checks": {"database": "ok", "migrations": "ok", "encryption": "ok", "redis": "degraded: ConnectionError"},
    }
    assert "127.0.0.1" not in response.content.decode()


class _DatabaseDown:
    def cursor(self):
        raise OperationalError("connection refused")


def test_readyz_is_503_when_the_database_does_not_answer(client, monkeypatch):
    monkeypatch.setattr(meta_views, "connection", _DatabaseDown())

    response = client.get("/readyz")

    assert response.status_code == 503
    assert response.json() == {
        "status": "unavailable",
        "checks": {
            "database": "error: OperationalError",
            "redis": "ok",
            "worker": NO_WORKER,
            "export-worker": NO_WORKER,
            "beat": NO_WORKER,
        },
    }


def test_readyz_without_redis_configured_is_ready_on_the_in_process_fallback(client, settings):
    settings.REDIS_URL = ""

    response = client.get("/readyz")

    assert response.status_code == 200
    assert response.json() == {
        "status": "ok",
        "checks": {
            "database": "ok",
            "migrations": "ok",
            "encryption": "ok",
            "redis": "not configured (in-process fallback)",
        },
    }


def test_health_checks_are_not_api_requests_and_leave_no_audit_row(client):
    client.get("/healthz")
    client.get("/readyz")

    assert AuditLogEntry.objects.count() == 0


@pytest.mark.parametrize("path", ["/healthz", "/readyz"])
def test_probes_answer_a_host_outside_allowed_hosts_such_as_the_pod_ip(client, settings, path):
    settings.ALLOWED_HOSTS = ["clinic.example.com"]
    assert client.get("/api/v1/branches", HTTP_HOST="10.42.3.17:8000").status_code == 400  # the rest: refused

    response = client.get(path, HTTP_HOST="10.42.3.17:8000")

    assert response.status_code == 200
    assert response.json()["status"] == "ok"


def test_readyz_is_503_while_a_migration_of_this_code_is_not_applied(client, monkeypatch):
    from django.db.migrations.recorder import MigrationRecorder

    monkeypatch.setattr(meta_views, "_migrations_applied", False)
    latest = MigrationRecorder.Migration.objects.filter(app="integrations").order_by("-name").first()
    latest.delete()  # rolled back with the test

    response = client.get("/readyz")

    assert response.status_code == 503
    assert response.json()["status"] == "unavailable"
    assert response.json()["checks"]["migrations"] == "error: not applied (run the migrate role)"


def test_readyz_is_503_draining_while_the_gunicorn_master_drains(client, monkeypatch, tmp_path):
    marker = tmp_path / "drain"
    monkeypatch.setenv(DRAIN_FILE_VARIABLE, str(marker))
    assert client.get("/readyz").status_code == 200
    marker.touch()

    response = client.get("/readyz")

    assert response.status_code == 503
    assert response.json() == {"status": "draining", "checks": {}}
    assert client.get("/healthz").status_code == 200  # alive: not to be restarted while it drains
