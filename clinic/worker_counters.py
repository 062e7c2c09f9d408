"""Counters incremented by Celery workers (and web processes alike), shown by every pod's /metrics.

Like clinic.task_metrics: workers have no HTTP endpoint, so each increment is an HINCRBY on one Redis hash
that /metrics reads at scrape time (clinic.api.metrics_view.WorkerCountersCollector). The figures are the
deployment's, the same on every pod (aggregate with max(), not sum()); they survive worker restarts and
reset with Redis's data. A Redis error never fails the caller: the increment is skipped.
"""

from __future__ import annotations

import logging

import redis
from django.conf import settings

from clinic.heartbeat import redis_connection

logger = logging.getLogger("clinic.worker_counters")

# name -> (help, label names): every counter /metrics shows, declared here once.
COUNTERS: dict[str, tuple[str, tuple[str, ...]]] = {
    "clinic_webhook_attempts": (
        "Webhook delivery attempts whose outcome was recorded, by outcome: delivered, retrying (a retry is "
        "scheduled), gave_up (no attempt left, or a test event), gone (410: the subscription was disabled), "
        "superseded (the claim ran out during the attempt).",
        ("outcome",),
    ),
    "clinic_webhook_outcomes_deferred": (
        "Webhook attempts whose outcome PostgreSQL refused to record; handed to Redis and recorded later.",
        (),
    ),
    "clinic_notification_sends": (
        "Patient notification sends by channel (sms, email) and status (sent, failed, skipped).",
        ("channel", "status"),
    ),
    "clinic_notification_outcomes_deferred": (
        "Notifications sent whose attempt PostgreSQL refused to record; handed to Redis and recorded later.",
        ("channel",),
    ),
}


def counters_key() -> str:
    prefix = settings.CACHES["default"].get("KEY_PREFIX") or "clinic"
    return f"{prefix}:worker-counters"


def counter_inc(name: str, *values: str) -> None:
    """Add one to counter `name` with these label values (in COUNTERS' order)."""
    if not settings.REDIS_URL:
        return
    labels = COUNTERS[name][1]
    assert len(values) == len(labels), (name, values)
    try:
        redis_connection().hincrby(counters_key(), "|".join((name, *values)), 1)
    except redis.RedisError as exc:
        logger.warning("counter %s not incremented: %s", name, type(exc).__name__)


def counters_read() -> dict[str, dict[tuple[str, ...], int]]:
    """name -> {label values: count}; raises redis.RedisError."""
    result: dict[str, dict[tuple[str, ...], int]] = {name: {} for name in COUNTERS}
    if not settings.REDIS_URL:
        return result
    for raw_field, raw_value in redis_connection().hgetall(counters_key()).items():
        field = raw_field.decode() if isinstance(raw_field, bytes) else str(raw_field)
        name, *values = field.split("|")
        if name in COUNTERS and len(values) == len(COUNTERS[name][1]):
            result[name][tuple(values)] = int(raw_value)
    return result
