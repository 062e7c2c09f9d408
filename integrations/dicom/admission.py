"""Who gets a connection and an association on the worklist, and for how long: the transport side of the
worklist server (integrations.dicom.server), so that a hostile peer on the same network cannot lock out a
registered modality.

pynetdicom starts an association thread and its DUL thread for every accepted socket, counts every such
thread against `maximum_associations`, and waits for the A-ASSOCIATE-RQ as long as its ACSE timeout: a few
TCP connections that never send anything held every association slot. Here instead:

- An accepted socket waits in the lobby (one selector thread for all of them, no association thread) until
  its whole A-ASSOCIATE-RQ PDU is in the kernel's buffer (SO_RCVLOWAT makes the selector wake only then), and
  only then is handed to pynetdicom. A socket that has not sent its request within the ARTIM timeout
  (`DICOM_ARTIM_TIMEOUT_SECONDS`, PS3.8 9.1.5) is closed. A socket that sends half a request and stalls is
  held by the lobby, not by a thread.
- Association slots are taken only by requests that the worklist accepts (the called AE title is ours, the
  calling AE title is allowed from that address): at most `DICOM_MAX_ASSOCIATIONS_PER_ADDRESS` per peer
  address and `DICOM_MAX_ASSOCIATIONS` in all; over either, the request is rejected as transient, local limit
  exceeded (PS3.8 9.3.4: result 2, source 3, reason 2). A slot is freed when the socket closes.
- Connections per peer address are bounded at accept (twice its association limit, so the association over
  the limit still gets its A-ASSOCIATE-RJ), and the lobby holds a bounded number of sockets (a file
  descriptor each, no thread: sixteen times `DICOM_MAX_ASSOCIATIONS`). When a bound is reached a socket
  still waiting in the lobby is closed, not the newcomer: the oldest from an address outside every registered
  calling AE's networks, else the oldest. A modality sends its request as soon as it connects, and a peer
  cannot forge a TCP source address, so sockets that never send a request cannot keep a registered modality
  out, even reconnecting as fast as they are closed.
- Once associated, a peer silent for `DICOM_IDLE_TIMEOUT_SECONDS` is aborted (pynetdicom's network timeout),
  and a socket read or write blocked that long fails (a peer stalling inside a PDU).

Peer addresses are compared as the allow-list compares them (an IPv4-mapped IPv6 address is its IPv4
address). The lobby relies on Linux's SO_RCVLOWAT for select; TLS is not offered by the worklist.
"""

from __future__ import annotations

import contextlib
import logging
import selectors
import socket
import socketserver
import struct
import threading
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

from django.db import connection
from pynetdicom.transport import ThreadedAssociationServer

from integrations.dicom.selectors import peer_address, registered_networks

logger = logging.getLogger("integrations.dicom")

TCP_QUICKACK = getattr(socket, "TCP_QUICKACK", 12)  # Linux's value; the option is Linux's own
_ASSOCIATE_RQ = 0x01
# An A-ASSOCIATE-RQ is a few hundred bytes to a few kilobytes (one item per presentation context); a longer
# one is handed over once this much is buffered (pynetdicom reads the rest).
_LOBBY_PEEK_BYTES = 65536
_REGISTERED_REFRESH_SECONDS = 5.0


@dataclass(frozen=True)
class Limits:
    artim_seconds: float
    idle_seconds: float
    per_address: int  # associations per peer address
    total: int  # associations in all, and sockets waiting in the lobby

    @property
    def connections_per_address(self) -> int:
        return 2 * self.per_address

    @property
    def lobby_capacity(self) -> int:
        return 16 * self.total


class PeerSocket(socket.socket):
    """An accepted TCP socket that knows its peer and tells the server when it closes (the one place every
    path through pynetdicom ends: its association's end, a rejection, an abort, a timeout).

    It also acknowledges what it receives at once (TCP_QUICKACK, renewed after each read: Linux drops back to
    delayed ACKs on its own). A modality that leaves Nagle's algorithm on, as DCMTK's findscu does unless
    TCP_NODELAY is set in its environment, sends a C-FIND request as two writes (the command, then the
    identifier) and holds the second until the first is acknowledged: with delayed ACKs every query waited
    for the peer's ACK timer."""

    peer: str
    client_address: tuple[str, int]
    registered: bool
    admitted: bool
    _on_close: Any

    def recv(self, bufsize: int, flags: int = 0) -> bytes:
        data = super().recv(bufsize, flags)
        with contextlib.suppress(OSError):
            self.setsockopt(socket.IPPROTO_TCP, TCP_QUICKACK, 1)
        return data

    def shutdown(self, how: int) -> None:
        # pynetdicom closes a socket as `shutdown(); close()` inside one try: a peer that reset the connection
        # makes shutdown() raise, and the socket (and its slot) would never be closed.
        with contextlib.suppress(OSError):
            super().shutdown(how)

    def close(self) -> None:
        on_close, self._on_close = getattr(self, "_on_close", None), None
        super().close()
        if on_close is not None:
            on_close(self)


