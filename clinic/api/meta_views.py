"""Endpoints without a token: liveness, readiness, and the pages the problem `type` URIs point at."""

from __future__ import annotations

import redis
from django.conf import settings
from django.db import connection
from django.http import HttpRequest, JsonResponse

from clinic import heartbeat
from clinic.api.errors import PROBLEM_KINDS, problem_response


def healthz(request: HttpRequest) -> JsonResponse:
    """The process is alive and serving requests; checks nothing else."""
    return JsonResponse({"status": "ok"})


def readyz(request: HttpRequest) -> JsonResponse:
    """Ready for traffic: PostgreSQL answers, and Redis answers when one is configured.

    With Redis it also reports whether any Celery worker and beat have a fresh heartbeat (clinic.heartbeat).
    A missing role fails readiness only when READYZ_REQUIRE_ROLES names it: by default a web pod stays in
    the load balancer while a worker is down (the API keeps serving and the outbox delivers once a worker is
    back), and the worker's own liveness command is what restarts it.
    """
    checks: dict[str, str] = {}
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        checks["database"] = "ok"
    except Exception as exc:  # noqa: BLE001 - any failure means not ready
        checks["database"] = f"error: {type(exc).__name__}"
    if settings.REDIS_URL:
        broker = redis.Redis.from_url(settings.REDIS_URL, socket_timeout=1, socket_connect_timeout=1)
        try:
            broker.ping()
            checks["redis"] = "ok"
        except Exception as exc:  # noqa: BLE001
            checks["redis"] = f"error: {type(exc).__name__}"
        else:
            checks.update(_roles(broker))
        finally:
            broker.close()
    else:
        checks["redis"] = "not configured (in-process fallback)"
    ready = all(not value.startswith("error") for value in checks.values())
    return JsonResponse({"status": "ok" if ready else "unavailable", "checks": checks}, status=200 if ready else 503)


def _roles(broker: redis.Redis) -> dict[str, str]:
    """{"worker": ..., "beat": ...}: "ok", or why not, an "error" only for a role READYZ_REQUIRE_ROLES names."""
    result: dict[str, str] = {}
    for role in heartbeat.ROLES:
        try:
            alive = bool(heartbeat.heartbeats_fresh(role=role, connection=broker))
        except Exception as exc:  # noqa: BLE001 - Redis answered the ping a moment ago; report, do not raise
            result[role] = f"error: {type(exc).__name__}"
            continue
        if alive:
            result[role] = "ok"
        else:
            severity = "error" if role in settings.READYZ_REQUIRE_ROLES else "missing"
            result[role] = f"{severity}: no heartbeat in the last {heartbeat.max_age_seconds()} s"
    return result


def problem_kind(request: HttpRequest, code: str) -> JsonResponse:
    kind = PROBLEM_KINDS.get(code)
    if kind is None:
        return problem_response(404, "not_found", f"No problem kind {code!r}.")  # type: ignore[return-value]
    return JsonResponse({"code": code, "status": kind.status, "title": kind.title, "description": kind.description})
