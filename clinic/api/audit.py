"""The audit log: exactly one row per API request, refused ones and token exchanges included."""

from __future__ import annotations

import contextlib
import hashlib
import logging
import time
from collections.abc import Callable
from functools import cache
from typing import Any

from django.db import DatabaseError, InterfaceError, OperationalError, connection
from django.http import HttpRequest, HttpResponseBase
from django.utils import timezone

from clinic.api import audit_buffer
from clinic.api.context import request_context
from clinic.api.errors import api_not_found
from clinic.api.network import client_ip
from clinic.api.paths import API_PREFIX, FHIR_PREFIX, is_public_api_path
from clinic.query_plans import server_binding_cursor
from clinic.text import CONTROL_CHARACTERS
from integrations.models import AuditLogEntry

logger = logging.getLogger("integrations.audit")


def _audited(path: str) -> bool:
    # The schema and docs pages are public documentation, not API operations on data.
    return path.startswith((API_PREFIX, FHIR_PREFIX)) and not is_public_api_path(path)


def _route(request: HttpRequest) -> str:
    resolver = getattr(request, "resolver_match", None)
    # The catch-all that answers unknown /api/ paths with a 404 is no route of the API.
    if resolver is None or resolver.func is api_not_found:
        return ""
    return resolver.route[:200]


def _token_ref(request: HttpRequest) -> str:
    """SHA-256 of the presented bearer token: the toolkit's checksum, never the token itself."""
    token_ref = request_context(request).token_ref
    if token_ref:
        return token_ref
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        return hashlib.sha256(token.strip().encode()).hexdigest()
    return ""


def _printable(text: str) -> str:
    """A NUL cannot be stored in PostgreSQL text: a path with %00 once left no audit row at all."""
    return CONTROL_CHARACTERS.sub(lambda match: f"%{ord(match.group()):02X}", text)


@cache
def _insert_statement() -> str:
    """INSERT of one row, composed once: AuditLogEntry.objects.create() compiled it anew on every request
    (about a tenth of the framework floor's CPU). The casts type the parameters an ORM insert would have."""
    table = AuditLogEntry._meta.db_table
    columns = ", ".join(connection.ops.quote_name(name) for name in _COLUMNS)
    values = ", ".join(_CASTS.get(name, "%s") for name in _COLUMNS)
    return f"INSERT INTO {connection.ops.quote_name(table)} ({columns}) VALUES ({values})"  # noqa: S608 - fixed identifiers


_COLUMNS = (
    "created_at",
    "client_id",
    "token_ref",
    "ip",
    "method",
    "route",
    "path",
    "status",
    "duration_ms",
    "request_id",
    "patient_ids",
    "user_agent",
    "actor",
)
_CASTS = {"ip": "%s::inet", "patient_ids": "%s::uuid[]"}


def _insert(row: dict[str, Any]) -> None:
    """Write the row now, in its own statement (autocommit): it is committed before the response leaves."""
    with server_binding_cursor(connection) as cursor:  # prepared once per connection
        cursor.execute(_insert_statement(), [row[name] for name in _COLUMNS])


class ApiAuditMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        if not _audited(request.path):
            return self.get_response(request)
        started_at, started = timezone.now(), time.perf_counter()
        response = self.get_response(request)
        context = request_context(request)
        decision = context.rate_limit
        if decision is not None:
            for name, value in decision.headers().items():
                response[name] = value
        client = context.client
        row = {
            "created_at": started_at,
            "client_id": client.pk if client is not None and client.pk else None,
            "token_ref": _token_ref(request),
            "ip": client_ip(request),
            "method": _printable(request.method or "")[:10],
            "route": _route(request),
            "path": _printable(request.path)[:500],
            "status": response.status_code,
            "duration_ms": round((time.perf_counter() - started) * 1000, 3),
            "request_id": context.request_id,
            "patient_ids": context.patient_ids or [],
            "user_agent": _printable(request.headers.get("User-Agent", ""))[:200],
            "actor": _printable(context.actor)[:200],
        }
        try:
            _insert(row)
        except (OperationalError, InterfaceError):
            # PostgreSQL is restarting: keep the row and write it when the database is back.
            audit_buffer.defer(row)
        except Exception:  # the response is already decided; losing it would not undo anything
            logger.exception("Could not write the audit row for request %s", context.request_id or "-")
        else:
            if audit_buffer.has_local_rows():
                with contextlib.suppress(DatabaseError):  # still down for those: they stay queued
                    audit_buffer.flush_local()
        return response
