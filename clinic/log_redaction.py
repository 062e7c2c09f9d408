"""PostgreSQL's error details never reach a log (docs/api-rules.md §7).

A failed CHECK or unique constraint comes back with `DETAIL: Failing row contains (...)` or `Key (...)=(...)`:
the whole row, names, birth dates, phone and ABHA numbers. The primary message and the SQLSTATE are what an
operator needs; the detail is cut from every database exception in a logged traceback and from log args.
"""

from __future__ import annotations

import logging
from typing import Any

from django import db

_MARKERS = ("\nDETAIL:", "\nHINT:", "\nCONTEXT:")


def _cut(text: str) -> str:
    for marker in _MARKERS:
        if marker in text:
            text = text.split(marker, 1)[0] + " [database detail redacted]"
    return text


def _is_database_error(exc: BaseException) -> bool:
    if isinstance(exc, db.Error):
        return True
    module = type(exc).__module__ or ""
    return module.startswith("psycopg")


def _redact_chain(exc: BaseException | None) -> None:
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if _is_database_error(exc):
            exc.args = tuple(_cut(arg) if isinstance(arg, str) else arg for arg in exc.args)
        exc = exc.__cause__ or exc.__context__


class RedactDatabaseDetail(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and record.exc_info[1] is not None:
            _redact_chain(record.exc_info[1])
            record.exc_text = None  # formatted again, from the redacted exceptions
        if isinstance(record.args, tuple):
            record.args = tuple(self._arg(arg) for arg in record.args)
        if isinstance(record.msg, str):
            record.msg = _cut(record.msg)
        return True

    @staticmethod
    def _arg(arg: Any) -> Any:
        if isinstance(arg, BaseException) and _is_database_error(arg):
            _redact_chain(arg)
            return arg
        return _cut(arg) if isinstance(arg, str) else arg
