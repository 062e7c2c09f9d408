"""Celery beat's scheduler (CELERY_BEAT_SCHEDULER): one active beat, schedule state in Redis, a heartbeat.

- Exactly one active beat (docs/operations.md §1): each beat tries to hold a lock in Redis (SET NX with a
  time to live, renewed on every tick by its holder only). The one holding it sends due tasks; any other
  stays idle, ticking, ready to take over within BEAT_LOCK_SECONDS of the active one dying. Two beats
  would send every periodic task twice (issue 20: beat was not a singleton).
- The schedule state (each entry's last run) lives in Redis, not in a file in /tmp: a restarted beat, or a
  standby taking over, knows when each task last ran, so the hourly purges no longer wait an hour after
  every start, nor run twice when the standby takes over.
- A heartbeat after every tick (clinic.heartbeat), the standby's included: `manage.py liveness beat` and
  /readyz read it.

Without Redis (REDIS_URL empty, development) there is one process and no broker: the lock and the state
are skipped.
"""

from __future__ import annotations

import json
import logging
import os
import time
import uuid
from datetime import datetime
from typing import Any, cast

import redis
from celery.beat import Scheduler
from django.conf import settings

from clinic.heartbeat import (
    heartbeat_record,
    heartbeat_remove,
    interval_seconds,
    local_heartbeat_clear,
    local_heartbeat_mark,
    redis_connection,
    this_host,
)

logger = logging.getLogger("clinic.beat")

# KEYS[1] lock; ARGV: owner, ttl ms. Renew when held by owner, else take it when free. 1: held, 0: not.
_HOLD = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return 1 end
return 0
"""
_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""


def _key(name: str) -> str:
    return f"{settings.CACHES['default'].get('KEY_PREFIX') or 'clinic'}:beat:{name}"


def lock_seconds() -> int:
    """How long a dead active beat holds the lock: three heartbeat intervals (it renews on every tick)."""
    return int(settings.BEAT_LOCK_SECONDS)


class ClinicScheduler(Scheduler):
    # Every task sent is written to Redis at once: a beat killed right after sending does not send it again.
    sync_every_tasks = 1

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.node = f"{os.getpid()}@{this_host()}"
        self.owner = f"{self.node}:{uuid.uuid4().hex[:8]}"
        self.active = False
        self._redis: redis.Redis | None = None
        self._last_heartbeat = 0.0
        super().__init__(*args, **kwargs)
        # A tick at least once per heartbeat interval, so the lock and the heartbeat stay fresh.
        self.max_interval = min(self.max_interval or interval_seconds(), interval_seconds())

    # --- Redis ---------------------------------------------------------------------------------------

    def _connection(self) -> redis.Redis | None:
        if not settings.REDIS_URL:
            return None
        self._redis = self._redis or redis_connection()
        return self._redis

    def _hold_lock(self) -> bool:
        connection = self._connection()
        if connection is None:
            return True
        try:
            held = bool(connection.eval(_HOLD, 1, _key("lock"), self.owner, lock_seconds() * 1000))
        except redis.RedisError as exc:
            # Without Redis no task can be sent anyway; another beat may hold the lock when it is back.
            logger.warning("beat lock not renewed: %s", type(exc).__name__)
            held = False
        if held and not self.active:
            logger.info("beat %s is the active beat", self.owner)
            self._load_state()  # the previous active beat's last runs
            self._heap = None
        elif not held and self.active:
            logger.warning("beat %s lost the lock: standing by", self.owner)
        self.active = held
        return held

    def _load_state(self) -> None:
        connection = self._connection()
        if connection is None:
            return
        try:
            stored = cast("dict[bytes, bytes]", connection.hgetall(_key("state")))
        except redis.RedisError:
            return
        for raw_name, raw in stored.items():
            entry = self.schedule.get(raw_name.decode())
            if entry is None:
                continue
            state = json.loads(raw)
            entry.last_run_at = datetime.fromisoformat(state["last_run_at"])
            entry.total_run_count = int(state["total_run_count"])

    # --- Scheduler -----------------------------------------------------------------------------------

    def setup_schedule(self) -> None:
        super().setup_schedule()
        self._load_state()

    def sync(self) -> None:
        connection = self._connection()
        if connection is None or not self.active:
            return
        state: dict[str | bytes, str | bytes] = {
            name: json.dumps({"last_run_at": entry.last_run_at.isoformat(), "total_run_count": entry.total_run_count})
            for name, entry in self.schedule.items()
            if entry.last_run_at is not None
        }
        if state:
            try:
                connection.hset(_key("state"), mapping=state)  # type: ignore[arg-type]
            except redis.RedisError as exc:
                logger.warning("beat schedule state not saved: %s", type(exc).__name__)

    def tick(self, *args: Any, **kwargs: Any) -> float:
        remaining: float = (
            super().tick(*args, **kwargs) if self._hold_lock() else float(self.max_interval or interval_seconds())
        )
        self._heartbeat()
        return remaining

    def _heartbeat(self) -> None:
        connection = self._connection()
        if connection is None or time.monotonic() - self._last_heartbeat < 1.0:
            return
        try:
            heartbeat_record(role="beat", node=self.node, connection=connection)
            local_heartbeat_mark("beat")
            self._last_heartbeat = time.monotonic()
        except redis.RedisError as exc:
            logger.warning("beat heartbeat not recorded: %s", type(exc).__name__)

    def close(self) -> None:
        super().close()  # syncs the state first
        local_heartbeat_clear("beat")
        connection = self._connection()
        if connection is not None:
            try:
                connection.eval(_RELEASE, 1, _key("lock"), self.owner)  # the standby takes over at once
                heartbeat_remove(role="beat", node=self.node, connection=connection)
            except redis.RedisError:
                pass
        self.active = False
