"""Worker processes applying HL7 messages for the listener (`hl7_listener --processes N`, N > 1).

One listener process accepts the connections, reads the frames and enforces the allow-list, the size limit
and the read timeouts; each complete message goes to the worker process with the fewest messages in hand,
which applies it on one of its threads and sends the ACK back. Messages, not connections, are spread: the
kernel's SO_REUSEPORT spread connections over listening processes by a hash of their addresses, so eight
connections could land six on one process and two on the other, and that one process (one core, under its
interpreter lock) set the pace while the other idled; one busy analyzer on one connection kept one process
busy however many there were.

A worker that dies (killed, out of memory) fails the messages it had in hand: their connections are closed
without an ACK, so their senders send them again (each message's transaction was rolled back, or it was
committed and the repeat gets its stored ACK: inbound.message_handle is idempotent on the control id), and
the worker is started again. Workers are started with `spawn` (a fresh interpreter that sets Django up),
not forked from a process running an event loop and threads.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import multiprocessing
import os
import signal
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any, TypeVar

from django.db import close_old_connections, connections

logger = logging.getLogger("integrations.hl7.listener")

RESPAWN_DELAY_SECONDS = 1.0
T = TypeVar("T")


def run_with_fresh_connection(function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    close_old_connections()  # a connection the database dropped is not reused
    try:
        return function(*args, **kwargs)
    finally:
        close_old_connections()


def _connections_close(barrier: threading.Barrier) -> None:
    with contextlib.suppress(threading.BrokenBarrierError):
        barrier.wait(timeout=5)
    connections.close_all()


def executor_shutdown(executor: ThreadPoolExecutor, threads: int) -> None:
    """Finish what `executor` has in hand, then close each of its threads' database connections (a barrier
    makes every one of its `threads` threads take one of the closing calls)."""
    barrier = threading.Barrier(threads)
    for _ in range(threads):
        executor.submit(_connections_close, barrier)
    executor.shutdown(wait=True)


class WorkerLost(Exception):
    """The worker applying a message ended before answering it."""


def worker_main(conn: Connection, threads: int) -> None:
    """A worker process: apply each (id, payload, peer) received on `conn` on one of `threads` threads and send
    (id, ack, error) back; stop on None or when the listener is gone (end of the pipe)."""
    # The listener stops the workers itself once its connections are done: a signal to the whole process group
    # (Ctrl-C in a terminal, a container runtime's SIGTERM) must not kill a message half applied.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "clinic.settings")
    import django

    django.setup()
    # After setup: these import models.
    from integrations.hl7 import inbound

    send_lock = threading.Lock()
    executor = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="hl7-worker")

    def answer(request_id: int, payload: bytes, peer: str | None) -> None:
        ack: str | None = None
        error = ""
        try:
            ack = run_with_fresh_connection(inbound.message_handle, payload, peer=peer)
        except Exception as exc:  # message_handle never raises; a connection cleanup may
            logger.exception("HL7 worker: message %d from %s failed", request_id, peer)
            error = type(exc).__name__
        with send_lock, contextlib.suppress(OSError):  # the listener is gone: nobody to answer
            conn.send((request_id, ack, error))

    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            break
        if message is None:
            break
        executor.submit(answer, *message)
    executor_shutdown(executor, threads)  # the messages in hand are answered before the worker ends


@dataclass
class _Worker:
    slot: int
    process: Any
    conn: Connection
    in_hand: dict[int, asyncio.Future[str]] = field(default_factory=dict)


class WorkerPool:
    """`processes` worker processes of `threads` threads each, driven from the listener's event loop."""

    def __init__(self, *, processes: int, threads: int) -> None:
        self.processes, self.threads = processes, threads
        self._context = multiprocessing.get_context("spawn")
        self._workers: dict[int, _Worker] = {}
        self._ids = itertools.count(1)
        self._stopping = False
        self._available = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        for slot in range(self.processes):
            self._spawn(slot)

    def _spawn(self, slot: int) -> None:
        if self._stopping or self._loop is None:
            return
        parent_end, child_end = self._context.Pipe(duplex=True)
        process = self._context.Process(
            target=worker_main, args=(child_end, self.threads), name=f"hl7-worker-{slot}", daemon=True
        )
        process.start()
        child_end.close()
        worker = _Worker(slot=slot, process=process, conn=parent_end)
        self._workers[slot] = worker
        self._loop.add_reader(parent_end.fileno(), self._readable, worker)
        self._available.set()

    def _readable(self, worker: _Worker) -> None:
        try:
            while worker.conn.poll():
                request_id, ack, error = worker.conn.recv()
                future = worker.in_hand.pop(request_id, None)
                if future is None or future.done():
                    continue
                if ack is None:
                    future.set_exception(WorkerLost(f"the worker could not answer ({error})"))
                else:
                    future.set_result(ack)
        except (EOFError, OSError):
            self._lost(worker)

    def _lost(self, worker: _Worker) -> None:
        assert self._loop is not None
        self._loop.remove_reader(worker.conn.fileno())
        worker.conn.close()
        worker.process.join(timeout=5)
        if self._workers.get(worker.slot) is worker:
            del self._workers[worker.slot]
        if not self._workers:
            self._available.clear()
        for future in worker.in_hand.values():
            if not future.done():
                future.set_exception(WorkerLost(f"worker {worker.slot} ended (exit code {worker.process.exitcode})"))
        worker.in_hand.clear()
        if not self._stopping:
            logger.error("HL7 worker %d exited (exit code %s): starting it again", worker.slot, worker.process.exitcode)
            self._loop.call_later(RESPAWN_DELAY_SECONDS, self._spawn, worker.slot)

    def pids(self) -> list[int | None]:
        """Each slot's worker process id (None while it is being started again)."""
        return [self._workers[slot].process.pid if slot in self._workers else None for slot in range(self.processes)]

    def in_hand(self) -> list[int]:
        """Messages in hand per worker, by slot (for tests and logs)."""
        return [len(self._workers[slot].in_hand) if slot in self._workers else 0 for slot in range(self.processes)]

    async def apply(self, payload: bytes, peer: str | None, *, wait_for_worker: float = 30.0) -> str:
        """The ACK for `payload` from the least busy worker. WorkerLost when its worker ended first (or none
        came back within `wait_for_worker` seconds)."""
        if not self._workers:
            try:
                await asyncio.wait_for(self._available.wait(), timeout=wait_for_worker)
            except TimeoutError:
                raise WorkerLost("no HL7 worker is running") from None
        worker = min(self._workers.values(), key=lambda w: (len(w.in_hand), w.slot))
        assert self._loop is not None
        request_id = next(self._ids)
        future: asyncio.Future[str] = self._loop.create_future()
        worker.in_hand[request_id] = future
        try:
            worker.conn.send((request_id, payload, peer))
        except OSError:
            worker.in_hand.pop(request_id, None)
            raise WorkerLost(f"worker {worker.slot} is gone") from None
        return await future

    async def stop(self, timeout: float = 30.0) -> None:
        """Ask every worker to finish the messages in hand and end; wait for them (then kill what is left)."""
        self._stopping = True
        workers = list(self._workers.values())
        for worker in workers:
            with contextlib.suppress(OSError):
                worker.conn.send(None)
        loop = asyncio.get_running_loop()
        for worker in workers:
            await loop.run_in_executor(None, worker.process.join, timeout)
            if worker.process.is_alive():
                logger.error("HL7 worker %d did not stop: killing it", worker.slot)
                worker.process.kill()
                worker.process.join(5)
            with contextlib.suppress(ValueError, OSError):
                loop.remove_reader(worker.conn.fileno())
            worker.conn.close()
        self._workers.clear()
