"""`manage.py migrate` under a PostgreSQL advisory lock: the `migrate` role (docker/entrypoint.sh).

Two migrate runs at once (a Job re-applied while the previous one runs, two compose one-offs, a pipeline
retried) crashed one of them on the other's half-made tables (issue 35). Here the second waits for the first,
then finds nothing left to apply: both exit 0, each migration applied once.

The lock is taken on a connection of its own, in a transaction held open while `migrate` runs on Django's
connection: `BEGIN; SELECT pg_try_advisory_xact_lock(key)`. A transaction-scoped lock, because through
PgBouncer in transaction mode a session-level `pg_advisory_lock` would be taken on whatever server connection
served that one statement and stay there, unreleased, after the client went; an open transaction pins its
server connection until it ends, and the lock ends with it, whatever kills the process.

Three details keep it from hanging:
- The open transaction says something every KEEPALIVE_SECONDS (SHOW, which takes no snapshot), so neither
  PgBouncer's idle_transaction_timeout nor PostgreSQL's idle_in_transaction_session_timeout cuts it, if
  either is set above that.
- A waiting run holds no transaction between its tries (BEGIN, try, ROLLBACK, sleep). `CREATE INDEX
  CONCURRENTLY` in the running migrate waits for every transaction that held a snapshot when it started;
  a waiting run's transaction held open would be one, and each would wait for the other for ever.
- The holder's transaction holds no snapshot once it has the lock (READ COMMITTED between statements, and
  SHOW takes none), for the same reason.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import psycopg
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import DEFAULT_DB_ALIAS, connections
from django.db.migrations.executor import MigrationExecutor

logger = logging.getLogger("clinic.migrate")

# One key for the whole database: hashtextextended('clinic:migrate', 0), computed once so that the key is
# visible in pg_locks (objid) as a constant an operator can look for.
MIGRATE_LOCK_KEY = -9_127_299_090_100_656_987
KEEPALIVE_SECONDS = 5.0
RETRY_SECONDS = 1.0


class Command(BaseCommand):
    help = (
        "Apply migrations like `migrate --no-input`, holding a PostgreSQL advisory lock: a second run at the "
        "same time waits for the first, then applies what is left (nothing). Works through PgBouncer in "
        "transaction mode. The migrate role of docker/entrypoint.sh."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--database", default=DEFAULT_DB_ALIAS)
        parser.add_argument(
            "--lock-timeout",
            type=float,
            default=600.0,
            help="Seconds to wait for another run's lock before giving up (exit 1). Default 600.",
        )

    def handle(self, *args: Any, database: str, lock_timeout: float, verbosity: int, **options: Any) -> None:
        holder = connections.create_connection(database)
        holder.ensure_connection()
        raw: psycopg.Connection[Any] = holder.connection
        try:
            waited = self._acquire(raw, lock_timeout)
            logger.info("migrate lock taken%s", f" after waiting {waited:.1f} s" if waited >= RETRY_SECONDS else "")
            lost = threading.Event()
            stop = threading.Event()
            keeper = threading.Thread(target=_keep_alive, args=(raw, stop, lost), daemon=True, name="migrate-lock")
            keeper.start()
            try:
                self._migrate(database, verbosity)
            finally:
                stop.set()
                keeper.join(KEEPALIVE_SECONDS + 5)
            if lost.is_set():
                # The migrations ran to their end; only the exclusion of a concurrent run was not guaranteed.
                logger.warning("the migrate lock's connection was lost while migrating; the migrations completed")
        finally:
            holder.close()

    def _acquire(self, raw: psycopg.Connection[Any], timeout: float) -> float:
        started = time.monotonic()
        announced = False
        while True:
            raw.execute("BEGIN")
            row = raw.execute("SELECT pg_try_advisory_xact_lock(%s)", [MIGRATE_LOCK_KEY]).fetchone()
            if row is not None and row[0]:
                return time.monotonic() - started  # the transaction stays open: it is the lock
            raw.execute("ROLLBACK")  # no transaction held while waiting (module docstring)
            if not announced:
                logger.info("another migrate holds the lock; waiting for it (at most %.0f s)", timeout)
                announced = True
            if time.monotonic() - started > timeout:
                raise CommandError(f"another migrate held the lock for more than {timeout:.0f} s; gave up")
            time.sleep(RETRY_SECONDS)

    def _migrate(self, database: str, verbosity: int) -> None:
        connection = connections[database]
        executor = MigrationExecutor(connection)
        plan = executor.migration_plan(executor.loader.graph.leaf_nodes())
        names = [f"{migration.app_label}.{migration.name}" for migration, _ in plan]
        logger.info("%d migrations to apply%s", len(names), f": {', '.join(names)}" if names else "")
        # Django's own progress lines are text on stdout; the role logs the plan above and the result below
        # instead, so that every line it writes is a log line (JSON with DEBUG off). -v 2 shows them.
        call_command("migrate", database=database, interactive=False, verbosity=verbosity if verbosity > 1 else 0)
        logger.info("migrations applied: %d", len(names))


def _keep_alive(raw: psycopg.Connection[Any], stop: threading.Event, lost: threading.Event) -> None:
    while not stop.wait(KEEPALIVE_SECONDS):
        try:
            raw.execute("SHOW application_name")  # takes no snapshot (module docstring)
        except psycopg.Error:
            lost.set()
            return
