"""The listener's connection limits (docs/hl7-inbound.md): one sender can never delay or reset another's
connection. Real sockets against the listener in a thread; each sender connects from its own loopback
address (Linux routes all of 127.0.0.0/8 to lo, so binding the client socket picks the source address).
The flooding address is a registered sender too: the limit must hold for allowed senders, not only for
strangers."""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import hl7
import pytest

from integrations.hl7 import listener as listener_module
from integrations.hl7.models import Hl7Sender
from tests.helpers import own_database_url
from tests.integrations.hl7.support import ListenerThread, lab_world, oru, wait_for

pytestmark = pytest.mark.django_db(transaction=True)

FLOODER = "127.0.0.2"
LAB = "127.0.0.3"
STRANGER = "127.0.0.5"  # no sender's network
PER_ADDRESS = 4
# What "not delayed" means here: far above an ORU's own time on this machine, far below a kernel SYN retry or
# a read timeout, which are what a starved or reset connection would show.
BOUND_SECONDS = 2.0


def connect_from(source: str, port: int, timeout: float = 5) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    sock.bind((source, 0))
    sock.connect(("127.0.0.1", port))
    return sock


def exchange(sock: socket.socket, text: str) -> hl7.Message:
    """One MLLP frame out, its ACK back (parsed by the `hl7` package)."""
    sock.sendall(b"\x0b" + text.encode() + b"\x1c\r")
    data = b""
    while not data.endswith(b"\x1c\r"):
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("closed without an ACK")
        data += chunk
    return hl7.parse(data.strip(b"\x0b\x1c\r").decode())


def msa(ack: hl7.Message) -> tuple[str, str]:
    return str(ack.segment("MSA")(1)), str(ack.segment("MSA")(2))


def still_open(sock: socket.socket) -> bool:
    """Open: nothing to read yet; closed by the listener: end of stream or a reset."""
    sock.setblocking(False)
    try:
        return sock.recv(1) != b""
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        sock.settimeout(5)


@contextlib.contextmanager
def held(source: str, port: int, count: int) -> Iterator[list[socket.socket]]:
    sockets: list[socket.socket] = []
    try:
        for _ in range(count):
            sockets.append(connect_from(source, port))
        yield sockets
    finally:
        for sock in sockets:
            sock.close()


@contextlib.contextmanager
def churn(source: str, port: int) -> Iterator[list[int]]:
    """Connect and drop from `source` in a loop until the block ends; yields the running count."""
    stop = threading.Event()
    count = [0]

    def run() -> None:
        while not stop.is_set():
            with contextlib.suppress(OSError):
                connect_from(source, port, timeout=1).close()
                count[0] += 1
            # Hundreds a second still, but the flood must not take the CPU this test process shares with the
            # listener it measures (a remote flooder spends its own).
            time.sleep(0.001)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield count
    finally:
        stop.set()
        thread.join(5)


@pytest.fixture
def world(settings: Any) -> dict[str, Any]:
    settings.HL7_LISTENER_READ_TIMEOUT_SECONDS = 30  # held connections stay held for the whole test
    settings.HL7_LISTENER_MAX_CONNECTIONS_PER_ADDRESS = PER_ADDRESS
    world = lab_world()
    for name, network, application in (("flood", FLOODER, "FLOOD"), ("city lab", LAB, "LIS")):
        sender = Hl7Sender.objects.create(
            name=name,
            networks=[f"{network}/32"],
            sending_application=application,
            sending_facility="CITYLAB",
        )
        sender.branches.add(world["blr"])
    return world


@pytest.fixture
def running(world: dict[str, Any]) -> Iterator[ListenerThread]:
    listener = ListenerThread().start()
    yield listener
    listener.stop()


class LabSender:
    """The other sender: ORUs for the collected CBC, preliminary HGB values, each timed."""

    def __init__(self, world: dict[str, Any], port: int) -> None:
        self.accession = world["items"]["CBC"].accession_number
        self.patient_id = world["patient"].patient_id
        self.port = port
        self.sent = 0
        self.timings: list[float] = []

    def message(self) -> str:
        self.sent += 1
        value = f"{12 + self.sent % 3}.{self.sent % 10}"
        return oru(f"LAB{self.sent:04d}", self.accession, self.patient_id, [("NM", "HGB", value, "g/dL")], status="P")

    def send(self, sock: socket.socket) -> tuple[str, str]:
        text = self.message()
        started = time.monotonic()
        answer = msa(exchange(sock, text))
        self.timings.append(time.monotonic() - started)
        return answer

    def round(self, count: int) -> list[tuple[str, str]]:
        """`count` messages on one connection, then `count` each on a connection of its own."""
        answers = []
        started = time.monotonic()
        with connect_from(LAB, self.port) as sock:
            answers += [self.send(sock) for _ in range(count)]
        for _ in range(count):
            with connect_from(LAB, self.port) as sock:
                answers.append(self.send(sock))
        assert time.monotonic() - started < BOUND_SECONDS * 2 * count
        return answers


