"""GET /metrics: Prometheus text format, not public (docs/operations.md §1).

Protection: a bearer token, METRICS_TOKEN, compared in constant time; with no token configured /metrics
does not exist (404), so a deployment never exposes it by forgetting a setting. Like the probes it answers
any Host (Prometheus scrapes the pod IP), through clinic.api.probes.ProbeMiddleware.

Counters come from every gunicorn worker of the pod when PROMETHEUS_MULTIPROC_DIR is set (the web role
sets it); the outbox backlog is read from PostgreSQL at scrape time, so every pod reports the same figure
(aggregate with max(), not sum()).
"""

from __future__ import annotations

import hmac
import os
from collections.abc import Iterator

import redis
from django.conf import settings
from django.db import DatabaseError, connection
from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, generate_latest, multiprocess
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from clinic.task_metrics import task_metrics_read
from clinic.worker_counters import COUNTERS, counters_read
from integrations.selectors import outbox_backlogs


class OutboxCollector(Collector):
    def collect(self) -> Iterator[GaugeMetricFamily]:
        messages = GaugeMetricFamily(
            "clinic_outbox_backlog_messages", "Outbox messages written and not yet finished.", labels=["kind"]
        )
        age = GaugeMetricFamily(
            "clinic_outbox_backlog_age_seconds",
            "Age of the oldest unfinished outbox message (0 when there is none).",
            labels=["kind"],
        )
        try:
            backlogs = outbox_backlogs()
        except DatabaseError:
            return  # the database is down: the scrape still carries the counters
        now = timezone.now()
        for kind, backlog in backlogs.items():
            messages.add_metric([kind], backlog.messages)
            age.add_metric([kind], (now - backlog.oldest).total_seconds() if backlog.oldest else 0.0)
        yield messages
        yield age


class TaskCollector(Collector):
    """Celery task counts by final state and run time, per task, from the hash workers add to (clinic.task_metrics)."""

    def collect(self) -> Iterator[CounterMetricFamily]:
        try:
            counts, seconds = task_metrics_read()
        except redis.RedisError:
            return
        total = CounterMetricFamily(
            "clinic_celery_tasks", "Celery tasks finished, by task and final state.", labels=["task", "state"]
        )
        for (task, state), count in sorted(counts.items()):
            total.add_metric([task, state], count)
        spent = CounterMetricFamily("clinic_celery_task_seconds", "Celery task run time, by task.", labels=["task"])
        for task, value in sorted(seconds.items()):
            spent.add_metric([task], value)
        yield total
        yield spent


class WorkerCountersCollector(Collector):
    """The counters workers increment in Redis (clinic.worker_counters): webhook attempts by outcome,
    notification sends by channel and status, outcomes handed to Redis while PostgreSQL refused them."""

    def collect(self) -> Iterator[CounterMetricFamily]:
        try:
            counts = counters_read()
        except redis.RedisError:
            return
        for name, (documentation, labels) in COUNTERS.items():
            family = CounterMetricFamily(name, documentation, labels=list(labels))
            for values, count in sorted(counts[name].items()):
                family.add_metric(list(values), count)
            yield family


class DatabaseConnectionsCollector(Collector):
    """Server connections to this database by state (active, idle, idle in transaction...), and the server's
    max_connections: the pool use PostgreSQL sees, PgBouncer's server pool included."""

    def collect(self) -> Iterator[GaugeMetricFamily]:
        try:
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT coalesce(state, 'unknown'), count(*) FROM pg_stat_activity "
                    "WHERE datname = current_database() GROUP BY 1"
                )
                by_state = cursor.fetchall()
                cursor.execute("SELECT current_setting('max_connections')::int")
                (maximum,) = cursor.fetchone() or (0,)
        except DatabaseError:
            return
        used = GaugeMetricFamily(
            "clinic_database_connections", "Server connections to the database, by state.", labels=["state"]
        )
        for state, count in by_state:
            used.add_metric([state], count)
        yield used
        yield GaugeMetricFamily("clinic_database_max_connections", "PostgreSQL's max_connections.", value=maximum)


def _registry() -> CollectorRegistry:
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
    else:
        registry = CollectorRegistry()
        registry.register(_ProcessCollector())
    registry.register(OutboxCollector())
    registry.register(TaskCollector())
    registry.register(WorkerCountersCollector())
    registry.register(DatabaseConnectionsCollector())
    return registry


class _ProcessCollector(Collector):
    """This process's default registry (single-process servers: runserver, tests)."""

    def collect(self) -> Iterator[object]:  # type: ignore[override]
        yield from REGISTRY.collect()


def metrics(request: HttpRequest) -> HttpResponse:
    token = settings.METRICS_TOKEN
    if not token:
        return HttpResponse(status=404)
    sent = request.headers.get("Authorization", "")
    if not hmac.compare_digest(sent.encode(), f"Bearer {token}".encode()):
        response = HttpResponse("A bearer token (METRICS_TOKEN) is required.\n", status=401, content_type="text/plain")
        response["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return response
    response = HttpResponse(generate_latest(_registry()), content_type=CONTENT_TYPE_LATEST)
    response["Cache-Control"] = "no-store"
    return response
