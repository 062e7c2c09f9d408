"""The MLLP listener (manage.py hl7_listener): one asyncio process; the database work of each message runs
in a small thread pool, so a slow or silent connection holds a coroutine, never a worker thread.

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
import os
import signal
import socket
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from django.conf import settings
from django.db import close_old_connections, connections

from integrations.hl7 import inbound, mllp
from integrations.hl7.models import Hl7Sender

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


def _in_thread(function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    close_old_connections()  # a connection the database dropped is not reused
    try:
        return function(*args, **kwargs)
    finally:
        close_old_connections()


def _connections_close(barrier: threading.Barrier) -> None:
    with contextlib.suppress(threading.BrokenBarrierError):
        barrier.wait(timeout=5)
    connections.close_all()


class Listener:
    def __init__(self, *, host: str, port: int, threads: int = 4, reuse_port: bool = False) -> None:
        self.host, self.port = host, port
        self.reuse_port = reuse_port  # each process of --processes listens on the port with its own socket
        self.threads = threads
        self.executor = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="hl7")
        self.max_bytes = settings.HL7_LISTENER_MAX_MESSAGE_BYTES
        self.read_timeout = float(settings.HL7_LISTENER_READ_TIMEOUT_SECONDS)
        self.slots = asyncio.Semaphore(settings.HL7_LISTENER_MAX_CONNECTIONS)
        self.server: asyncio.Server | None = None
        self.connections: set[asyncio.Task[None]] = set()

    async def _run(self, function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.executor, lambda: _in_thread(function, *args, **kwargs))

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
                ack = await self._run(inbound.message_handle, payload, peer=peer)
                writer.write(mllp.frame(ack))
                await writer.drain()
            if payloads:
                deadline = loop.time() + self.read_timeout  # the next frame gets its own time

    async def start(self) -> None:
        self.server = await asyncio.start_server(
            self._connection, self.host, self.port, limit=65536, reuse_port=self.reuse_port or None
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
        # Each database thread closes its connection (a barrier makes every thread take one of these calls).
        barrier = threading.Barrier(self.threads)
        for _ in range(self.threads):
            self.executor.submit(_connections_close, barrier)
        self.executor.shutdown(wait=True)

    async def serve_until_stopped(self, stopped: asyncio.Event) -> None:
        await self.start()
        await stopped.wait()
        await self.stop()


def _serve(*, host: str, port: int, threads: int, reuse_port: bool = False) -> None:
    async def main() -> None:
        stopped = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stopped.set)
        await Listener(host=host, port=port, threads=threads, reuse_port=reuse_port).serve_until_stopped(stopped)

    asyncio.run(main())


def listener_run(*, host: str, port: int, threads: int = 4, processes: int = 1) -> None:
    """Run until SIGTERM or SIGINT (then drain: stop accepting, finish the messages in hand).

    With `processes` > 1, that many forked processes each listen on the port with SO_REUSEPORT (the kernel
    spreads new connections over them; one shared socket let whichever process woke first take every waiting
    connection), so message handling, Python work under one interpreter lock per process, uses more than one
    core. This process only supervises: it restarts a process that died and passes SIGTERM/SIGINT on to all. A message is still applied once whichever
    process takes it (inbound.message_handle's lock and unique key are in the database)."""
    if processes <= 1:
        _serve(host=host, port=port, threads=threads)
        return
    # Fail here, once, if the port is taken (else every process would fail and be restarted, forever).
    socket.create_server((host, port), reuse_port=True).close()
    connections.close_all()  # no database connection may be shared with the children
    children: dict[int, int] = {}  # pid -> slot
    stopping = False

    def spawn(slot: int) -> None:
        pid = os.fork()
        if pid == 0:  # the child: serve, then leave without running the parent's exit handlers
            code = 0
            try:
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
                signal.signal(signal.SIGINT, signal.SIG_DFL)
                _serve(host=host, port=port, threads=threads, reuse_port=True)
            except BaseException:
                logger.exception("HL7 listener process %d failed", slot)
                code = 1
            finally:
                os._exit(code)
        children[pid] = slot

    def stop(signum: int, _frame: Any) -> None:
        nonlocal stopping
        stopping = True
        for pid in list(children):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    logger.info("HL7 listener on %s:%d, %d processes", host, port, processes)
    for slot in range(processes):
        spawn(slot)
    while children:
        try:
            pid, status = os.wait()
        except ChildProcessError:
            break
        except InterruptedError:  # pragma: no cover - PEP 475 retries os.wait itself
            continue
        ended = children.pop(pid, -1)
        if ended >= 0 and not stopping:
            logger.error("HL7 listener process %d exited (status %d): restarting it", ended, status)
            time.sleep(1)
            if not stopping:
                spawn(ended)
