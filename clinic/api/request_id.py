"""Request ids: echoed when the caller sends a sane one, generated otherwise, and put on every log line."""

from __future__ import annotations

import contextvars
import logging
import re
import uuid

HEADER = "X-Request-ID"
_VALID = re.compile(r"^[A-Za-z0-9._:\-]{1,128}$")
current_request_id: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="-")
# The calling API client's client_id and the route name, for log lines (clinic.json_logging); set by the
# authentication and by RequestMetricsMiddleware, reset with the request id for every request.
current_client_id: contextvars.ContextVar[str] = contextvars.ContextVar("client_id", default="-")
current_route: contextvars.ContextVar[str] = contextvars.ContextVar("route", default="-")


def accept_or_generate(incoming: str | None) -> str:
    if incoming and _VALID.match(incoming):
        return incoming
    return uuid.uuid4().hex


class RequestIdLogFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        record.request_id = current_request_id.get()
        record.client_id = current_client_id.get()
        record.route = current_route.get()
        return True
