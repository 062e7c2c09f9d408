"""OpenTelemetry (clinic.tracing): off unless OTEL_EXPORTER_OTLP_ENDPOINT is set; with it, a span per request
named after its route reaches the OTLP/HTTP endpoint, continuing the caller's traceparent. The collector is
a local HTTP server that records what it receives (the boundary outside our control)."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]


class Collector(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.server.received.append((self.path, body))  # type: ignore[attr-defined]
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def collector() -> Iterator[ThreadingHTTPServer]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Collector)
    server.received = []  # type: ignore[attr-defined]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()
    server.server_close()


# In a process of its own: the tracer provider is installed once per process, as in a real role.
PROBE = """
import os, sys
os.environ["DJANGO_SETTINGS_MODULE"] = "clinic.settings"
import django
django.setup()
from django.test import Client
from clinic import tracing
response = Client().get("/healthz", HTTP_TRACEPARENT="00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
tracing.tracing_flush()
print(response.status_code, tracing._tracer is not None)
"""


def _run(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    import os

    clean = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    return subprocess.run(  # noqa: S603 - our own interpreter and a fixed script
        [sys.executable, "-c", PROBE],
        cwd=ROOT,
        env=clean | env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_without_otel_variables_nothing_is_traced(collector: ThreadingHTTPServer) -> None:
    result = _run({})

    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["200", "False"]
    assert collector.received == []  # type: ignore[attr-defined]


def test_with_an_otlp_endpoint_a_request_span_named_by_route_reaches_the_collector(
    collector: ThreadingHTTPServer,
) -> None:
    result = _run(
        {
            "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{collector.server_port}",
            "OTEL_SERVICE_NAME": "clinic-web-test",
        }
    )

    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["200", "True"]
    received = collector.received  # type: ignore[attr-defined]
    assert [path for path, _ in received] == ["/v1/traces"]
    body = received[0][1]
    assert b"GET healthz" in body
    assert b"clinic-web-test" in body
    assert bytes.fromhex("0af7651916cd43dd8448eb211c80319c") in body  # the caller's trace continued
