"""The listener (integrations.hl7.listener) on a free port, fed by the `hl7` package's MLLP client and by raw
sockets: ORU^R01 applied through the lab results service (flags, events) and acknowledged AA; the same
control id answered again without applying twice; AE with ERR for an unknown order or a bad value; AR for
another version, another message type or no MSH; malformed frames, 1 MB messages, slow senders and
addresses not allowed closed without stopping the listener."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import hl7
import pytest
from django.core.management import CommandError, call_command
from hl7.client import MLLPClient

from integrations.hl7.models import Hl7ReceivedMessage, Hl7Sender
from integrations.webhooks.models import WebhookEvent
from lab.models import LabResult
from tests.helpers import own_database_url
from tests.integrations.hl7.support import ListenerThread, free_port, lab_world, oru

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def listener(settings: Any) -> Any:
    settings.HL7_LISTENER_READ_TIMEOUT_SECONDS = 1
    settings.HL7_LISTENER_MAX_MESSAGE_BYTES = 100_000
    Hl7Sender.objects.create(name="local lab", networks=["127.0.0.1/32"])
    running = ListenerThread().start()
    yield running
    running.stop()


def send(listener: ListenerThread, text: str) -> hl7.Message:
    with MLLPClient("127.0.0.1", listener.port) as client:
        return hl7.parse(client.send_message(text))


def msa(ack: hl7.Message) -> tuple[str, str]:
    return str(ack.segment("MSA")(1)), str(ack.segment("MSA")(2))


def test_an_oru_is_applied_once_with_flags_and_events(listener: Any) -> None:
    world = lab_world()
    accession = world["items"]["CBC"].accession_number
    text = oru(
        "MSG0001",
        accession,
        world["patient"].patient_id,
        [("NM", "HGB", "5.5", "g/dL"), ("NM", "PLT", "300", "10*3/uL")],
    )

    ack = send(listener, text)
    assert msa(ack) == ("AA", "MSG0001")
    results = {r.analyte.code: r for r in LabResult.objects.select_related("analyte")}
    assert {code: (str(r.value_quantity), r.flag, r.status, r.performer) for code, r in results.items()} == {
        "HGB": ("5.5000", "LL", "final", "K Menon"),
        "PLT": ("300.0000", "N", "final", "K Menon"),
    }
    assert WebhookEvent.objects.filter(type="lab_result.critical").count() == 1

    again = send(listener, text)
    assert str(again) == str(ack)  # the stored ACK, byte for byte
    assert LabResult.objects.count() == 2
    assert Hl7ReceivedMessage.objects.get().order_ids == [world["order"].pk]
    assert listener.alive


def test_unknown_order_and_bad_value_are_ae_with_err_and_change_nothing(listener: Any) -> None:
    world = lab_world()
    accession = world["items"]["CBC"].accession_number
    unknown = send(listener, oru("MSG0002", "NOPE-1", world["patient"].patient_id, [("NM", "HGB", "13", "g/dL")]))
    assert msa(unknown) == ("AE", "MSG0002")
    assert str(unknown.segment("ERR")(3)).startswith("204")
    bad = send(listener, oru("MSG0003", accession, world["patient"].patient_id, [("NM", "HGB", "abc", "g/dL")]))
    assert msa(bad) == ("AE", "MSG0003")
    err = bad.segment("ERR")
    assert str(err(2)) == "OBX^1^5"
    assert str(err(3)).startswith("102")
    wrong_unit = send(listener, oru("MSG0004", accession, world["patient"].patient_id, [("NM", "HGB", "13", "mg")]))
    assert msa(wrong_unit)[0] == "AE"
    assert LabResult.objects.count() == 0
    assert Hl7ReceivedMessage.objects.count() == 0
    # Fixed and sent again under the same control id: an AE was not stored, so it is applied now.
    fixed = send(listener, oru("MSG0003", accession, world["patient"].patient_id, [("NM", "HGB", "13", "g/dL")]))
    assert msa(fixed) == ("AA", "MSG0003")


def test_wrong_version_other_message_and_no_msh_are_ar(listener: Any) -> None:
    world = lab_world()
    accession = world["items"]["CBC"].accession_number
    old = send(
        listener, oru("V1", accession, world["patient"].patient_id, [("NM", "HGB", "13", "g/dL")], version="2.3")
    )
    assert msa(old) == ("AR", "V1")
    assert str(old.segment("ERR")(3)).startswith("203")
    adt = "MSH|^~\\&|LIS|LAB|CLINIC|BLR|20261126||ADT^A01^ADT_A01|V2|P|2.5.1\rPID|1||X\r"
    assert msa(send(listener, adt)) == ("AR", "V2")
    with socket.create_connection(("127.0.0.1", listener.port), timeout=5) as sock:
        sock.sendall(b"\x0bPID|1||X\r\x1c\r")
        answer = sock.recv(65536)
    assert b"MSA|AR|" in answer
    assert LabResult.objects.count() == 0


def _closed(sock: socket.socket, timeout: float = 5) -> bytes:
    sock.settimeout(timeout)
    data = b""
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            return data
        data += chunk


def test_malformed_oversized_slow_and_disallowed_connections_are_closed_and_the_listener_lives(listener: Any) -> None:
    world = lab_world()
    with socket.create_connection(("127.0.0.1", listener.port), timeout=5) as sock:
        sock.sendall(b"GET / HTTP/1.1\r\n\r\n")  # not MLLP
        assert _closed(sock) == b""
    with socket.create_connection(("127.0.0.1", listener.port), timeout=5) as sock:
        with contextlib.suppress(OSError):
            sock.sendall(b"\x0bMSH|^~\\&|" + b"X" * 200_000 + b"\x1c\r")
        answer = _closed(sock)
    assert b"MSA|AR" in answer
    with socket.create_connection(("127.0.0.1", listener.port), timeout=5) as sock:
        started = time.monotonic()
        sock.sendall(b"\x0bMSH|^~")  # and nothing more: slow-loris
        assert _closed(sock) == b""
        assert time.monotonic() - started < 4
    Hl7Sender.objects.update(networks=["10.0.0.0/8"])
    with socket.create_connection(("127.0.0.1", listener.port), timeout=5) as sock:
        sock.sendall(b"\x0b" + oru("D1", "X", "Y", []).encode() + b"\x1c\r")
        assert _closed(sock) == b""
    Hl7Sender.objects.update(networks=["127.0.0.0/8"])
    accession = world["items"]["CBC"].accession_number
    assert (
        msa(send(listener, oru("OK1", accession, world["patient"].patient_id, [("NM", "HGB", "13", "g/dL")])))[0]
        == "AA"
    )
    assert listener.alive
    assert listener.error is None


def test_the_same_message_on_two_connections_at_once_is_applied_once(listener: Any) -> None:
    world = lab_world()
    accession = world["items"]["CBC"].accession_number
    text = oru(
        "TWICE", accession, world["patient"].patient_id, [("NM", "HGB", "13", "g/dL"), ("NM", "PLT", "200", "10*3/uL")]
    )
    barrier = threading.Barrier(2)

    def one() -> str:
        with socket.create_connection(("127.0.0.1", listener.port), timeout=10) as sock:
            barrier.wait()
            sock.sendall(b"\x0b" + text.encode() + b"\x1c\r")
            data = b""
            while not data.endswith(b"\x1c\r"):
                data += sock.recv(65536)
            return data.decode()

    with ThreadPoolExecutor(2) as pool:
        first, second = pool.map(lambda _: one(), range(2))
    assert first == second
    assert "MSA|AA|TWICE" in first
    assert LabResult.objects.count() == 2
    assert Hl7ReceivedMessage.objects.count() == 1


def _listener_process(settings: Any, port: int, *extra: str) -> subprocess.Popen[bytes]:
    """`manage.py hl7_listener` as the hl7-listener role runs it, against this test's database, once it listens."""
    env = {
        **os.environ,
        "DATABASE_URL": own_database_url(),  # a Unix socket for the embedded PostgreSQL of `make test`
        "LOG_LEVEL": "WARNING",
    }
    process = subprocess.Popen(  # noqa: S603 - our own command line
        [sys.executable, "manage.py", "hl7_listener", "--host", "127.0.0.1", "--port", str(port), *extra],
        cwd=Path(__file__).resolve().parents[3],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return process
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                raise AssertionError(process.stderr.read() if process.stderr else "not listening") from None
            time.sleep(0.2)


def _workers(pid: int) -> set[int]:
    """The listener's worker processes (started by multiprocessing's spawn; its resource tracker is not one)."""
    children = {int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()}
    return {
        child
        for child in children
        if Path(f"/proc/{child}").exists() and b"spawn_main" in Path(f"/proc/{child}/cmdline").read_bytes()
    }


def test_worker_processes_apply_messages_a_dead_one_is_replaced_and_sigterm_stops_all(settings: Any) -> None:
    """--processes 2: two worker processes apply what the one listening process reads (a real ORU^R01 is
    applied once, AA); a worker killed outright is started again and messages keep being answered; SIGTERM
    stops the listener and every worker."""
    Hl7Sender.objects.create(name="local", networks=["127.0.0.1"])
    world = lab_world()
    accession = world["items"]["CBC"].accession_number
    port = free_port()
    process = _listener_process(settings, port, "--processes", "2", "--threads", "2")

    def refused_version(control_id: str) -> tuple[str, str]:
        text = f"MSH|^~\\&|LIS|LAB|CLINIC|BLR|20261126||ORU^R01^ORU_R01|{control_id}|P|2.4\rPID|1||X\r"
        with MLLPClient("127.0.0.1", port) as client:
            return msa(hl7.parse(client.send_message(text)))

    try:
        workers = _workers(process.pid)
        assert len(workers) == 2
        # Two at a time: with the connections just closed, still within the per-address limit (docs/hl7-inbound.md).
        with ThreadPoolExecutor(2) as pool:
            answers = list(pool.map(refused_version, [f"M{n}" for n in range(16)]))
        assert answers == [("AR", f"M{n}") for n in range(16)]
        result = oru("W1", accession, world["patient"].patient_id, [("NM", "HGB", "13.1", "g/dL")], status="P")
        with MLLPClient("127.0.0.1", port) as client:
            assert msa(hl7.parse(client.send_message(result))) == ("AA", "W1")
            assert msa(hl7.parse(client.send_message(result))) == ("AA", "W1")  # the stored ACK
        assert LabResult.objects.filter(item__accession_number=accession, analyte__code="HGB").count() == 1
        assert Hl7ReceivedMessage.objects.filter(control_id="W1").count() == 1

        killed = min(workers)
        os.kill(killed, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while not (len(_workers(process.pid)) == 2 and killed not in _workers(process.pid)):
            assert time.monotonic() < deadline, _workers(process.pid)
            time.sleep(0.2)
        assert [refused_version(f"N{n}") for n in range(4)] == [("AR", f"N{n}") for n in range(4)]

        workers = _workers(process.pid)
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0
        for worker in workers:
            assert not Path(f"/proc/{worker}").exists() or "zombie" in Path(f"/proc/{worker}/status").read_text()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_the_command_refuses_a_process_or_thread_count_out_of_range() -> None:
    with pytest.raises(CommandError, match="--processes"):
        call_command("hl7_listener", "--processes", "0")
    with pytest.raises(CommandError, match="--threads"):
        call_command("hl7_listener", "--threads", "65")


def test_an_imaging_report_and_an_amendment_and_a_listener_restart(listener: Any) -> None:
    world = lab_world()
    patient_id = world["patient"].patient_id
    xray = world["items"]["XR-CHEST"].accession_number
    report = oru("IMG1", xray, patient_id, [("TX", "18782-3", "No consolidation.~Heart size normal.", "")])
    assert msa(send(listener, report)) == ("AA", "IMG1")
    stored = LabResult.objects.get(item__accession_number=xray)
    assert (stored.analyte_id, stored.value_text, stored.status) == (
        None,
        "No consolidation.\nHeart size normal.",
        "final",
    )

    cbc = world["items"]["CBC"].accession_number
    assert msa(send(listener, oru("F1", cbc, patient_id, [("NM", "HGB", "13", "g/dL")])))[0] == "AA"
    over_final = send(listener, oru("F2", cbc, patient_id, [("NM", "HGB", "14", "g/dL")]))
    assert msa(over_final)[0] == "AE"  # a final result is corrected only by an amendment
    amended = oru("C1", cbc, patient_id, [("NM", "HGB", "14", "g/dL")], status="C") + "NTE|1||Sample re-run\r"
    assert msa(send(listener, amended)) == ("AA", "C1")
    versions = list(LabResult.objects.filter(analyte__code="HGB").order_by("version"))
    assert [(v.version, v.status, v.current, v.reason) for v in versions] == [
        (1, "final", False, ""),
        (2, "amended", True, "Sample re-run"),
    ]
    assert WebhookEvent.objects.filter(type="lab_result.amended").count() == 1

    # The listener restarts; a sender that never saw the ACK sends the message again: answered, not re-applied.
    listener.stop()
    restarted = ListenerThread().start()
    try:
        assert msa(send(restarted, amended)) == ("AA", "C1")
    finally:
        restarted.stop()
    assert LabResult.objects.filter(analyte__code="HGB").count() == 2
