"""Who gets an association, and for how long (integrations.dicom.admission, server.handle_requested): the
called AE title, the calling AE title's addresses, the ARTIM and idle timeouts, the association limits per
address and in all, and hostile peers that connect and send nothing, while a registered modality queries with
DCMTK's echoscu/findscu and with pynetdicom as a second SCU.

Loopback has a whole /8: a peer "at another address" binds its socket to 127.0.0.2 and up."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any

import pytest
from pydicom.dataset import Dataset
from pynetdicom import AE

from integrations.dicom.models import DicomCallingAE
from integrations.dicom.server import worklist_serve
from tests.integrations.dicom.conftest import IST, SERVER_AE, DicomWorld, findscu, free_port

VERIFICATION = "1.2.840.10008.1.1"
WORKLIST_FIND = "1.2.840.10008.5.1.4.31"


@pytest.fixture
def serve(world: DicomWorld, settings: Any) -> Iterator[Callable[..., int]]:
    """Start the worklist with these settings (small timeouts for the tests); returns its port."""
    running: list[Any] = []

    def start(**overrides: Any) -> int:
        settings.DICOM_TIMEOUT_SECONDS = 10
        for name, value in overrides.items():
            setattr(settings, name, value)
        port = free_port()
        running.append(worklist_serve(host="127.0.0.1", port=port))
        return port

    yield start
    for server in running:
        server.shutdown()


def scu_associate(port: int, *, calling: str = "BLR_CT1", called: str = SERVER_AE, source: str = "127.0.0.1") -> Any:
    """A pynetdicom association (the second, independent SCU) from `source`."""
    ae = AE(ae_title=calling)
    ae.add_requested_context(VERIFICATION)
    ae.add_requested_context(WORKLIST_FIND)
    ae.acse_timeout = ae.network_timeout = ae.dimse_timeout = 5
    return ae.associate("127.0.0.1", port, ae_title=called, bind_address=(source, 0))


def rejection(assoc: Any) -> tuple[int, int, int] | None:
    """(result, source, reason) of the A-ASSOCIATE-RJ the association got, None when accepted."""
    if assoc.is_established:
        return None
    assert assoc.is_rejected
    primitive = assoc.acceptor.primitive
    return (primitive.result, primitive.result_source, primitive.diagnostic)


def scu_echo_and_find(port: int, *, source: str = "127.0.0.1") -> tuple[int, list[str]]:
    """C-ECHO then a C-FIND for AccessionNumber on one pynetdicom association: the echo status and the
    accession numbers answered."""
    assoc = scu_associate(port, source=source)
    assert assoc.is_established, rejection(assoc)
    try:
        echo = assoc.send_c_echo()
        query = Dataset()
        query.AccessionNumber = ""
        answers = [
            str(identifier.AccessionNumber)
            for status, identifier in assoc.send_c_find(query, WORKLIST_FIND)
            if status and status.Status == 0xFF00
        ]
        return int(echo.Status), answers
    finally:
        assoc.release()


def echoscu(port: int, *, called: str = SERVER_AE) -> subprocess.CompletedProcess[str]:
    return subprocess.run(  # noqa: S603 - a fixed command line
        ["echoscu", "-v", "-aet", "BLR_CT1", "-aec", called, "-to", "10", "127.0.0.1", str(port)],  # noqa: S607
        capture_output=True,
        text=True,
        timeout=30,
    )


@contextlib.contextmanager
def idle_sockets(port: int, count: int, *, sources: list[str]) -> Iterator[list[socket.socket]]:
    """`count` plain TCP connections to the worklist that never send a byte, from `sources` in turn."""
    opened: list[socket.socket] = []
    try:
        for number in range(count):
            idle = socket.socket()
            idle.bind((sources[number % len(sources)], 0))
            idle.connect(("127.0.0.1", port))
            opened.append(idle)
        time.sleep(0.2)  # all accepted by the server
        yield opened
    finally:
        for idle in opened:
            idle.close()


def closed_by_server(sock: socket.socket, *, within: float) -> bool:
    sock.settimeout(within)
    try:
        return sock.recv(1) == b""
    except TimeoutError:
        return False
    except ConnectionResetError:
        return True


pytestmark = pytest.mark.usefixtures("dcmtk")


def test_a_request_calling_another_ae_title_is_rejected(serve: Callable[..., int]) -> None:
    port = serve(DICOM_AE_TITLE="CLINIC_MWL")

    done = echoscu(port, called="SOMEONE_ELSE")
    assert done.returncode != 0
    assert "Association Rejected" in done.stdout + done.stderr
    assert "Called AE Title Not Recognized" in done.stdout + done.stderr
    assert rejection(scu_associate(port, called="ANY-SCP")) == (0x01, 0x01, 0x07)
    assert echoscu(port).returncode == 0


def test_the_server_answers_to_the_ae_title_of_the_setting(serve: Callable[..., int]) -> None:
    port = serve(DICOM_AE_TITLE="RADIOLOGY_MWL")
    assert rejection(scu_associate(port, called=SERVER_AE)) == (0x01, 0x01, 0x07)
    assert rejection(scu_associate(port, called="RADIOLOGY_MWL")) is None


def test_a_calling_ae_title_is_accepted_only_from_its_networks(serve: Callable[..., int]) -> None:
    port = serve()
    DicomCallingAE.objects.filter(ae_title="BLR_CT1").update(networks=["127.0.0.2/31"])
    assert rejection(scu_associate(port, source="127.0.0.1")) == (0x01, 0x01, 0x03)
    assert rejection(scu_associate(port, source="127.0.0.3")) is None
    DicomCallingAE.objects.filter(ae_title="BLR_CT1").update(networks=[], any_address=True)
    assert rejection(scu_associate(port, source="127.0.0.9")) is None


@pytest.mark.parametrize(
    ("count", "sources"),
    [
        (10, ["127.0.0.1"]),  # from the modality's own address
        (10, [f"127.0.0.{n}" for n in range(2, 12)]),
        (50, [f"127.0.0.{n}" for n in range(2, 52)]),
    ],
    ids=["10-same-address", "10-addresses", "50-addresses"],
)
def test_idle_connections_cannot_lock_out_a_registered_modality(
    world: DicomWorld, serve: Callable[..., int], count: int, sources: list[str]
) -> None:
    """The reported attack: connections that never send an association request held every association slot
    until pynetdicom's timeout. Default limits (10 associations, 4 per address), a long ARTIM."""
    item = world.order([world.ct], at=datetime(2026, 12, 1, 9, 30, tzinfo=IST)).items.get()
    port = serve(DICOM_ARTIM_TIMEOUT_SECONDS=30, DICOM_MAX_ASSOCIATIONS=10, DICOM_MAX_ASSOCIATIONS_PER_ADDRESS=4)

    # Each exchange is bounded at 10 s, a third of the ARTIM: far above a loaded machine's time, far below what
    # waiting for an idle connection to be closed would take.
    with idle_sockets(port, count, sources=sources):
        started = time.monotonic()
        assert echoscu(port).returncode == 0
        assert time.monotonic() - started < 10
        started = time.monotonic()
        found = findscu(port, ["AccessionNumber"])
        assert time.monotonic() - started < 10
        assert (found.returncode, [a.AccessionNumber for a in found.answers]) == (0, [item.accession_number])
        started = time.monotonic()
        assert scu_echo_and_find(port) == (0, [item.accession_number])
        assert time.monotonic() - started < 10


