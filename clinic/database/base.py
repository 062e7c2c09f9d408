"""The PostgreSQL backend (Django's), with a connection health check that costs no round trip.

Django's health check (`conn_health_checks=True`) runs `SELECT 1` before the first query of every request on a
persistent connection: one round trip on every API request, the framework floor's fourth statement
(bench/results/request_floor.md). It is there for connections the server has dropped since the last request
(a PostgreSQL restart or failover, an idle timeout, an administrator's pg_terminate_backend), and in each of
those cases the server has sent its goodbye (an error message, then the end of the stream) before closing:
the connection's socket is readable while the connection is idle. A healthy idle connection has nothing to
read, so a zero-timeout poll of the socket tells the two apart without sending anything. A connection whose
socket is readable for any other reason is closed and opened afresh, which is safe, only slower.

What the poll cannot see (a peer that vanished without closing: a cable pulled) the first query finds out as
Django's own check would, by failing; Django then closes the connection and the next request opens another.
"""

from __future__ import annotations

import select

from django.db.backends.postgresql.base import DatabaseWrapper as PostgresDatabaseWrapper
from psycopg import pq

from clinic.database.operations import DatabaseOperations


class DatabaseWrapper(PostgresDatabaseWrapper):
    ops_class = DatabaseOperations

    def is_usable(self) -> bool:
        if self.connection is None:
            return False
        pgconn = self.connection.pgconn
        if pgconn.status != pq.ConnStatus.OK:
            return False
        try:
            readable, _, _ = select.select([pgconn.socket], [], [], 0)
        except (OSError, ValueError):  # the socket is gone
            return False
        return not readable
