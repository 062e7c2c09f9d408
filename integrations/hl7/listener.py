"""The MLLP listener (manage.py hl7_listener): one asyncio process; the database work of each message runs
in a small thread pool, so a slow or silent connection holds a coroutine, never a worker thread. With
`--processes N` (N > 1) the messages are applied by N worker processes instead (integrations.hl7.workers),
each message by the least busy one, so N cores work whatever the number of connections.

Per connection: the peer must be inside the networks of an active Hl7Sender (else closed at once); each
frame must be complete within HL7_LISTENER_READ_TIMEOUT_SECONDS of its first byte, or of the connection's
start for the first one (slow-loris senders are closed); a frame over HL7_LISTENER_MAX_MESSAGE_BYTES gets an
AR and the connection is closed; bytes outside a frame close it. Messages of one connection are answered in
order. Nothing a sender sends can stop the listener: every handler error is caught and logged by ids.

One sender can never delay or reset another's connection:
- An address holds at most HL7_LISTENER_MAX_CONNECTIONS_PER_ADDRESS connections (counted from accept, so
  ones still being checked count too) and the listener HL7_LISTENER_MAX_CONNECTIONS in all; a connection
  over either is closed at once, before any lookup, so a flood from one address costs a counter each and
  cannot take the last slots of the total.
- The allow-list lookup runs on a thread of its own, never on the threads that apply messages, and
  connections arriving while one is under way share it: a flood of connections costs a lookup per lookup
  time, never a queue in front of another sender's messages. Nothing is cached between lookups, so a
  sender deactivated in the admin is refused from its next connection on.
- Refusals are logged once per address and reason in REFUSAL_LOG_INTERVAL, with the count of those not
  logged in between.
- The accept backlog is large enough that a burst of connects does not make the kernel drop another
  sender's SYN (a dropped SYN waits for the client's retransmission).
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import signal
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from django.conf import settings
from django.db import Error as DatabaseError

from integrations.hl7 import acks, inbound, mllp
from integrations.hl7.models import Hl7Sender
from integrations.hl7.workers import WorkerLost, WorkerPool, executor_shutdown, run_with_fresh_connection

logger = logging.getLogger("integrations.hl7.listener")
T = TypeVar("T")
Network = ipaddress.IPv4Network | ipaddress.IPv6Network

# Connections the kernel queues before the loop accepts them (it caps this at net.core.somaxconn).
ACCEPT_BACKLOG = 4096
# One log entry per address and reason in this many seconds.
REFUSAL_LOG_INTERVAL = 60.0


def peer_address(peername: Any) -> str:
    """The peer's IP address as text, an IPv4-mapped IPv6 address as the IPv4 one (one sender, one count)."""
    host = peername[0] if isinstance(peername, tuple) and peername else "?"
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return str(host)
    if ip.version == 6 and ip.ipv4_mapped:
        return str(ip.ipv4_mapped)
    return str(ip)


def allowed_networks() -> list[Network]:
    """The networks of the active senders (a database read)."""
    networks: list[Network] = []
    for texts in Hl7Sender.objects.filter(is_active=True).values_list("networks", flat=True):
        for text in texts:
            with contextlib.suppress(ValueError):
                networks.append(ipaddress.ip_network(text, strict=False))
    return networks


def address_allowed(address: str, networks: list[Network]) -> bool:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    if ip.version == 6 and ip.ipv4_mapped:
        ip = ip.ipv4_mapped
    return any(ip.version == network.version and ip in network for network in networks)


class AllowList:
    """The active senders' networks, read on a thread of its own; callers arriving while a read is under way
    share it (one read however many connections wait)."""

    def __init__(self) -> None:
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="hl7-allow")
        self._reading: asyncio.Future[list[Network]] | None = None

    async def networks(self) -> list[Network]:
        if self._reading is None or self._reading.done():
            loop = asyncio.get_running_loop()
            self._reading = loop.run_in_executor(self.executor, run_with_fresh_connection, allowed_networks)
        # Shielded: a waiting connection that is cancelled must not cancel the read the others wait for.
        return await asyncio.shield(self._reading)

    def shutdown(self) -> None:
        executor_shutdown(self.executor, 1)


class RefusalLog:
    """Refused connections logged once per address and reason per `interval`, with the number refused in
    between, so a flood does not flood the log."""

    MAX_KEYS = 4096

    def __init__(self, interval: float = REFUSAL_LOG_INTERVAL) -> None:
        self.interval = interval
        self._last: dict[tuple[str, str], tuple[float, int]] = {}  # (address, reason) -> (logged at, not logged)

    def note(self, address: str, reason: str) -> None:
        now = time.monotonic()
        key = (address, reason)
        logged_at, unlogged = self._last.get(key, (None, 0))
        if logged_at is not None and now - logged_at < self.interval:
            self._last[key] = (logged_at, unlogged + 1)
            return
        if len(self._last) >= self.MAX_KEYS:  # many addresses: forget the quiet ones
            self._last = {k: v for k, v in self._last.items() if now - v[0] < self.interval}
            if len(self._last) >= self.MAX_KEYS:
                self._last.clear()
        self._last[key] = (now, 0)
        if unlogged:
            logger.warning(
                "HL7 connection from %s refused: %s (%d more since the last entry)", address, reason, unlogged
            )
        else:
            logger.warning("HL7 connection from %s refused: %s", address, reason)


