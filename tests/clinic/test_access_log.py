"""The web role's access log holds no query string, Referer or Basic user name (docs/api-rules.md §7): gunicorn's
default line logged the raw request line, so a token sent as ?access_token= (refused with 401) and every
patient search term ended up in the log."""

from __future__ import annotations

import base64
import logging
import re
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace

from gunicorn.config import Config

from clinic import gunicorn_config

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "k1Jx0Q3a9ZbX7mN2pR5sT8uVsecret"


def _access_line(raw_uri: str, **headers: str) -> str:
    config = Config()
    config.set("accesslog", "-")
    config.set("access_log_format", gunicorn_config.access_log_format)
    access_logger = gunicorn_config.logger_class(config)
    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append  # type: ignore[method-assign]
    access_logger.access_log.addHandler(handler)
    environ = {
        "REQUEST_METHOD": "GET",
        "RAW_URI": raw_uri,
        "PATH_INFO": raw_uri.partition("?")[0],
        "QUERY_STRING": raw_uri.partition("?")[2],
        "SERVER_PROTOCOL": "HTTP/1.1",
        "REMOTE_ADDR": "203.0.113.5",
        **{"HTTP_" + name.upper().replace("-", "_"): value for name, value in headers.items()},
    }
    response = SimpleNamespace(status="401 Unauthorized", headers=[("X-Request-ID", "req-42")], sent=224)
    request = SimpleNamespace(headers=[(name.upper(), value) for name, value in headers.items()])
    access_logger.access(response, request, environ, timedelta(milliseconds=12))
    (record,) = records
    return record.getMessage()


def test_the_access_line_names_the_request_without_its_query_string_referer_or_credentials():
    basic = "Basic " + base64.b64encode(b"gateway-7:s3cret").decode()
    line = _access_line(
        f"/api/v1/patients?search=Kavitha+Menon&access_token={TOKEN}",
        **{"User-Agent": "lab-gateway/2.1", "Referer": f"https://portal.example/?q={TOKEN}", "Authorization": basic},
    )

    assert '"GET /api/v1/patients HTTP/1.1" 401 224 12ms "lab-gateway/2.1" req-42' in line
    for withheld in (TOKEN, "Kavitha", "search", "gateway-7", "portal.example"):
        assert withheld not in line


def test_a_control_character_in_the_path_stays_percent_encoded():
    line = _access_line("/api/v1/patients/PAT-000001%0a203.0.113.9%20forged?x=1")

    assert "\n" not in line
    assert '"GET /api/v1/patients/PAT-000001%0a203.0.113.9%20forged HTTP/1.1"' in line


def test_an_operator_format_naming_the_query_or_referer_gets_a_dash():
    config = Config()
    config.set("access_log_format", "%(q)s|%(f)s|%(u)s|%({query_string}e)s|%({referer}i)s")
    atoms = gunicorn_config.AccessLogger(config).atoms(
        SimpleNamespace(status="200 OK", headers=[], sent=0),
        SimpleNamespace(headers=[("REFERER", "https://x.example/?t=1")]),
        {"REQUEST_METHOD": "GET", "RAW_URI": "/a?t=1", "SERVER_PROTOCOL": "HTTP/1.1", "QUERY_STRING": "t=1"},
        timedelta(0),
    )

    assert (atoms["q"], atoms["f"], atoms["u"]) == ("-", "-", "-")
    assert "{query_string}e" not in atoms
    assert "{referer}i" not in atoms


def test_the_web_role_runs_gunicorn_with_this_configuration():
    entrypoint = (ROOT / "docker" / "entrypoint.sh").read_text()
    assert "--config python:clinic.gunicorn_config" in entrypoint
    # Gunicorn imports the module by name from the working directory the entrypoint runs in (the checkout,
    # /app in the image): ask gunicorn itself which logger and format that gives.
    result = subprocess.run(  # noqa: S603
        [
            str(Path(sys.executable).parent / "gunicorn"),
            "--config",
            "python:clinic.gunicorn_config",
            "--print-config",
            "clinic.wsgi:application",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "<AccessLogger()>" in result.stdout
    # No control socket (gunicornc): it logged `[ERROR] Control server error` at every start on a read-only $HOME.
    assert re.search(r"^control_socket_disable\s+= True$", result.stdout, re.MULTILINE)
    assert gunicorn_config.access_log_format in result.stdout


def test_access_log_format_json_gives_one_object_with_the_route_and_client_but_no_path(monkeypatch):
    import json

    from clinic.api.request_id import current_client_id, current_route

    monkeypatch.setenv("ACCESS_LOG_FORMAT", "json")
    route, client = current_route.set("patient-detail"), current_client_id.set("client-abc")
    try:
        line = json.loads(_access_line("/api/v1/patients/PAT-000042?search=Kavitha"))
    finally:
        current_route.reset(route)
        current_client_id.reset(client)

    assert line.pop("time").endswith("Z")
    assert line == {
        "level": "INFO",
        "logger": "gunicorn.access",
        "message": "request",
        "method": "GET",
        "route": "patient-detail",
        "status": 401,
        "duration_ms": 12.0,
        "bytes": 224,
        "request_id": "req-42",
        "client_id": "client-abc",
        "remote_addr": "203.0.113.5",
    }