def test_a_connection_without_an_association_request_is_closed_at_artim(serve: Callable[..., int]) -> None:
    port = serve(DICOM_ARTIM_TIMEOUT_SECONDS=1)
    with idle_sockets(port, 1, sources=["127.0.0.2"]) as (idle,):
        started = time.monotonic()
        assert closed_by_server(idle, within=5)
        assert 0.5 < time.monotonic() - started < 2
    # half a request is no request
    with idle_sockets(port, 1, sources=["127.0.0.2"]) as (partial,):
        partial.sendall(b"\x01\x00\x00\x00\x01\x00\x00\x01")
        assert closed_by_server(partial, within=5)
    assert echoscu(port).returncode == 0


def test_an_idle_association_is_closed(serve: Callable[..., int]) -> None:
    port = serve(DICOM_IDLE_TIMEOUT_SECONDS=1)
    assoc = scu_associate(port)
    assert assoc.is_established
    deadline = time.monotonic() + 5
    while assoc.is_established and time.monotonic() < deadline:
        time.sleep(0.05)
    assert assoc.is_aborted
    assert not assoc.is_established


def test_the_fifth_association_from_one_address_is_rejected_while_another_address_gets_in(
    serve: Callable[..., int],
) -> None:
    port = serve(DICOM_MAX_ASSOCIATIONS=10, DICOM_MAX_ASSOCIATIONS_PER_ADDRESS=4)
    DicomCallingAE.objects.filter(ae_title="BLR_CT1").update(networks=["127.0.0.0/8"])
    held = [scu_associate(port) for _ in range(4)]
    try:
        assert [rejection(assoc) for assoc in held] == [None] * 4
        assert rejection(scu_associate(port)) == (0x02, 0x03, 0x02)  # transient, local limit exceeded
        other = scu_associate(port, source="127.0.0.2")
        assert rejection(other) is None
        other.release()
    finally:
        for assoc in held:
            assoc.release()
    # the slots are freed with their connections
    deadline = time.monotonic() + 3
    while (again := scu_associate(port)).is_rejected and time.monotonic() < deadline:
        time.sleep(0.1)
    assert rejection(again) is None
    again.release()