class Listener:
    def __init__(self, *, host: str, port: int, threads: int = 4, pool: WorkerPool | None = None) -> None:
        self.host, self.port = host, port
        self.pool = pool
        # With worker processes, the workers apply the messages and this process's one thread is idle.
        self.threads = threads if pool is None else 1
        self.executor = ThreadPoolExecutor(max_workers=self.threads, thread_name_prefix="hl7")
        self.allow_list = AllowList()
        self.refusals = RefusalLog()
        self.max_bytes = settings.HL7_LISTENER_MAX_MESSAGE_BYTES
        self.read_timeout = float(settings.HL7_LISTENER_READ_TIMEOUT_SECONDS)
        self.max_connections = settings.HL7_LISTENER_MAX_CONNECTIONS
        self.max_per_address = settings.HL7_LISTENER_MAX_CONNECTIONS_PER_ADDRESS
        self.open_by_address: Counter[str] = Counter()
        self.open_total = 0
        self.server: asyncio.Server | None = None
        self.connections: set[asyncio.Task[None]] = set()

    async def _run(self, function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.executor, lambda: run_with_fresh_connection(function, *args, **kwargs))

    async def _apply(self, payload: bytes, peer: str) -> str:
        if self.pool is not None:
            return await self.pool.apply(payload, peer)
        return await self._run(inbound.message_handle, payload, peer=peer)

    def _admit(self, peer: str) -> str:
        """Count the connection in, or say why it is refused (no lookup: this runs for every connect)."""
        if self.open_by_address[peer] >= self.max_per_address:
            return f"{self.max_per_address} connections open from this address"
        if self.open_total >= self.max_connections:
            return f"{self.max_connections} connections open"
        self.open_by_address[peer] += 1
        self.open_total += 1
        return ""

    def _release(self, peer: str) -> None:
        self.open_total -= 1
        self.open_by_address[peer] -= 1
        if self.open_by_address[peer] <= 0:
            del self.open_by_address[peer]

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self.connections.add(task)
        peer = peer_address(writer.get_extra_info("peername"))
        refused = self._admit(peer)
        try:
            if refused:
                self.refusals.note(peer, refused)
                return
            try:
                await self._serve_allowed(reader, writer, peer)
            finally:
                self._release(peer)
        except Exception:
            logger.exception("HL7 connection from %s: error", peer)
        finally:
            writer.close()
            with contextlib.suppress(OSError):  # the peer is gone already
                await writer.wait_closed()
            if task is not None:
                self.connections.discard(task)

    async def _serve_allowed(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, peer: str) -> None:
        try:
            networks = await self.allow_list.networks()
        except DatabaseError as exc:  # the database is away: refused, one line, the sender retries
            self.refusals.note(peer, f"the allow-list could not be read ({type(exc).__name__})")
            return
        if not address_allowed(peer, networks):
            self.refusals.note(peer, "not an allowed sender")
            return
        await self._serve(reader, writer, peer)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, peer: str) -> None:
        frames = mllp.FrameReader(self.max_bytes)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.read_timeout
        while True:
            remaining = deadline - loop.time()
            if remaining <= 0:
                logger.info("HL7 connection from %s closed: read timeout", peer)
                return
            try:
                data = await asyncio.wait_for(reader.read(65536), timeout=remaining)
            except TimeoutError:
                logger.info("HL7 connection from %s closed: read timeout", peer)
                return
            if not data:
                return
            try:
                payloads = frames.feed(data)
            except mllp.FrameError as exc:
                logger.info("HL7 connection from %s closed: %s", peer, exc)
                if "larger" in str(exc):
                    ack = acks.ack_build(code="AR", control_id="", msh=None, problems=[acks.Problem("100", str(exc))])
                    writer.write(mllp.frame(ack))
                    await writer.drain()
                return
            for payload in payloads:
                try:
                    ack = await self._apply(payload, peer)
                except WorkerLost as exc:
                    # No ACK: the sender sends the message again (applied once: inbound's control-id key).
                    logger.warning("HL7 connection from %s closed without an ACK: %s", peer, exc)
                    return
                writer.write(mllp.frame(ack))
                await writer.drain()
            if payloads:
                deadline = loop.time() + self.read_timeout  # the next frame gets its own time

    async def start(self) -> None:
        if self.pool is not None:
            self.pool.start()
        self.server = await asyncio.start_server(
            self._connection, self.host, self.port, limit=65536, backlog=ACCEPT_BACKLOG
        )
        sockets = self.server.sockets or ()
        if sockets:
            self.port = sockets[0].getsockname()[1]
        logger.info("HL7 listener on %s:%d", self.host, self.port)

    async def stop(self, grace: float = 10) -> None:
        """Stop accepting, then give open connections `grace` seconds to finish their message."""
        if self.server is not None:
            self.server.close()
        if self.connections:
            await asyncio.wait(set(self.connections), timeout=grace)
        for task in list(self.connections):
            task.cancel()
        if self.pool is not None:
            await self.pool.stop()
        executor_shutdown(self.executor, self.threads)
        self.allow_list.shutdown()

    async def serve_until_stopped(self, stopped: asyncio.Event) -> None:
        await self.start()
        await stopped.wait()
        await self.stop()


def listener_run(*, host: str, port: int, threads: int = 4, processes: int = 1) -> None:
    """Run until SIGTERM or SIGINT (then drain: stop accepting, finish the messages in hand).

    With `processes` > 1, that many worker processes of `threads` threads each apply the messages (see
    integrations.hl7.workers; they are spawned, so they share nothing of this process's); this process
    accepts, reads and answers, and starts a worker again if one dies."""

    async def main() -> None:
        stopped = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stopped.set)
        pool = WorkerPool(processes=processes, threads=threads) if processes > 1 else None
        await Listener(host=host, port=port, threads=threads, pool=pool).serve_until_stopped(stopped)

    asyncio.run(main())
