"""Heartbeats of the background roles (Celery worker and beat) in Redis: what `manage.py liveness` and
/readyz read to tell a running role from one that crashed, hangs, or cannot reach the broker.

- A worker refreshes its heartbeat from a consumer bootstep (`WorkerHeartbeat`), under the role of the
  queues it consumes: `export-worker` for FHIR_EXPORT_QUEUE, `worker` for any other (the default queue);
  a worker consuming both (`make run`) keeps both. So a web pod's /readyz, and each container's liveness
  command, tell a missing default worker from a missing export worker. Celery starts consumer
  steps once the consumer is connected to the broker and stops them when that connection is lost, and the
  refresh runs on the consumer's event-loop timer: a fresh heartbeat means the process is alive, its event
  loop turns, and it is connected to the broker. A clean shutdown removes it at once.
- Beat answers no remote control of its own (Celery's beat pidbox is opt-in), so its scheduler
  (clinic.beat.ClinicScheduler) refreshes a heartbeat after every tick, and ticks at least once per interval.

Each role has one sorted set in Redis (the broker): member = the node (the worker's nodename, beat's
`pid@host`), score = the Unix time of its last heartbeat. A heartbeat is fresh for three intervals
(`ROLE_HEARTBEAT_SECONDS`), so one slow pass does not make a live role look dead.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import time
from collections.abc import Iterable
from typing import Any, Literal, cast

import redis
from celery import bootsteps
from django.conf import settings

from clinic.liveness_probe import heartbeat_file

logger = logging.getLogger("clinic.heartbeat")

Role = Literal["worker", "export-worker", "beat"]
ROLES: tuple[Role, ...] = ("worker", "export-worker", "beat")
# Members older than this are dropped on the next write: a role that died without cleaning up (SIGKILL)
# does not stay in the set forever.
_FORGET_AFTER_SECONDS = 86_400


def interval_seconds() -> int:
    return int(settings.ROLE_HEARTBEAT_SECONDS)


def max_age_seconds() -> int:
    """A heartbeat older than this is stale: three refreshes missed."""
    return 3 * interval_seconds()


def heartbeat_key(role: Role) -> str:
    # The cache prefix keeps deployments (and test runs) that share one Redis database apart.
    prefix = settings.CACHES["default"].get("KEY_PREFIX") or "clinic"
    return f"{prefix}:heartbeat:{role}"


def redis_connection() -> redis.Redis:
    return redis.Redis.from_url(settings.REDIS_URL, socket_timeout=2, socket_connect_timeout=2)


def heartbeat_record(*, role: Role, node: str, connection: redis.Redis | None = None) -> None:
    now = time.time()
    key = heartbeat_key(role)
    pipe = (connection or redis_connection()).pipeline()
    pipe.zadd(key, {node: now})
    pipe.zremrangebyscore(key, "-inf", now - _FORGET_AFTER_SECONDS)
    pipe.expire(key, _FORGET_AFTER_SECONDS)
    pipe.execute()


def heartbeat_remove(*, role: Role, node: str, connection: redis.Redis | None = None) -> None:
    (connection or redis_connection()).zrem(heartbeat_key(role), node)


def local_heartbeat_mark(role: Role) -> None:
    """After a heartbeat of this process's role was recorded in Redis: the file the container's liveness
    probe reads (clinic/liveness_probe.py), as fresh as that heartbeat, without the probe asking Redis."""
    path = heartbeat_file(role)
    try:
        path.touch()
    except OSError as exc:  # a read-only /tmp: only the cheap probe suffers, `manage.py liveness` still answers
        logger.warning("local heartbeat file %s not written: %s", path, type(exc).__name__)


def local_heartbeat_clear(role: Role) -> None:
    with contextlib.suppress(OSError):
        heartbeat_file(role).unlink(missing_ok=True)


def heartbeats_fresh(*, role: Role, connection: redis.Redis | None = None) -> dict[str, float]:
    """{node: seconds since its last heartbeat} for every node of `role` whose heartbeat is fresh."""
    now = time.time()
    members = cast(
        "list[tuple[bytes, float]]",
        (connection or redis_connection()).zrangebyscore(
            heartbeat_key(role), now - max_age_seconds(), "+inf", withscores=True
        ),
    )
    return {node.decode(): max(0.0, now - float(score)) for node, score in members}


def this_host() -> str:
    return socket.gethostname()


def worker_roles(queues: Iterable[str]) -> tuple[Role, ...]:
    """The roles a worker consuming `queues` plays: export-worker for the export queue, worker for any other."""
    names = set(queues)
    roles: list[Role] = []
    if names - {settings.FHIR_EXPORT_QUEUE}:
        roles.append("worker")
    if settings.FHIR_EXPORT_QUEUE in names:
        roles.append("export-worker")
    return tuple(roles)


class WorkerHeartbeat(bootsteps.StartStopStep):
    """Consumer bootstep: refreshes the worker's heartbeat while it is connected to the broker."""

    label = "role heartbeat"
    # After the task consumer: the heartbeat starts once the worker consumes. (The event loop is always last.)
    requires = ("celery.worker.consumer.tasks:Tasks",)

    def __init__(self, parent: Any, **kwargs: Any) -> None:
        super().__init__(parent, **kwargs)
        self.node = ""
        self.roles: tuple[Role, ...] = ()
        self.timer_entry: Any = None
        self.connection: redis.Redis | None = None

    def start(self, parent: Any) -> None:
        if not settings.REDIS_URL:
            return
        self.node = parent.hostname
        self.roles = worker_roles(parent.app.amqp.queues.consume_from)
        self.connection = redis_connection()
        self.refresh()
        self.timer_entry = parent.timer.call_repeatedly(interval_seconds(), self.refresh)

    def refresh(self) -> None:
        try:
            for role in self.roles:
                heartbeat_record(role=role, node=self.node, connection=self.connection)
                local_heartbeat_mark(role)
        except redis.RedisError as exc:
            # The heartbeat goes stale, which is the signal; the worker itself carries on reconnecting.
            logger.warning("worker heartbeat not recorded: %s", type(exc).__name__)

    def stop(self, parent: Any) -> None:
        if self.timer_entry is not None:
            self.timer_entry.cancel()
            self.timer_entry = None
        for role in self.roles:
            local_heartbeat_clear(role)
        if self.connection is not None:
            with contextlib.suppress(redis.RedisError):  # the broker is gone: the heartbeat goes stale on its own
                for role in self.roles:
                    heartbeat_remove(role=role, node=self.node, connection=self.connection)
            self.connection = None

    shutdown = stop
