"""Log lines as JSON (docs/operations.md §1): UTC time, level, logger, message, request id, client id, route."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from clinic.api import ratelimit
from clinic.api.request_id import RequestIdLogFilter
from clinic.json_logging import JsonFormatter
from tests.helpers import bearer, stored_token

pytestmark = pytest.mark.django_db


@pytest.fixture
def json_log() -> Iterator[io.StringIO]:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    handler.addFilter(RequestIdLogFilter())
    logger = logging.getLogger("clinic.api.ratelimit")
    logger.addHandler(handler)
    yield stream
    logger.removeHandler(handler)


@pytest.fixture
def redis_refusing(settings: Any, monkeypatch: Any) -> Iterator[None]:
    settings.REDIS_URL = "redis://127.0.0.1:1/0"  # nothing listens: connections are refused
    ratelimit._redis_script.cache_clear()
    monkeypatch.setattr(ratelimit, "_redis_down_until", None)
    yield
    ratelimit._redis_script.cache_clear()


def test_a_line_logged_inside_a_request_is_json_in_utc_with_request_id_client_id_and_route(
    client: Any, api_client_factory: Any, settings: Any, json_log: io.StringIO, redis_refusing: None
) -> None:
    settings.TIME_ZONE = "Asia/Kolkata"
    api_client = api_client_factory()
    token = stored_token(api_client)

    response = client.get("/api/v1/branches", **bearer(token), HTTP_X_REQUEST_ID="json-1")

    assert response.status_code == 200
    lines = [json.loads(line) for line in json_log.getvalue().splitlines()]
    assert len(lines) == 1
    line = lines[0]
    stamp = line.pop("time")
    assert stamp.endswith("Z")
    assert abs((datetime.now(UTC) - datetime.fromisoformat(stamp)).total_seconds()) < 60
    assert isinstance(line.pop("process"), int)
    assert line == {
        "level": "WARNING",
        "logger": "clinic.api.ratelimit",
        "message": "Redis unavailable (ConnectionError): rate limits fall back to a per-process approximation",
        "request_id": "json-1",
        "client_id": api_client.client_id,
        "route": "branch-list",
    }


def test_outside_a_request_the_ids_are_dashes_and_an_exception_is_one_json_line() -> None:
    record = logging.LogRecord("clinic.test", logging.ERROR, __file__, 1, "failed %s", ("x",), None)
    try:
        raise ValueError("boom")
    except ValueError:
        import sys

        record.exc_info = sys.exc_info()
    RequestIdLogFilter().filter(record)

    text = JsonFormatter().format(record)

    assert "\n" not in text
    line = json.loads(text)
    assert (line["message"], line["request_id"], line["client_id"], line["route"]) == ("failed x", "-", "-", "-")
    assert line["exception"].endswith("ValueError: boom")
