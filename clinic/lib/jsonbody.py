"""JSON as the service writes it, API responses and webhook payloads alike: Decimal values as exact JSON
numbers (1180.5), never through float; dates, times and UUIDs as ISO text. Here rather than beside the
renderer so that models (the webhook outbox) write the same bytes without importing DRF."""

from __future__ import annotations

import datetime
import uuid
from typing import Any

import simplejson


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
