"""Request ids: echoed when the caller sends a sane one, generated otherwise, and put on every log line."""

from __future__ import annotations

import contextvars
import logging
import re
import uuid

HEADER = "X-Request-ID"
_VALID = re.compile(r"^[A-Za-z0-9._:\-]{1,128}$")
current_request_id: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="-")


def accept_or_generate(incoming: str | None) -> str:
    if incoming and _VALID.match(incoming):
        return incoming
    return uuid.uuid4().hex


class RequestIdLogFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        record.request_id = current_request_id.get()
        return True