class Admission:
    """The counts behind the limits: open sockets and sockets waiting in the lobby per peer address, and the
    associations admitted per address and in all. Shared by the acceptor, the lobby and the association
    threads, under one lock."""

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self._lock = threading.Lock()
        self._open: Counter[str] = Counter()
        self._waiting: Counter[str] = Counter()
        self._associations: Counter[str] = Counter()

    def may_connect(self, peer: str) -> bool:
        """Whether a new connection from `peer` is taken: under its bound, or one of its sockets still waits in
        the lobby and will make room."""
        with self._lock:
            return self._open[peer] < self.limits.connections_per_address or self._waiting[peer] > 0

    def opened(self, sock: PeerSocket) -> None:
        with self._lock:
            self._open[sock.peer] += 1
            self._waiting[sock.peer] += 1

    def handed_over(self, sock: PeerSocket) -> None:
        with self._lock:
            self._waiting[sock.peer] -= 1

    def over_bound(self, peer: str) -> bool:
        with self._lock:
            return self._open[peer] > self.limits.connections_per_address

    def admit(self, sock: PeerSocket) -> bool:
        """Take an association slot for the socket's peer; False when its address or the server is full."""
        with self._lock:
            if sock.admitted:
                return True
            if (
                self._associations[sock.peer] >= self.limits.per_address
                or sum(self._associations.values()) >= self.limits.total
            ):
                return False
            self._associations[sock.peer] += 1
            sock.admitted = True
            return True

    def closed(self, sock: PeerSocket, *, waiting: bool) -> None:
        with self._lock:
            self._open[sock.peer] -= 1
            if waiting:
                self._waiting[sock.peer] -= 1
            if sock.admitted:
                self._associations[sock.peer] -= 1
            for counter in (self._open, self._waiting, self._associations):
                if counter[sock.peer] <= 0:
                    del counter[sock.peer]

    def associations(self) -> dict[str, int]:
        with self._lock:
            return dict(self._associations)


