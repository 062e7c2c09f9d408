"""Endpoints without a token: liveness, readiness, and the pages the problem `type` URIs point at.

The probes are also answered by clinic.api.probes.ProbeMiddleware before anything reads the Host header:
a kubelet or balancer probing the pod's IP sends that IP as Host, which ALLOWED_HOSTS rightly refuses (400).
"""

from __future__ import annotations

import redis
from django.conf import settings
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.http import HttpRequest, JsonResponse

from clinic import field_encryption, heartbeat
from clinic.api.errors import PROBLEM_KINDS, problem_response
from clinic.drain import draining

# Once every migration of this code is applied it stays so for the life of the process.
_migrations_applied = False


def healthz(request: HttpRequest) -> JsonResponse:
    """The process is alive and serving requests; checks nothing else."""
    return JsonResponse({"status": "ok"})


def migrations_pending() -> bool:
    """Whether a migration of this code is not applied yet (a pod of a new release before its migrate Job)."""
    global _migrations_applied
    if _migrations_applied:
        return False
    executor = MigrationExecutor(connection)
    pending = bool(executor.migration_plan(executor.loader.graph.leaf_nodes()))
    _migrations_applied = not pending
    return pending


def readyz(request: HttpRequest) -> JsonResponse:
    """Ready for traffic: not draining, PostgreSQL answers with every migration applied (docs/operations.md §1).

    Redis is checked and reported, and its absence makes the answer "degraded", not a failure: the API keeps
    serving without it (rate limits per process, the outboxes hold events and notifications), whereas failing
    readiness took every pod out of the balancer at once (a Redis outage became a whole outage).
    With Redis it also reports whether a Celery worker of the default queue (`worker`), one of the export
    queue (`export-worker`) and beat have a fresh heartbeat (clinic.heartbeat); a worker consuming both counts
    as both.
    A missing role fails readiness only when READYZ_REQUIRE_ROLES names it: by default a web pod stays in
    the load balancer while a worker is down (the API keeps serving and the outbox delivers once a worker is
    back), and the worker's own liveness command is what restarts it.
    """
    # Set by the gunicorn master on SIGTERM (clinic.gunicorn_config): 503 so the balancer stops sending
    # before the workers stop, while requests already sent are still answered.
    if draining():
        return JsonResponse({"status": "draining", "checks": {}}, status=503)
    checks: dict[str, str] = {}
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        checks["database"] = "ok"
        checks["migrations"] = "error: not applied (run the migrate role)" if migrations_pending() else "ok"
        if checks["migrations"] == "ok":
            # A key that cannot read the database must not serve (docs/backup-and-recovery.md section 7).
            checks["encryption"] = field_encryption.canary_status()
    except Exception as exc:  # noqa: BLE001 - any failure means not ready
        checks["database"] = f"error: {type(exc).__name__}"
    degraded = False
    if settings.REDIS_URL:
        broker = redis.Redis.from_url(settings.REDIS_URL, socket_timeout=1, socket_connect_timeout=1)
        try:
            broker.ping()
            checks["redis"] = "ok"
        except Exception as exc:  # noqa: BLE001
            checks["redis"] = f"degraded: {type(exc).__name__}"
            degraded = True
        else:
            checks.update(_roles(broker))
        finally:
            broker.close()
    else:
        checks["redis"] = "not configured (in-process fallback)"
    ready = all(not value.startswith("error") for value in checks.values())
    status = "unavailable" if not ready else "degraded" if degraded else "ok"
    return JsonResponse({"status": status, "checks": checks}, status=200 if ready else 503)


def _roles(broker: redis.Redis) -> dict[str, str]:
    """{"worker": ..., "export-worker": ..., "beat": ...}: "ok", or why not, an "error" only for a role
    READYZ_REQUIRE_ROLES names."""
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
