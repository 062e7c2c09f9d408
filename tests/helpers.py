"""What several test modules share: request helpers, the problem+json assertion, dates in a Bengaluru branch
and "nothing changed" row counts. Fixtures live in the conftest files, factories in each package's
factories.py, and helpers one package shares (the appointment clinic, billing's invoices) in that package."""

from __future__ import annotations

import base64
import re
import secrets
import threading
import time as clock
from collections.abc import Callable, Collection
from datetime import date, datetime, time, timedelta
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit
from zoneinfo import ZoneInfo

from django.apps import apps
from django.db import connection
from django.test import Client
from django.utils import timezone
from oauth2_provider.models import get_access_token_model, set_token_value

from clinic.api.errors import PROBLEM_KINDS

TOKEN_URL = "/api/v1/auth/token"
IST = ZoneInfo("Asia/Kolkata")
# Rows every API request may write (its audit entry) or a token exchange adds: not what a refused request
# is checked against.
REQUEST_BOOKKEEPING = frozenset({"integrations.AuditLogEntry", "oauth2_provider.AccessToken"})


# --- Credentials -------------------------------------------------------------------------------------


def own_database_address() -> tuple[str, int]:
    """Where the test database listens: (host, port), the host being a directory for a Unix socket (the
    embedded PostgreSQL of `make test` listens on a socket only, which dj-database-url keeps in OPTIONS)."""
    params = connection.settings_dict
    options = params.get("OPTIONS") or {}
    host = params["HOST"] or options.get("host") or "127.0.0.1"
    port = params["PORT"] or options.get("port") or 5432
    return str(host), int(port)


def own_database_url() -> str:
    """A URL of the test database for a subprocess or a connection of a test's own (DATABASE_URL's form)."""
    params = connection.settings_dict
    host, port = own_database_address()
    credentials = quote(params["USER"] or "", safe="")
    if params.get("PASSWORD"):
        credentials += ":" + quote(params["PASSWORD"], safe="")
    if host.startswith("/"):
        return f"postgresql://{credentials}@/{params['NAME']}?host={quote(host, safe='')}&port={port}"
    return f"postgresql://{credentials}@{host}:{port}/{params['NAME']}"


def bearer(token: str) -> dict[str, str]:
    return {"HTTP_AUTHORIZATION": f"Bearer {token}"}


def basic_auth(client_id: str, secret: str) -> dict[str, str]:
    """HTTP Basic client authentication at the token endpoint (RFC 6749 section 2.3.1)."""
    return {"HTTP_AUTHORIZATION": "Basic " + base64.b64encode(f"{client_id}:{secret}".encode()).decode()}


def exchange(client: Client, client_id: str, secret: str, form: dict[str, str] | None = None, **extra: Any) -> Any:
    """POST the client-credentials grant to the token endpoint; `form` adds or replaces form fields, `extra`
    goes to the request (REMOTE_ADDR, HTTP_X_FORWARDED_FOR)."""
    data = {"grant_type": "client_credentials", "client_id": client_id, "client_secret": secret, **(form or {})}
    return client.post(TOKEN_URL, data, **extra)


def stored_token(api_client: Any, scope: str = "appointments:read") -> str:
    """A token written straight to the database: no exchange, so no audit row, no rate-limit quota used and
    no IP allow-list in the way."""
    raw = secrets.token_urlsafe(32)
    token = get_access_token_model()(application=api_client, scope=scope, expires=timezone.now() + timedelta(hours=1))
    set_token_value(token, raw)
    token.save()
    return raw


# --- Responses ---------------------------------------------------------------------------------------


def assert_problem(response: Any, status: int, code: str, **extra: Any) -> dict[str, Any]:
    """An RFC 9457 problem with exactly the standard members, a detail, `errors` on a 400 and the `extra`
    members with the values given; returns the body for further checks."""
    assert response.status_code == status, response.content
    assert response["Content-Type"] == "application/problem+json"
    problem = response.json()
    expected_keys = {"type", "title", "status", "detail", "code", "request_id"} | set(extra)
    if status == 400:
        expected_keys.add("errors")
    assert set(problem) == expected_keys, problem
    assert (problem["type"], problem["title"], problem["status"], problem["code"]) == (
        f"/api/v1/problems/{code}",
        PROBLEM_KINDS[code].title,
        status,
        code,
    )
    assert problem["detail"]
    assert problem["request_id"] == response["X-Request-ID"]
    for name, value in extra.items():
        assert problem[name] == value, (name, problem[name])
    return problem


def assert_token_error(response: Any, status: int, error: str) -> dict[str, Any]:
    """An RFC 6749 section 5.2 error of the token or revocation endpoint, never cached."""
    assert response.status_code == status, response.content
    assert response["Content-Type"] == "application/json"
    assert response["Cache-Control"] == "no-store"
    body = response.json()
    assert set(body) == {"error", "error_description"}
    assert body["error"] == error
    assert isinstance(body["error_description"], str)
    assert body["error_description"]
    return body


def assert_field_errors(response: Any, errors: list[dict[str, Any]]) -> None:
    problem = assert_problem(response, 400, "validation_error")
    assert problem["detail"] == "The request has invalid fields."
    assert problem["errors"] == errors


