"""/healthz (the process is alive) and /readyz (PostgreSQL and Redis answer), both without a token."""

from __future__ import annotations

import pytest
from django.db import OperationalError

from clinic.api import meta_views
from integrations.models import AuditLogEntry

pytestmark = pytest.mark.django_db


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


def test_readyz_reports_database_and_redis_ok(client):
    response = client.get("/readyz")

    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    assert response.json() == {"status": "ok", "checks": {"database": "ok", "redis": "ok"}}


def test_readyz_is_503_when_redis_does_not_answer(client, settings):
    settings.REDIS_URL = "redis://127.0.0.1:1/0"

    response = client.get("/readyz")

    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "unavailable"
    assert body["checks"]["database"] == "ok"
    assert body["checks"]["redis"].startswith("error: ")
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
        "checks": {"database": "error: OperationalError", "redis": "ok"},
    }


def test_readyz_without_redis_configured_is_ready_on_the_in_process_fallback(client, settings):
    settings.REDIS_URL = ""

    response = client.get("/readyz")

    assert response.status_code == 200
    assert response.json() == {
        "status": "ok",
        "checks": {"database": "ok", "redis": "not configured (in-process fallback)"},
    }


def test_health_checks_are_not_api_requests_and_leave_no_audit_row(client):
    client.get("/healthz")
    client.get("/readyz")

    assert AuditLogEntry.objects.count() == 0
