"""Log records as JSON lines (docs/operations.md §1): time in UTC, level, logger, message, request id, client
id and route, plus the exception when there is one. Whatever TIME_ZONE says: the clinic's zone is for
people, and a log read next to another machine's must not need converting (issue 20: mixed time zones).

The message is the one the redaction filter (clinic.log_redaction) already cleaned; nothing else of the
record is written, so extras a caller attaches cannot carry patient data into the log by accident.
"""

from __future__ import annotations

import json
import logging
import time
from datetime import UTC, datetime


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line = {
            "time": datetime.fromtimestamp(record.created, UTC)
            .isoformat(timespec="milliseconds")
            .replace("+00:00", "Z"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "request_id": getattr(record, "request_id", "-"),
            "client_id": getattr(record, "client_id", "-"),
            "route": getattr(record, "route", "-"),
            "process": record.process,
        }
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False, default=str)


class UtcTextFormatter(logging.Formatter):
    """The development format (LOG_FORMAT=text), in UTC like the JSON lines."""

    converter = staticmethod(time.gmtime)
    default_msec_format = "%s.%03dZ"