def error_fields(response: Any) -> list[str]:
    """The fields a 400 validation_error problem names, in its order."""
    return [error["field"] for error in assert_problem(response, 400, "validation_error")["errors"]]


def error_codes(response: Any) -> list[tuple[str, str]]:
    """(field, code) of each error of a 400 validation_error problem, in its order."""
    return [(error["field"], error["code"]) for error in assert_problem(response, 400, "validation_error")["errors"]]


def link_snapshot(header: str) -> str:
    """The `as_of` every link of a list's `Link` header carries (URL-encoded, as it is in the links), checked to
    be one instant, within the last minute."""
    found = set(re.findall(r"[?&]as_of=([^&>]+)", header))
    assert len(found) == 1, header
    assert header.count("as_of=") == len(header.split(", ")), header
    (encoded,) = found
    instant = datetime.fromisoformat(encoded.replace("%2B", "+").replace("%3A", ":"))
    assert timedelta(0) <= timezone.now() - instant < timedelta(minutes=1), header
    return encoded


def parse_links(header: str, path: str) -> dict[str, dict[str, list[str]]]:
    """rel -> query parameters of its target, checking each target is the absolute URL of `path`."""
    links = {}
    for part in header.split(", "):
        match = re.fullmatch(r'<([^>]+)>; rel="(\w+)"', part)
        assert match, header
        url = urlsplit(match.group(1))
        assert (url.scheme, url.netloc, url.path) == ("http", "testserver", path)
        links[match.group(2)] = parse_qs(url.query)
    return links


def shown_secret(response: Any, code_id: str) -> str:
    """The secret an admin page shows in <code id="code_id">, checking it appears exactly once."""
    html = response.content.decode()
    (secret,) = re.findall(rf'<code id="{code_id}">([^<]+)</code>', html)
    assert html.count(secret) == 1
    return secret


def send_all_at_once(requests: list[Callable[[Client], Any]]) -> list[tuple[int, dict[str, Any]]]:
    """Send every request from its own thread and Client, released together by a barrier; (status, json)
    per request, in order. Each thread closes its database connection."""
    barrier = threading.Barrier(len(requests))
    results: list[tuple[int, dict[str, Any]] | None] = [None] * len(requests)
    errors: list[BaseException] = []

    def run(index: int, request: Callable[[Client], Any]) -> None:
        try:
            http = Client()
            barrier.wait(timeout=30)
            response = request(http)
            results[index] = (response.status_code, response.json())
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)
        finally:
            connection.close()

    workers = [threading.Thread(target=run, args=(i, request)) for i, request in enumerate(requests)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=120)
    assert not errors, errors
    assert all(result is not None for result in results)
    return results  # type: ignore[return-value]


def wait_until(predicate: Callable[[], bool], timeout: float = 10) -> None:
    deadline = clock.monotonic() + timeout
    while not predicate():
        assert clock.monotonic() < deadline, "condition not reached in time"
        clock.sleep(0.05)


# --- The database ------------------------------------------------------------------------------------


def row_counts(*, exclude: Collection[str] = ()) -> dict[str, int]:
    """The row count of every model (by label) but those excluded: a refused request must leave it equal."""
    return {m._meta.label: m._default_manager.count() for m in apps.get_models() if m._meta.label not in exclude}


def sql_rows(sql: str) -> set[tuple[Any, ...]]:
    with connection.cursor() as cursor:
        cursor.execute(sql)
        return set(cursor.fetchall())


# --- Dates -------------------------------------------------------------------------------------------


def at(day: date, hhmm: str, zone: ZoneInfo = IST) -> datetime:
    """`day` at hh:mm, by default in Bengaluru."""
    return datetime.combine(day, time.fromisoformat(hhmm), tzinfo=zone)


def weekday_on_or_after(day: date, weekday: int) -> date:
    """The first `weekday` (0 is Monday) on or after `day`."""
    return day + timedelta(days=(weekday - day.weekday()) % 7)


def next_weekday(weekday: int, *, after_days: int = 7) -> date:
    """The first `weekday` (0 is Monday) at least `after_days` days from today: every cell of it is ahead."""
    return weekday_on_or_after(timezone.localdate() + timedelta(days=after_days), weekday)


def next_monday() -> date:
    """A Monday at least a week ahead: no cell of it or of the Tuesday after has started, and it is far
    outside any cancellation window."""
    return next_weekday(0)


def age_today(born: date) -> int:
    today = timezone.localdate()
    return today.year - born.year - ((today.month, today.day) < (born.month, born.day))


def all_at_once(work: list[Callable[[], Any]]) -> list[Any]:
    """Run each callable in its own thread (its own database connection), released together by a barrier;
    the results, or the exceptions raised, in order."""
    barrier = threading.Barrier(len(work))
    results: list[Any] = [None] * len(work)

    def run(index: int) -> None:
        try:
            barrier.wait(timeout=30)
            results[index] = work[index]()
        except BaseException as exc:  # returned to the test, which asserts on it
            results[index] = exc
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(index,)) for index in range(len(work))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not any(thread.is_alive() for thread in threads)
    return results


def sql_scalar(sql: str) -> Any:
    """The first column of the first row a raw SQL query returns (for invariants over generated data)."""
    with connection.cursor() as cursor:
        cursor.execute(sql)
        return cursor.fetchone()[0]
