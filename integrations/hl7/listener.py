"""The MLLP listener (manage.py hl7_listener): one asyncio process; the database work of each message runs
in a small thread pool, so a slow or silent connection holds a coroutine, never a worker thread. With
`--processes N` (N > 1) the messages are applied by N worker processes instead (integrations.hl7.workers),
each message by the least busy one, so N cores work whatever the number of connections.

Per connection: the peer must be inside the networks of an active Hl7Sender (else closed at once); each
frame must be complete within HL7_LISTENER_READ_TIMEOUT_SECONDS of its first byte, or of the connection's
start for the first one (slow-loris senders are closed); a frame over HL7_LISTENER_MAX_MESSAGE_BYTES gets an
AR and the connection is closed; bytes outside a frame close it. Messages of one connection are answered in
order. Nothing a sender sends can stop the listener: every handler error is caught and logged by ids.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import signal
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from django.conf import settings

from integrations.hl7 import inbound, mllp
from integrations.hl7.models import Hl7Sender
from integrations.hl7.workers import WorkerLost, WorkerPool, executor_shutdown, run_with_fresh_connection

logger = logging.getLogger("integrations.hl7.listener")
T = TypeVar("T")


def peer_allowed(address: str) -> bool:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    if ip.version == 6 and ip.ipv4_mapped:
        ip = ip.ipv4_mapped
    for networks in Hl7Sender.objects.filter(is_active=True).values_list("networks", flat=True):
        for network in networks:
            try:
                if ip in ipaddress.ip_network(network, strict=False):
                    return True
            except ValueError:
                continue
    return False


class Listener:
    def __init__(self, *, host: str, port: int, threads: int = 4, pool: WorkerPool | None = None) -> None:
        self.host, self.port = host, port
        self.pool = pool
        # With worker processes, this process's threads only check senders' addresses against the allow-list.
        self.threads = threads if pool is None else 2
        self.executor = ThreadPoolExecutor(max_workers=self.threads, thread_name_prefix="hl7")
        self.max_bytes = settings.HL7_LISTENER_MAX_MESSAGE_BYTES
        self.read_timeout = float(settings.HL7_LISTENER_READ_TIMEOUT_SECONDS)
        self.slots = asyncio.Semaphore(settings.HL7_LISTENER_MAX_CONNECTIONS)
        self.server: asyncio.Server | None = None
        self.connections: set[asyncio.Task[None]] = set()

    async def _run(self, function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.executor, lambda: run_with_fresh_connection(function, *args, **kwargs))

    async def _apply(self, payload: bytes, peer: str) -> str:
        if self.pool is not None:
            return await self.pool.apply(payload, peer)
        return await self._run(inbound.message_handle, payload, peer=peer)

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self.connections.add(task)
        peer = (writer.get_extra_info("peername") or ("?",))[0]
        try:
            if self.slots.locked():
                logger.warning(
                    "HL7 connection from %s refused: %d connections open", peer, settings.HL7_LISTENER_MAX_CONNECTIONS
                )
                return
            async with self.slots:
                if not await self._run(peer_allowed, peer):
                    logger.warning("HL7 connection from %s refused: not an allowed sender", peer)
                    return
                await self._serve(reader, writer, peer)
        except Exception:
            logger.exception("HL7 connection from %s: error", peer)
        finally:
            writer.close()
            with contextlib.suppress(OSError):  # the peer is gone already
                await writer.wait_closed()
            if task is not None:
                self.connections.discard(task)

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
                    ack = inbound.ack_build(
                        code="AR", control_id="", msh=None, problems=[inbound.Problem("100", str(exc))]
                    )
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
        self.server = await asyncio.start_server(self._connection, self.host, self.port, limit=65536)
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