def test_seventy_connections_from_one_sender_neither_delay_nor_reset_another_senders_results(
    running: ListenerThread, world: dict[str, Any], caplog: Any
) -> None:
    caplog.set_level(logging.INFO, logger="integrations.hl7.listener")
    lab = LabSender(world, running.port)
    with held(FLOODER, running.port, 70) as flood:
        wait_for(lambda: sum(still_open(sock) for sock in flood) == PER_ADDRESS, timeout=5)
        with churn(FLOODER, running.port) as reconnects:  # and it keeps reconnecting meanwhile
            answers = lab.round(10)
        served = [sock for sock in flood if still_open(sock)]
        assert len(served) == PER_ADDRESS
        # The four it holds are served (a message of its own is answered), so they were the admitted ones.
        assert msa(exchange(served[0], oru("F1", "NOPE", "X", [])))[1] == "F1"

    assert answers == [("AA", f"LAB{n:04d}") for n in range(1, 21)]
    assert max(lab.timings) < BOUND_SECONDS, lab.timings
    assert reconnects[0] > 0
    refusals = [r.getMessage() for r in caplog.records if "refused" in r.getMessage()]
    # 66 refused at once and more while churning: one entry for the address, not one per connection.
    assert refusals == [f"HL7 connection from {FLOODER} refused: {PER_ADDRESS} connections open from this address"]


@pytest.mark.parametrize("idle", [10, 50])
def test_idle_connections_from_one_address_do_not_block_another(
    running: ListenerThread, world: dict[str, Any], idle: int
) -> None:
    lab = LabSender(world, running.port)
    with held(FLOODER, running.port, idle) as flood:
        wait_for(lambda: sum(still_open(sock) for sock in flood) == PER_ADDRESS, timeout=5)
        answers = lab.round(5)
        assert sum(still_open(sock) for sock in flood) == PER_ADDRESS

    assert answers == [("AA", f"LAB{n:04d}") for n in range(1, 11)]
    assert max(lab.timings) < BOUND_SECONDS, lab.timings


def test_one_address_cannot_take_the_last_slots_of_the_total(settings: Any, world: dict[str, Any]) -> None:
    settings.HL7_LISTENER_MAX_CONNECTIONS = PER_ADDRESS + 2
    listener = ListenerThread().start()
    try:
        lab = LabSender(world, listener.port)
        with held(FLOODER, listener.port, 20) as flood:
            wait_for(lambda: sum(still_open(sock) for sock in flood) == PER_ADDRESS, timeout=5)
            with connect_from(LAB, listener.port) as first, connect_from(LAB, listener.port) as second:
                assert [lab.send(first), lab.send(second)] == [("AA", "LAB0001"), ("AA", "LAB0002")]
                # The total is reached now: a third address is refused, the two admitted are not disturbed.
                with connect_from(STRANGER, listener.port) as third:
                    third.settimeout(5)
                    assert third.recv(1) == b""
                assert lab.send(first) == ("AA", "LAB0003")
    finally:
        listener.stop()


def test_a_stranger_flooding_connections_uses_no_message_thread_and_shares_lookups(
    running: ListenerThread, world: dict[str, Any], monkeypatch: Any
) -> None:
    """Connections from an address of no sender are refused after the allow-list read, which runs on its own
    thread (never one of those applying messages) and is shared by the connections waiting for it."""
    reads: list[str] = []
    real = listener_module.allowed_networks

    def counted() -> Any:
        reads.append(threading.current_thread().name)
        time.sleep(0.05)  # a slow database: connections arriving meanwhile share this read
        return real()

    monkeypatch.setattr(listener_module, "allowed_networks", counted)
    lab = LabSender(world, running.port)
    strangers, answers = 0, []
    with churn(STRANGER, running.port) as stranger_connects, churn(FLOODER, running.port):
        for _ in range(5):
            with held(STRANGER, running.port, 20) as flood:
                strangers += len(flood)
                answers += lab.round(2)
                wait_for(lambda flood=flood: not any(still_open(sock) for sock in flood), timeout=5)
    strangers += stranger_connects[0]

    assert answers == [("AA", f"LAB{n:04d}") for n in range(1, 21)]
    assert max(lab.timings) < BOUND_SECONDS, lab.timings
    assert reads
    assert {name.rsplit("_", 1)[0] for name in reads} == {"hl7-allow"}
    assert len(reads) < strangers / 2, (len(reads), strangers)


def test_a_sender_is_refused_from_its_next_connection_once_deactivated(running: ListenerThread, world: Any) -> None:
    lab = LabSender(world, running.port)
    with connect_from(LAB, running.port) as sock:
        assert lab.send(sock) == ("AA", "LAB0001")
    Hl7Sender.objects.filter(name="city lab").update(is_active=False)
    with connect_from(LAB, running.port) as sock:
        assert sock.recv(1) == b""


def test_worker_processes_keep_the_limits(world: dict[str, Any], monkeypatch: Any) -> None:
    # The spawned workers read their settings from the environment: this test's database (a Unix socket for
    # the embedded PostgreSQL of `make test`).
    monkeypatch.setenv("DATABASE_URL", own_database_url())
    listener = ListenerThread(processes=2).start()
    try:
        lab = LabSender(world, listener.port)
        with held(FLOODER, listener.port, 30) as flood:
            wait_for(lambda: sum(still_open(sock) for sock in flood) == PER_ADDRESS, timeout=5)
            answers = lab.round(3)
            assert sum(still_open(sock) for sock in flood) == PER_ADDRESS
        assert answers == [("AA", f"LAB{n:04d}") for n in range(1, 7)]
        # The first answers wait for the spawned workers' start; after that, within the bound.
        assert max(lab.timings[1:]) < BOUND_SECONDS, lab.timings
    finally:
        listener.stop()
