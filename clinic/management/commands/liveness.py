"""python manage.py liveness worker|export-worker|beat [--node NODE] [--any]: exit 0 when that role is alive,
1 otherwise.

The liveness probe of the worker, export-worker and beat containers (docker/compose.yaml, Kubernetes exec probes). Alive
means a fresh heartbeat (clinic.heartbeat): a worker refreshes its own, under the role of the queues it
consumes (export-worker for the export queue, worker for the default one), while its consumer is connected to
the broker and its event loop turns, beat after every scheduler tick. By default the role must be running
on this host (the container's hostname), so one container's probe does not pass on another's heartbeat.
Needs Redis only: no database query, no system checks, so a probe costs little and a database outage does
not restart every worker.
"""

from __future__ import annotations

from typing import Any

import redis
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from clinic.heartbeat import ROLES, heartbeats_fresh, max_age_seconds, redis_connection, this_host


class Command(BaseCommand):
    help = "Exit 0 when this host's Celery worker (export-worker, beat) has a fresh heartbeat in Redis, 1 otherwise."
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("role", choices=ROLES)
        target = parser.add_mutually_exclusive_group()
        target.add_argument("--node", help="Exact node: a worker's nodename (celery@host) or beat's pid@host.")
        target.add_argument("--any", action="store_true", help="Any node of the role, on any host.")

    def handle(self, *args: Any, **options: Any) -> None:
        role = options["role"]
        if not settings.REDIS_URL:
            raise CommandError(f"REDIS_URL is not set: tasks run in-process and there is no {role} to check.")
        try:
            fresh = heartbeats_fresh(role=role, connection=redis_connection())
        except redis.RedisError as exc:
            raise CommandError(f"{role}: cannot reach Redis (the broker): {type(exc).__name__}") from None
        if options["node"]:
            matching = {node: age for node, age in fresh.items() if node == options["node"]}
            wanted = f"node {options['node']}"
        elif options["any"]:
            matching, wanted = fresh, "any node"
        else:
            host = this_host()
            matching = {node: age for node, age in fresh.items() if node.rpartition("@")[2] == host}
            wanted = f"host {host}"
        if not matching:
            raise CommandError(
                f"{role}: no heartbeat from {wanted} in the last {max_age_seconds()} s "
                "(not running, hung, or cannot reach the broker)."
            )
        for node, age in sorted(matching.items()):
            self.stdout.write(f"{role} {node}: alive, heartbeat {age:.1f} s ago")