class _Lobby:
    """The sockets accepted but not yet handed to pynetdicom, oldest first, watched by one thread."""

    def __init__(self, server: WorklistServer) -> None:
        self._server = server
        self._selector = selectors.DefaultSelector()
        self._waiting: dict[PeerSocket, float] = {}  # socket -> its ARTIM deadline, in arrival order
        self._arrived: list[PeerSocket] = []
        self._registered: list[Any] = []
        self._registered_at = float("-inf")
        self._lock = threading.Lock()
        self._stopping = False
        self._wake_read, self._wake_write = socket.socketpair()
        self._wake_read.setblocking(False)
        self._selector.register(self._wake_read, selectors.EVENT_READ)
        self._thread = threading.Thread(target=self._run, name="dicom-worklist-lobby", daemon=True)
        self._thread.start()

    def add(self, sock: PeerSocket) -> None:
        with self._lock:
            self._arrived.append(sock)
        with contextlib.suppress(OSError):
            self._wake_write.send(b"\0")

    def stop(self) -> None:
        self._stopping = True
        with contextlib.suppress(OSError):
            self._wake_write.send(b"\0")
        self._thread.join(5)

    def _run(self) -> None:
        try:
            while not self._stopping:
                self._take_arrivals()
                deadline = min(self._waiting.values(), default=None)
                timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
                for key, _ in self._selector.select(timeout):
                    if key.fileobj is self._wake_read:
                        with contextlib.suppress(OSError):
                            self._wake_read.recv(4096)
                    else:
                        self._check(key.fileobj)  # type: ignore[arg-type]
                now = time.monotonic()
                for sock, expires in list(self._waiting.items()):
                    if expires <= now:
                        self._close(sock, "dicom connection closed: no association request in time (ARTIM)")
        except Exception:
            logger.exception("dicom lobby failed")
        finally:
            for sock in list(self._waiting):
                self._close(sock, None)
            with self._lock:
                arrived, self._arrived = self._arrived, []
            for sock in arrived:
                self._server.admission.handed_over(sock)  # never waited here: counted as open only
                sock.close()
            self._selector.close()
            self._wake_read.close()
            self._wake_write.close()

    def _is_registered(self, peer: str) -> bool:
        """Whether `peer` is in a registered calling AE's networks (read again every few seconds)."""
        if time.monotonic() - self._registered_at > _REGISTERED_REFRESH_SECONDS:
            try:
                self._registered = registered_networks()
            except Exception:
                logger.exception("dicom registered networks unreadable")  # keep the last list
            finally:
                connection.close()
            self._registered_at = time.monotonic()
        address = peer_address(peer)
        return address is not None and any(
            address.version == network.version and address in network for network in self._registered
        )

    def _take_arrivals(self) -> None:
        with self._lock:
            arrived, self._arrived = self._arrived, []
        limits = self._server.admission.limits
        for sock in arrived:
            sock.registered = self._is_registered(sock.peer)
            # A full address or a full lobby makes room by closing a waiting socket, never the newcomer.
            if self._server.admission.over_bound(sock.peer):
                oldest = next((waiting for waiting in self._waiting if waiting.peer == sock.peer), None)
                if oldest is not None:
                    self._close(oldest, "dicom connection closed: too many from one address")
            if len(self._waiting) >= limits.lobby_capacity:
                unregistered = next((waiting for waiting in self._waiting if not waiting.registered), None)
                self._close(unregistered or next(iter(self._waiting)), "dicom connection closed: too many waiting")
            try:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT, 6)  # a PDU header
                self._selector.register(sock, selectors.EVENT_READ)
            except (OSError, ValueError):
                self._server.admission.handed_over(sock)
                sock.close()
                continue
            self._waiting[sock] = time.monotonic() + limits.artim_seconds

    def _check(self, sock: PeerSocket) -> None:
        """Hand the socket over once its first PDU is buffered whole; wait for the rest otherwise."""
        try:
            data = sock.recv(_LOBBY_PEEK_BYTES, socket.MSG_PEEK | socket.MSG_DONTWAIT)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self._close(sock, None)  # the peer went away
            return
        if len(data) >= 6:
            pdu_type, _, length = struct.unpack(">BBL", data[:6])
            needed = min(length + 6, _LOBBY_PEEK_BYTES)
            if pdu_type != _ASSOCIATE_RQ or len(data) >= needed:
                self._hand_over(sock)  # pynetdicom answers anything else than a request as PS3.8 says
                return
        else:
            needed = 6
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT, needed)

    def _forget(self, sock: PeerSocket) -> None:
        self._waiting.pop(sock, None)
        with contextlib.suppress(KeyError, ValueError):
            self._selector.unregister(sock)

    def _close(self, sock: PeerSocket, reason: str | None) -> None:
        self._forget(sock)
        if reason:
            logger.info(reason, extra={"address": sock.peer})
        sock._on_close = None
        self._server.admission.closed(sock, waiting=True)
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
        sock.close()

    def _hand_over(self, sock: PeerSocket) -> None:
        self._forget(sock)
        self._server.admission.handed_over(sock)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT, 1)
            sock.setblocking(True)
            sock.settimeout(self._server.admission.limits.idle_seconds)
        except OSError:
            sock.close()
            return
        self._server.start_association(sock)


class WorklistServer(ThreadedAssociationServer):
    """pynetdicom's threaded server with the lobby in front: `process_request` parks the socket in the lobby,
    which starts pynetdicom's association (a thread, as ThreadedAssociationServer does) once the request is in.
    Each PDU is sent at once (TCP_NODELAY): an answer is several small writes (a pending response's command,
    its identifier, then the final status), which Nagle's algorithm held back until the peer's delayed ACK."""

    def __init__(self, *args: Any, admission: Admission, **kwargs: Any) -> None:
        self.admission = admission
        super().__init__(*args, **kwargs)
        self._lobby = _Lobby(self)

    def get_request(self) -> tuple[socket.socket, tuple[str, int]]:
        assert self.socket is not None
        client, address = self.socket.accept()
        sock = PeerSocket(client.family, client.type, client.proto, fileno=client.detach())
        sock.peer = str(peer_address(str(address[0])) or address[0])
        sock.admitted = False
        sock.registered = False
        sock._on_close = None
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.setsockopt(socket.IPPROTO_TCP, TCP_QUICKACK, 1)
        return sock, address

    def verify_request(self, request: Any, client_address: Any) -> bool:
        if self.admission.may_connect(request.peer):
            return True
        logger.info("dicom connection refused: too many from one address", extra={"address": request.peer})
        return False

    def process_request(self, request: Any, client_address: Any) -> None:
        self.admission.opened(request)
        request._on_close = self._closed
        request.client_address = client_address
        self._lobby.add(request)

    def start_association(self, sock: PeerSocket) -> None:
        try:
            socketserver.ThreadingMixIn.process_request(self, sock, sock.client_address)
        except Exception:
            logger.exception("dicom association thread not started")
            sock.close()

    def _closed(self, sock: PeerSocket) -> None:
        self.admission.closed(sock, waiting=False)

    def server_close(self) -> None:
        self._lobby.stop()
        super().server_close()