def test_associations_are_limited_in_all(serve: Callable[..., int]) -> None:
    port = serve(DICOM_MAX_ASSOCIATIONS=2, DICOM_MAX_ASSOCIATIONS_PER_ADDRESS=4)
    DicomCallingAE.objects.filter(ae_title="BLR_CT1").update(networks=["127.0.0.0/8"])
    held = [scu_associate(port, source=f"127.0.0.{n}") for n in (2, 3)]
    try:
        assert [rejection(assoc) for assoc in held] == [None, None]
        assert rejection(scu_associate(port, source="127.0.0.4")) == (0x02, 0x03, 0x02)
    finally:
        for assoc in held:
            assoc.release()


def test_connections_from_one_address_are_bounded_oldest_idle_first(serve: Callable[..., int]) -> None:
    """Twice the association limit per address at accept; a newcomer closes that address's oldest socket that
    is still waiting, so the newest (a modality about to send its request) is the one kept."""
    port = serve(DICOM_ARTIM_TIMEOUT_SECONDS=30, DICOM_MAX_ASSOCIATIONS_PER_ADDRESS=2)
    with idle_sockets(port, 5, sources=["127.0.0.2"]) as sockets:
        assert closed_by_server(sockets[0], within=2)
        assert not any(closed_by_server(sock, within=0.1) for sock in sockets[1:])


def test_idle_connections_reconnecting_as_fast_as_they_are_closed_cannot_lock_out_a_registered_modality(
    world: DicomWorld, serve: Callable[..., int]
) -> None:
    """More idle connections than the lobby holds (a small server: a lobby of 16), from unregistered
    addresses, each reopened the moment it is closed: the lobby closes theirs, never the modality's."""
    import select
    import threading

    item = world.order([world.ct], at=datetime(2026, 12, 1, 9, 30, tzinfo=IST)).items.get()
    port = serve(DICOM_ARTIM_TIMEOUT_SECONDS=30, DICOM_MAX_ASSOCIATIONS=1)
    stop = threading.Event()
    reopened = [0]

    def attack(sockets: list[socket.socket]) -> None:
        while not stop.is_set():
            readable, _, _ = select.select(sockets, [], [], 0.05)
            for number, idle in enumerate(sockets):
                if idle in readable:
                    idle.close()
                    fresh = socket.socket()
                    fresh.bind((f"127.0.1.{number + 2}", 0))
                    fresh.connect(("127.0.0.1", port))
                    sockets[number] = fresh
                    reopened[0] += 1

    with idle_sockets(port, 50, sources=[f"127.0.1.{n}" for n in range(2, 52)]) as sockets:
        attacker = threading.Thread(target=attack, args=(sockets,))
        attacker.start()
        try:
            for _ in range(3):
                started = time.monotonic()
                found = findscu(port, ["AccessionNumber"])
                # Served, and not by waiting for an idle socket's 30 s ARTIM timeout to free a place: a
                # third of it is a bound a loaded CI machine does not reach and a lock-out cannot beat.
                assert (found.returncode, time.monotonic() - started < 10) == (0, True), found.log
                assert [a.AccessionNumber for a in found.answers] == [item.accession_number]
                assert echoscu(port).returncode == 0
        finally:
            stop.set()
            attacker.join()
    assert reopened[0] > 0  # the lobby was full and closed theirs
