"""Outcomes of sends that PostgreSQL refused to record, kept in Redis until it accepts them.

docs/operations.md §5: during a full disk (or any other refusal of writes) a webhook or an
SMS that went out must not go out again because its outcome could not be written. The worker that sent it
hands the outcome to a Redis hash (one field per delivery or dedupe key) and queues a task that only
records, retried with backoff; the relays (Celery beat) drain the hash too, in case that task is lost. The
senders look in the hash before sending again: an outcome waiting here counts as recorded.

Redis is the only copy until PostgreSQL takes it (Redis's persistence decides what survives a Redis
restart). A Redis error never raises from here: `put` says whether the outcome was kept, `get` answers
None (the caller then behaves as before this existed: at least once).
"""

from __future__ import annotations

import json
import logging
from typing import Any

import redis
from django.conf import settings

from clinic.heartbeat import redis_connection

logger = logging.getLogger("integrations.pending_outcomes")


class PendingOutcomes:
    def __init__(self, name: str) -> None:
        self.name = name

    @property
    def key(self) -> str:
        prefix = settings.CACHES["default"].get("KEY_PREFIX") or "clinic"
        return f"{prefix}:pending-outcomes:{self.name}"

    def put(self, field: str, value: dict[str, Any]) -> bool:
        if not settings.REDIS_URL:
            return False
        try:
            redis_connection().hset(self.key, field, json.dumps(value))
        except redis.RedisError as exc:
            logger.error("%s %s: outcome not kept (Redis: %s)", self.name, field, type(exc).__name__)
            return False
        return True

    def get(self, field: str) -> dict[str, Any] | None:
        if not settings.REDIS_URL:
            return None
        try:
            raw = redis_connection().hget(self.key, field)
        except redis.RedisError:
            return None
        return json.loads(raw) if raw else None

    def fields(self) -> list[str]:
        if not settings.REDIS_URL:
            return []
        try:
            raw = redis_connection().hkeys(self.key)
        except redis.RedisError:
            return []
        return [item.decode() if isinstance(item, bytes) else str(item) for item in raw]

    def delete(self, field: str) -> None:
        try:
            redis_connection().hdel(self.key, field)
        except redis.RedisError:
            # Left behind: the next drain finds the outcome recorded already and deletes it then.
            logger.warning("%s %s: recorded, but still listed as pending (Redis unavailable)", self.name, field)
