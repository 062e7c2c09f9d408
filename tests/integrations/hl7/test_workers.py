"""integrations.hl7.workers: the listener's worker processes (`hl7_listener --processes N`). Each message goes
to the least busy worker; a worker that dies fails only the messages it had in hand (their connections are
closed without an ACK, so their senders send them again) and is started again."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import threading
import time
from collections.abc import Callable, Coroutine
from typing import Any

import hl7
import pytest
from hl7.client import MLLPClient

from integrations.hl7.models import Hl7Sender
from integrations.hl7.workers import WorkerLost, WorkerPool
from tests.helpers import own_database_url
from tests.integrations.hl7.support import ListenerThread

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _workers_use_the_test_database(monkeypatch: pytest.MonkeyPatch) -> None:
    # The spawned workers read their settings from the environment: this test's database (a Unix socket for
    # the embedded PostgreSQL of `make test`).
    monkeypatch.setenv("DATABASE_URL", own_database_url())
    monkeypatch.setenv("LOG_LEVEL", "WARNING")


def run_in_own_loop(scenario: Callable[[], Coroutine[Any, Any, None]]) -> None:
    """asyncio.run in a thread of its own: an earlier test (the browser journeys' Playwright) may leave an
    event loop running in the main thread, where asyncio.run refuses to start another."""
    failure: list[BaseException] = []

    def target() -> None:
        try:
            asyncio.run(scenario())
        except BaseException as exc:  # re-raised in the test's thread
            failure.append(exc)

    thread = threading.Thread(target=target)
    thread.start()
    thread.join(timeout=180)
    assert not thread.is_alive(), "the scenario did not finish"
    if failure:
        raise failure[0]


def refused(control_id: str) -> bytes:
    """A message every worker answers AR (version 2.4) without touching the database."""
    return f"MSH|^~\\&|LIS|LAB|CLINIC|BLR|20261126||ORU^R01^ORU_R01|{control_id}|P|2.4\rPID|1||X\r".encode()


def msa(ack: str) -> tuple[str, str]:
    message = hl7.parse(ack)
    return str(message.segment("MSA")(1)), str(message.segment("MSA")(2))


def test_each_message_goes_to_the_least_busy_worker_and_is_answered() -> None:
    async def scenario() -> None:
        pool = WorkerPool(processes=2, threads=1)
        pool.start()
        try:
            tasks = [asyncio.create_task(pool.apply(refused(f"B{n}"), "127.0.0.1")) for n in range(5)]
            await asyncio.sleep(0)  # every task has sent its message; the workers are still starting
            assert pool.in_hand() == [3, 2]
            acks = await asyncio.wait_for(asyncio.gather(*tasks), timeout=60)
            assert [msa(ack) for ack in acks] == [("AR", f"B{n}") for n in range(5)]
            assert pool.in_hand() == [0, 0]
        finally:
            await pool.stop()
        assert all(not os.path.exists(f"/proc/{pid}/cmdline") or _zombie(pid) for pid in pool.pids() if pid)

    run_in_own_loop(scenario)


def _zombie(pid: int) -> bool:
    with open(f"/proc/{pid}/status") as status:
        return "zombie" in status.read()


def test_a_worker_that_dies_fails_only_its_messages_and_is_started_again() -> None:
    async def scenario() -> None:
        pool = WorkerPool(processes=2, threads=1)
        pool.start()
        try:
            first, second = pool.pids()
            doomed = asyncio.create_task(pool.apply(refused("D1"), "127.0.0.1"))  # worker 0
            spared = asyncio.create_task(pool.apply(refused("S1"), "127.0.0.1"))  # worker 1
            await asyncio.sleep(0)
            assert first is not None
            os.kill(first, signal.SIGKILL)  # before it could answer: it is still setting Django up
            with pytest.raises(WorkerLost, match="worker 0 ended"):
                await asyncio.wait_for(doomed, timeout=30)
            assert msa(await asyncio.wait_for(spared, timeout=60)) == ("AR", "S1")
            deadline = time.monotonic() + 30
            while pool.pids()[0] in (None, first):
                assert time.monotonic() < deadline
                await asyncio.sleep(0.1)
            assert pool.pids()[1] == second
            acks = await asyncio.wait_for(
                asyncio.gather(*(pool.apply(refused(f"A{n}"), "127.0.0.1") for n in range(4))), timeout=60
            )
            assert [msa(ack) for ack in acks] == [("AR", f"A{n}") for n in range(4)]
        finally:
            await pool.stop()

    run_in_own_loop(scenario)


def test_the_listener_closes_a_connection_whose_worker_died_without_an_ack_and_serves_the_next() -> None:
    Hl7Sender.objects.create(name="local", networks=["127.0.0.1/32"])
    listener = ListenerThread(processes=2).start()
    try:
        assert listener.pool is not None
        with socket.create_connection(("127.0.0.1", listener.port), timeout=30) as sock:
            sock.sendall(b"\x0b" + refused("K1") + b"\x1c\r")
            deadline = time.monotonic() + 10
            while sum(listener.pool.in_hand()) == 0:  # the message has reached a worker
                assert time.monotonic() < deadline
                time.sleep(0.01)
            for pid in listener.pool.pids():
                if pid is not None:
                    os.kill(pid, signal.SIGKILL)
            assert sock.recv(1024) == b""  # closed, no ACK
        deadline = time.monotonic() + 60
        while True:  # the workers are started again
            try:
                with MLLPClient("127.0.0.1", listener.port) as client:
                    assert msa(client.send_message(refused("K2").decode())) == ("AR", "K2")
                break
            except (ConnectionError, OSError):
                assert time.monotonic() < deadline
                time.sleep(0.5)
        assert listener.alive
    finally:
        listener.stop()
