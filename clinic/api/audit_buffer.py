"""Audit rows that could not be written because PostgreSQL was unreachable, kept until it is back.

docs/operations.md §1: requests that fail during a PostgreSQL restart are audited once it is back. The row
goes to a Redis list shared by every web process (drained by a Celery beat task), or, with Redis down
too, to a bounded list in this process, drained by the next audit row this process writes.
"""

from __future__ import annotations

import json
import logging
from collections import deque
from datetime import datetime
from functools import cache
from typing import Any, cast

import redis
from django.conf import settings
from django.db import DatabaseError, IntegrityError, transaction

from integrations.models import AuditLogEntry

logger = logging.getLogger("integrations.audit")
_local: deque[dict[str, Any]] = deque(maxlen=10_000)
FLUSH_BATCH = 500


def _key() -> str:
    return f"{settings.CACHES['default'].get('KEY_PREFIX', 'clinic')}:audit:deferred"


@cache
def _redis() -> redis.Redis:
    return redis.Redis.from_url(settings.REDIS_URL, socket_timeout=2, socket_connect_timeout=2)


def _encode(row: dict[str, Any]) -> str:
    return json.dumps(
        {**row, "created_at": row["created_at"].isoformat(), "patient_ids": [str(p) for p in row["patient_ids"]]}
    )


def _decode(raw: str | bytes) -> dict[str, Any]:
    row = json.loads(raw)
    row["created_at"] = datetime.fromisoformat(row["created_at"])
    return row


def defer(row: dict[str, Any]) -> None:
    """Keep a row (AuditLogEntry field values, client as client_id) for a later flush."""
    if settings.REDIS_URL:
        try:
            _redis().rpush(_key(), _encode(row))
            return
        except redis.RedisError:
            pass
    _local.append(row)
    logger.warning("Audit row of request %s deferred in process (database and Redis unavailable)", row["request_id"])


def has_local_rows() -> bool:
    return bool(_local)


def flush_local() -> int:
    """Write this process's deferred rows; called after a row was written (the database is back)."""
    rows: list[dict[str, Any]] = []
    while _local and len(rows) < FLUSH_BATCH:
        rows.append(_local.popleft())
    return _write(rows, on_failure=lambda failed: _local.extendleft(reversed(failed)))


def flush_shared() -> int:
    """Write the rows other processes deferred to Redis (the beat task)."""
    if not settings.REDIS_URL:
        return flush_local()
    written = 0
    while True:
        raw = cast(list[bytes] | None, _redis().lpop(_key(), FLUSH_BATCH))
        if not raw:
            return written
        rows = [_decode(item) for item in raw]
        written += _write(
            rows, on_failure=lambda failed: _redis().lpush(_key(), *reversed([_encode(r) for r in failed]))
        )
        if len(rows) < FLUSH_BATCH:
            return written


def _write(rows: list[dict[str, Any]], *, on_failure: Any) -> int:
    if not rows:
        return 0
    try:
        AuditLogEntry.objects.bulk_create([AuditLogEntry(**row) for row in rows])
    except IntegrityError:
        # A row names an API client deleted since: written one by one, such a row without its client, so
        # one row cannot hold every later one back forever (it went back to Redis and failed again).
        for row in rows:
            _write_one(row)
    except DatabaseError:
        on_failure(rows)
        raise
    return len(rows)


def _write_one(row: dict[str, Any]) -> None:
    try:
        with transaction.atomic():
            AuditLogEntry.objects.create(**row)
    except IntegrityError:
        logger.warning("Deferred audit row of request %s written without its deleted client", row["request_id"])
        AuditLogEntry.objects.create(**{**row, "client_id": None})
