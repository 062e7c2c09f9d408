"""One webhook HTTP request, sent to an address that was checked.

The connection is opened to the checked IP address itself; the host name is used only for TLS (SNI and
certificate verification) and the Host header. So no DNS lookup happens after the SSRF check. Redirects
are never followed (the standard library client does not follow them), proxies from the environment are
not used, and the whole attempt is bounded by a hard deadline: a receiver that drips bytes is cut off.
"""

from __future__ import annotations

import contextlib
import http.client
import socket
import ssl
import threading
import time
from dataclasses import dataclass
from functools import cache
from typing import Any, cast

from integrations.webhooks.targets import IPAddress, Target

EXCERPT_BYTES = 1024


class TransportError(Exception):
    """No HTTP response: connection refused, timed out, TLS failure, malformed response..."""


@dataclass(frozen=True)
class Response:
    status: int
    headers: dict[str, str]  # lower-case names
    excerpt: str  # the first EXCERPT_BYTES of the body, decoded leniently
    address: str


@cache
def tls_context() -> ssl.SSLContext:
    """The system trust store, certificate and host name verification on, TLS 1.2 or later."""
    context = ssl.create_default_context()
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    return context


class _PinnedHTTPConnection(http.client.HTTPConnection):
    def __init__(self, target: Target, address: IPAddress, timeout: float) -> None:
        super().__init__(target.host, target.port, timeout=timeout)
        self.address = str(address)

    def connect(self) -> None:
        self.sock = socket.create_connection((self.address, self.port), self.timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class _PinnedHTTPSConnection(http.client.HTTPSConnection):
    def __init__(self, target: Target, address: IPAddress, timeout: float, context: ssl.SSLContext) -> None:
        super().__init__(target.host, target.port, timeout=timeout, context=context)
        self.address = str(address)
        self.tls = context

    def connect(self) -> None:
        sock = socket.create_connection((self.address, self.port), self.timeout)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        # The certificate is verified against the host name, not the address we connected to.
        self.sock = self.tls.wrap_socket(sock, server_hostname=self.host)


def _connect(
    target: Target, addresses: list[IPAddress], connect_timeout: float, deadline: float
) -> http.client.HTTPConnection:
    errors = []
    for address in addresses:
        timeout = min(connect_timeout, deadline - time.monotonic())
        if timeout <= 0:
            break
        connection: http.client.HTTPConnection
        if target.scheme == "https":
            connection = _PinnedHTTPSConnection(target, address, timeout, tls_context())
        else:
            connection = _PinnedHTTPConnection(target, address, timeout)
        try:
            connection.connect()
            return connection
        except ssl.SSLCertVerificationError as exc:
            connection.close()
            raise TransportError(f"TLS certificate of {target.host} not accepted: {exc.verify_message}") from None
        except TimeoutError:
            errors.append(f"{address}: connect timed out after {timeout:g} s")
        except (OSError, ssl.SSLError) as exc:
            errors.append(f"{address}: {exc.strerror or exc}" if isinstance(exc, OSError) else f"{address}: {exc}")
        connection.close()
    raise TransportError("Could not connect: " + "; ".join(errors or ["no time left"]))


def post(
    *,
    target: Target,
    addresses: list[IPAddress],
    headers: dict[str, str],
    body: bytes,
    connect_timeout: float,
    total_timeout: float,
) -> Response:
    """POST `body` to the target through the first of `addresses` that accepts a connection."""
    deadline = time.monotonic() + total_timeout
    connection = _connect(target, addresses, connect_timeout, deadline)
    sock = connection.sock
    expired = threading.Event()

    def cut_off() -> None:
        expired.set()
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)

    watchdog = threading.Timer(max(deadline - time.monotonic(), 0), cut_off)
    watchdog.daemon = True
    watchdog.start()
    try:
        sock.settimeout(max(deadline - time.monotonic(), 0.001))
        connection.request("POST", target.path, body=body, headers={"Host": target.host_header, **headers})
        response = connection.getresponse()
        try:
            excerpt = response.read(EXCERPT_BYTES)
        except (OSError, http.client.HTTPException, ValueError):
            excerpt = b""  # the status is what counts; a body cut short leaves no excerpt
        return Response(
            status=response.status,
            headers={name.lower(): value for name, value in response.getheaders()},
            excerpt=excerpt.decode("utf-8", errors="replace"),
            address=cast(Any, connection).address,
        )
    except (OSError, http.client.HTTPException, ValueError) as exc:
        if expired.is_set() or isinstance(exc, TimeoutError):
            raise TransportError(f"No complete response within {total_timeout:g} s.") from None
        raise TransportError(f"{type(exc).__name__}: {exc}") from None
    finally:
        watchdog.cancel()
        connection.close()
