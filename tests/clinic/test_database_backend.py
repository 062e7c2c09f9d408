"""clinic.database: the connection health check sends nothing, and still finds a connection the server dropped."""

from __future__ import annotations

import time

import psycopg
import pytest
from django.conf import settings
from django.db import connection, connections, reset_queries

from clinic.query_plans import server_binding_cursor

pytestmark = pytest.mark.django_db(transaction=True)


def _admin() -> psycopg.Connection:
    params = connection.get_connection_params()
    params.pop("cursor_factory", None)
    params.pop("context", None)
    return psycopg.connect(**params, autocommit=True)


def _last_statement(admin: psycopg.Connection, pid: int) -> str:
    row = admin.execute("SELECT query FROM pg_stat_activity WHERE pid = %s", [pid]).fetchone()
    return row[0] if row else ""


def test_every_alias_runs_on_this_backend():
    assert {alias: settings.DATABASES[alias]["ENGINE"] for alias in settings.DATABASES} == dict.fromkeys(
        settings.DATABASES, "clinic.database"
    )
    assert connection.vendor == "postgresql"


def test_the_check_of_a_healthy_connection_sends_no_statement():
    connection.ensure_connection()
    with connection.cursor() as cursor:
        cursor.execute("SELECT 'marker-statement'")
    pid = connection.connection.info.backend_pid
    with _admin() as admin:
        assert _last_statement(admin, pid) == "SELECT 'marker-statement'"
        for _ in range(3):
            assert connection.is_usable() is True
        assert _last_statement(admin, pid) == "SELECT 'marker-statement'"  # no SELECT 1 reached the server


def test_a_connection_the_server_dropped_is_found_unusable_and_replaced():
    connection.ensure_connection()
    pid = connection.connection.info.backend_pid
    with _admin() as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", [pid])
    deadline = time.monotonic() + 5
    while connection.is_usable() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert connection.is_usable() is False
    # What Django does at the start of the next request with the check's answer: close, then connect afresh.
    connection.health_check_done = False
    connection.close_if_health_check_failed()
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        assert cursor.fetchone()[0] != pid


def test_a_closed_connection_is_unusable():
    connection.ensure_connection()
    connection.connection.close()
    assert connection.is_usable() is False
    connections.close_all()


def test_the_log_of_a_server_binding_statement_holds_its_values(settings):
    settings.DEBUG = True
    reset_queries()
    with server_binding_cursor(connection) as cursor:
        cursor.execute("SELECT %s::text, %s::int", ["it's", 7])
        assert cursor.fetchone() == ("it's", 7)
    assert connection.queries[-1]["sql"] == "SELECT 'it''s'::text, 7::int"
