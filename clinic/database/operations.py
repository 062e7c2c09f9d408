"""Django's PostgreSQL operations, with the executed query of a server-binding cursor written out whole.

Django logs (DEBUG, `connection.queries`, assertNumQueries' report) the query psycopg sent. A client-binding
cursor, Django's default, sent the SQL with its values quoted in; the server-binding cursors of
clinic.query_plans send `$1, $2...` and the values apart, so the log would hold placeholders. For those this
composes the statement with its values client-side, as Django does when the whole connection binds on the
server (`server_side_binding`).
"""

from __future__ import annotations

from typing import Any

from django.db.backends.postgresql.operations import DatabaseOperations as PostgresOperations
from psycopg import ClientCursor, errors


class DatabaseOperations(PostgresOperations):
    def last_executed_query(self, cursor: Any, sql: Any, params: Any) -> Any:
        if isinstance(cursor, ClientCursor) or not params:
            return super().last_executed_query(cursor, sql, params)
        try:
            return self.compose_sql(sql, params)
        except errors.DataError:
            return None
