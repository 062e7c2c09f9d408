"""Celery task counts and run time per task (docs/operations.md §1: /metrics has task counts).

Workers have no HTTP endpoint of their own, so each finished task adds to one Redis hash (two HINCRBYs in a
pipeline), and every web pod's /metrics reads the hash at scrape time (clinic.api.metrics_view): the figures
are the deployment's, the same on every pod (aggregate with max(), not sum()). They survive worker restarts
and are lost with Redis's data, like a counter reset. A Redis error never fails a task: the figure is skipped.
"""

from __future__ import annotations

import logging

import redis
from django.conf import settings

from clinic.heartbeat import redis_connection

logger = logging.getLogger("clinic.task_metrics")


def metrics_key() -> str:
    prefix = settings.CACHES["default"].get("KEY_PREFIX") or "clinic"
    return f"{prefix}:task-metrics"


def task_metrics_record(*, task: str, state: str, seconds: float, connection: redis.Redis | None = None) -> None:
    if not settings.REDIS_URL:
        return
    try:
        pipe = (connection or redis_connection()).pipeline(transaction=False)
        pipe.hincrby(metrics_key(), f"count|{task}|{state}", 1)
        pipe.hincrbyfloat(metrics_key(), f"seconds|{task}", seconds)
        pipe.execute()
    except redis.RedisError as exc:
        logger.warning("task metrics not recorded: %s", type(exc).__name__)


def task_metrics_read(connection: redis.Redis | None = None) -> tuple[dict[tuple[str, str], int], dict[str, float]]:
    """(count by (task, state), seconds by task); empty without Redis."""
    if not settings.REDIS_URL:
        return {}, {}
    counts: dict[tuple[str, str], int] = {}
    seconds: dict[str, float] = {}
    for raw_field, raw_value in (connection or redis_connection()).hgetall(metrics_key()).items():
        field = raw_field.decode() if isinstance(raw_field, bytes) else str(raw_field)
        kind, _, rest = field.partition("|")
        if kind == "count":
            task, _, state = rest.rpartition("|")
            counts[(task, state)] = int(raw_value)
        elif kind == "seconds":
            seconds[rest] = float(raw_value)
    return counts, seconds
