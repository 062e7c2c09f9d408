"""JSON rendering that writes Decimal values as exact JSON numbers (1180.5), never through float."""

from __future__ import annotations

import datetime
import uuid
from typing import Any

import simplejson
from rest_framework import renderers


def _default(value: Any) -> Any:
    if isinstance(value, datetime.datetime | datetime.date | datetime.time):
        return value.isoformat()
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, set | frozenset | tuple):
        return list(value)
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def dumps(data: Any, *, sort_keys: bool = False) -> bytes:
    # use_decimal writes Decimal('1180.50') as the JSON number 1180.50: exact, no binary float.
    return simplejson.dumps(
        data,
        use_decimal=True,
        default=_default,
        ensure_ascii=False,
        separators=(",", ":"),
        sort_keys=sort_keys,
    ).encode()


class JSONRenderer(renderers.JSONRenderer):
    media_type = "application/json"
    format = "json"

    def render(self, data: Any, accepted_media_type: str | None = None, renderer_context: Any = None) -> bytes:
        if data is None:
            return b""
        return dumps(data)
