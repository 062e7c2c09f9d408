"""The raw-SQL limit of an endpoint: the exact statements one request runs, replayed through psycopg.

`capture` sends sample requests through the whole Django stack in this process (middleware, auth, views,
services) and records each statement as PostgreSQL received it (client-side binding, so the literal
text). A write is captured inside a transaction that is rolled back, so the capture leaves nothing
behind and its statements can be replayed any number of times.

`replay` runs the captured statements of each sample in a tight loop on one connection and fetches every
row, as the API does. Reads run in autocommit, as the API runs them. Writes run between BEGIN and
ROLLBACK (the API commits; a rollback skips the WAL flush, so the limit of a write is a little lower
than what the API could reach, and its ratio a little higher).
"""

from __future__ import annotations

import statistics
import time
from typing import Any

import psycopg
from scale_workload import Call


def capture(calls: list[Call], *, writes: bool, expected_status: int, host: str) -> list[list[str]]:
    from django.db import connection, transaction
    from django.test import Client

    client = Client(HTTP_HOST=host)
    captured: list[list[str]] = []
    for call in calls:
        statements: list[str] = []

        def record(
            execute: Any, sql: str, params: Any, many: bool, context: dict[str, Any], statements: list[str] = statements
        ) -> Any:
            result = execute(sql, params, many, context)
            statements.append(connection.ops.last_executed_query(context["cursor"].cursor, sql, params))
            return result

        extra: dict[str, Any] = {}
        content_type = "application/octet-stream"
        for name, value in call.headers:
            if name.lower() == "content-type":
                content_type = value
            else:
                extra["HTTP_" + name.upper().replace("-", "_")] = value
        with connection.execute_wrapper(record):
            if writes:
                with transaction.atomic():
                    response = client.generic(call.method, call.path, call.body, content_type, **extra)
                    transaction.set_rollback(True)
            else:
                response = client.generic(call.method, call.path, call.body, content_type, **extra)
        if response.status_code != expected_status:
            raise RuntimeError(f"{call.method} {call.path}: {response.status_code} {response.content[:300]!r}")
        captured.append(statements)
    return captured


def replay(url: str, captured: list[list[str]], *, writes: bool, seconds: float = 2.0) -> dict[str, Any]:
    """p50 and p95 milliseconds per request, cycling through the captured samples."""
    if not captured:
        raise RuntimeError("No request of this scenario to replay: its pool of calls is empty.")
    with psycopg.connect(url, autocommit=True) as conn:

        def one(statements: list[str]) -> None:
            if writes:
                conn.execute("BEGIN")
            for sql in statements:
                cursor = conn.execute(sql.encode())
                if cursor.description is not None:
                    cursor.fetchall()
            if writes:
                conn.execute("ROLLBACK")

        for statements in captured:  # warm-up: plans and pages
            one(statements)
        samples: list[float] = []
        started = time.perf_counter()
        while len(samples) < 100 or time.perf_counter() - started < seconds:
            statements = captured[len(samples) % len(captured)]
            t0 = time.perf_counter()
            one(statements)
            samples.append((time.perf_counter() - t0) * 1000)
    ordered = sorted(samples)
    return {
        "p50_ms": round(statistics.median(samples), 3),
        "p95_ms": round(ordered[int(0.95 * (len(ordered) - 1))], 3),
        "iterations": len(samples),
    }
