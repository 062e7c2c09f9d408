"""A real local webhook receiver (http.server in a thread, optionally TLS) and a fake DNS for the tests.

The receiver records every request (headers, raw body, arrival time) and answers with scripted replies:
status, headers, body and a delay before answering (a slow or hung receiver). Fixtures: `receiver`
(http on 127.0.0.1), `fake_dns` (names the tests resolve without a real DNS), `tls_certificate`.
"""

from __future__ import annotations

import datetime
import ipaddress
import ssl
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from integrations.webhooks import targets


@dataclass
class Reply:
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b'{"ok":true}'
    delay: float = 0.0  # seconds before answering


@dataclass
class Received:
    method: str
    path: str
    headers: dict[str, str]  # lower-case names
    body: bytes
    at: float  # time.time() on arrival
    server_name: str | None = None  # the TLS SNI the client sent

    @property
    def webhook_id(self) -> str:
        return self.headers["webhook-id"]


class _Handler(BaseHTTPRequestHandler):
    server: ReceiverServer
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        self._handle()

    def do_GET(self) -> None:
        self._handle()

    def _handle(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        received = Received(
            method=self.command,
            path=self.path,
            headers={name.lower(): value for name, value in self.headers.items()},
            body=body,
            at=time.time(),
            server_name=self.server.last_sni,
        )
        reply = self.server.owner._record(received)
        if reply.delay and self.server.owner.closing.wait(reply.delay):
            return
        self.send_response(reply.status)
        for name, value in reply.headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(reply.body)))
        self.end_headers()
        self.wfile.write(reply.body)

    def log_message(self, *args: Any) -> None:
        pass


class ReceiverServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    owner: Receiver
    last_sni: str | None = None


class Receiver:
    """Records requests; answers each with the next scripted Reply, then with `default`."""

    def __init__(self, *, tls: ssl.SSLContext | None = None, host: str = "127.0.0.1") -> None:
        self.requests: list[Received] = []
        self.replies: list[Reply] = []
        self.default = Reply()
        self.closing = threading.Event()
        self._changed = threading.Condition()
        self.server = ReceiverServer((host, 0), _Handler)
        self.server.owner = self
        self.scheme = "http"
        if tls is not None:

            def remember_sni(sock: Any, server_name: str | None, context: Any) -> None:
                self.server.last_sni = server_name

            tls.sni_callback = remember_sni
            self.server.socket = tls.wrap_socket(self.server.socket, server_side=True)
            self.scheme = "https"
        self.port = self.server.server_address[1]
        self._thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()

    def url(self, path: str = "/hooks", host: str = "127.0.0.1") -> str:
        return f"{self.scheme}://{host}:{self.port}{path}"

    def reply_with(self, *replies: Reply) -> None:
        with self._changed:
            self.replies.extend(replies)

    def _record(self, received: Received) -> Reply:
        with self._changed:
            self.requests.append(received)
            self._changed.notify_all()
            return self.replies.pop(0) if self.replies else self.default

    def wait_for(self, count: int, timeout: float = 20) -> list[Received]:
        """Block until at least `count` requests arrived; fails the test after `timeout` seconds."""
        with self._changed:
            if not self._changed.wait_for(lambda: len(self.requests) >= count, timeout):
                raise AssertionError(f"expected {count} webhook requests within {timeout} s, got {len(self.requests)}")
            return list(self.requests)

    def close(self) -> None:
        self.closing.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver(settings: Any) -> Iterator[Receiver]:
    """A plain-http receiver on 127.0.0.1; private targets are allowed for it (the development setting)."""
    settings.WEBHOOK_ALLOW_PRIVATE_TARGETS = True
    server = Receiver()
    yield server
    server.close()


PUBLIC_TEST_ADDRESS = "93.184.215.14"  # a global unicast address; nothing connects to it in the tests


class FakeDns:
    """Replaces the webhook resolver: name -> addresses, or a callable returning them (changing answers).
    Unknown names do not resolve. `lookups` lists every name asked."""

    def __init__(self) -> None:
        self.records: dict[str, list[str] | Callable[[], list[str]]] = {}
        self.lookups: list[str] = []

    def __call__(self, host: str, port: int) -> list[str]:
        self.lookups.append(host)
        answer = self.records.get(host)
        if answer is None:
            raise OSError(-2, "Name or service not known")
        return list(answer() if callable(answer) else answer)


@pytest.fixture
def fake_dns(monkeypatch: pytest.MonkeyPatch) -> FakeDns:
    dns = FakeDns()
    dns.records["hooks.example.com"] = [PUBLIC_TEST_ADDRESS]
    monkeypatch.setattr(targets, "resolver", dns)
    return dns


@dataclass
class Certificate:
    cert_path: str
    key_path: str

    def server_context(self) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(self.cert_path, self.key_path)
        return context

    def client_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=self.cert_path)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        return context


def make_certificate(*names: str, directory: Path) -> Certificate:
    """A self-signed certificate for `names` (DNS names or IP addresses)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0])])
    alt_names: list[x509.GeneralName] = []
    for name in names:
        try:
            alt_names.append(x509.IPAddress(ipaddress.ip_address(name)))
        except ValueError:
            alt_names.append(x509.DNSName(name))
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName(alt_names), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path = directory / f"{names[0]}.pem"
    key_path = directory / f"{names[0]}.key"
    cert_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return Certificate(str(cert_path), str(key_path))


@pytest.fixture
def tls_certificate() -> Iterator[Callable[..., Certificate]]:
    with tempfile.TemporaryDirectory() as directory:
        yield lambda *names: make_certificate(*names, directory=Path(directory))


# --- Helpers shared by the webhook tests ----------------------------------------------------------------

# The appointment kinds (registration order), which `subscribe` subscribes to by default; the patient kinds
# (patients.events) are registered too, before them.
ALL_KINDS = [
    "appointment.booked",
    "appointment.rescheduled",
    "appointment.cancelled",
    "appointment.checked_in",
    "appointment.completed",
    "appointment.no_show",
]


def subscribe(url: str, events: list[str] | None = None, **kwargs: Any) -> tuple[Any, str]:
    """A subscription through the service (target checked as on save); returns it and its secret."""
    from integrations.webhooks.services import subscription_create

    return subscription_create(
        name=kwargs.pop("name", "Receiver"), target_url=url, event_types=events or ALL_KINDS, **kwargs
    )


def verify(received: Received, secret: str) -> Any:
    """standardwebhooks' own verification of a received request; returns the parsed body."""
    from standardwebhooks import Webhook

    return Webhook(secret).verify(received.body, received.headers)
