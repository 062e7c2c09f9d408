"""The worklist's own encoder (integrations.dicom.encoding) writes exactly the bytes pydicom's writer does for
the same answer, in both little-endian transfer syntaxes, with names outside ASCII, odd and even lengths and
empty values; and the encode hook leaves every other dataset to pydicom."""

from __future__ import annotations

import uuid
from datetime import UTC, date, datetime

import pytest
from pydicom.datadict import dictionary_VR
from pydicom.dataset import Dataset
from pydicom.filebase import DicomBytesIO
from pynetdicom import service_class
from pynetdicom.dsutils import decode, encode

from integrations.dicom import worklist
from integrations.dicom.encoding import EncodedAnswer, elements_dataset, elements_encode
from integrations.dicom.server import _answer_encode, worklist_ae
from integrations.dicom.worklist import answer_elements, requested_keys
from lab.ports import WorklistEntry

EVERY_KEY = tuple(worklist._VALUES)  # every return key of PS3.4 Table K.6-1 the worklist answers


def entry(**changes: object) -> WorklistEntry:
    values: dict[str, object] = {
        "item_id": uuid.UUID("6f1c5a0e-0000-4000-8000-000000000001"),
        "accession_number": "BLR-IMG-2026-000017",
        "status": "scheduled",
        "scheduled_at": datetime(2026, 12, 1, 4, 30, tzinfo=UTC),
        "test_code": "XR-CHEST",
        "test_name": "X-ray chest PA",
        "loinc_code": "36643-5",
        "modality": "DX",
        "order_number": "BLR-LAB-2026-000009",
        "priority": "stat",
        "doctor_name": "Dr. Ravi Kumar",
        "patient_id": "PAT-000001",
        "first_name": "Asha",
        "last_name": "Rao",
        "date_of_birth": date(1990, 5, 17),
        "gender": "female",
        "station_ae_title": "BLR_DX1",
        "time_zone": "Asia/Kolkata",
        "patient_uuid": uuid.UUID("6f1c5a0e-0000-4000-8000-0000000000aa"),
        "station_name": "DX room 1",
        "station_location": "RAD-1",
    }
    values.update(changes)
    return WorklistEntry(**values)  # type: ignore[arg-type]


def request(*keys: str) -> Dataset:
    requested = Dataset()
    for keyword in keys:
        setattr(requested, keyword, [Dataset()] if dictionary_VR(keyword) == "SQ" else None)
    return requested


@pytest.mark.parametrize(
    "item",
    [
        entry(),
        entry(first_name="Zoë", last_name="Ñúñez-Łukasz", doctor_name="डॉ. शर्मा"),  # UTF-8, odd byte counts
        entry(first_name="Al", last_name="Li", station_ae_title=None, gender="other", test_name="CT"),
        entry(accession_number="A" * 40, test_name="T" * 90, status="in_progress", priority="routine"),
    ],
)
@pytest.mark.parametrize("keys", [EVERY_KEY, ("PatientID",), ("ScheduledProcedureStepSequence", "PatientName")])
@pytest.mark.parametrize("implicit_vr", [True, False])
def test_the_bytes_are_the_ones_pydicom_writes(item: WorklistEntry, keys: tuple[str, ...], implicit_vr: bool) -> None:
    elements = answer_elements(item, requested_keys(request(*keys)))
    ours = elements_encode(elements, explicit_vr=not implicit_vr)
    assert ours == encode(elements_dataset(elements), implicit_vr, True)
    # and a reader gets the values back
    back = decode(DicomBytesIO(ours), implicit_vr, True)
    if "PatientName" in keys:
        assert str(back.PatientName) == f"{item.last_name}^{item.first_name}"
    if "ScheduledProcedureStepSequence" in keys:
        assert back.ScheduledProcedureStepSequence[0].Modality == item.modality


def test_the_hook_writes_answers_and_leaves_other_datasets_to_pydicom() -> None:
    worklist_ae("CLINIC_MWL")
    assert service_class.encode is _answer_encode
    elements = answer_elements(entry(), requested_keys(request(*EVERY_KEY)))
    answer = EncodedAnswer(elements)
    assert _answer_encode(answer, True, True) == elements_encode(elements, explicit_vr=False)
    assert _answer_encode(answer, False, True) == elements_encode(elements, explicit_vr=True)
    # big endian and deflated: pydicom's writer, from the same elements
    assert _answer_encode(answer, False, False) == encode(elements_dataset(elements), False, False)
    assert _answer_encode(answer, False, True, True) == encode(elements_dataset(elements), False, True, True)
    other = Dataset()
    other.PatientID = "X1"
    assert _answer_encode(other, True, True) == encode(other, True, True)


def test_command_sets_encode_as_pydicom_does_and_are_remembered_by_content() -> None:
    from pynetdicom import dimse_messages

    from integrations.dicom import server

    worklist_ae("CLINIC_MWL")
    assert dimse_messages.encode is server._command_encode

    def command(message_id: int, status: int) -> Dataset:
        ds = Dataset()
        ds.AffectedSOPClassUID = "1.2.840.10008.5.1.4.31"
        ds.CommandField = 0x8020
        ds.MessageIDBeingRespondedTo = message_id
        ds.CommandDataSetType = 0x0001
        ds.Status = status
        return ds

    server._encoded_commands.clear()
    pending = server._command_encode(command(7, 0xFF00), True, True)
    assert pending == encode(command(7, 0xFF00), True, True)
    assert server._command_encode(command(7, 0xFF00), True, True) is pending  # the same content: remembered
    assert len(server._encoded_commands) == 1
    final = server._command_encode(command(7, 0x0000), True, True)
    assert final == encode(command(7, 0x0000), True, True) != pending
    # a value that cannot be a key (a multi-valued element) is encoded by pydicom and not remembered
    listed = command(8, 0xFF00)
    listed.OffendingElement = [0x00100010, 0x00100020]
    assert server._command_encode(listed, True, True) == encode(listed, True, True)
    assert len(server._encoded_commands) == 2
    # bounded: message ids grow without end
    for message_id in range(server._COMMANDS_KEPT + 10):
        server._command_encode(command(message_id, 0xFF00), True, True)
    assert len(server._encoded_commands) <= server._COMMANDS_KEPT


def test_accepted_connections_send_and_acknowledge_at_once() -> None:
    """TCP_NODELAY for our writes, TCP_QUICKACK (renewed on every read) for a modality that leaves Nagle's
    algorithm on: without it each of its C-FIND requests waited for our delayed ACK."""
    import socket

    from integrations.dicom.admission import TCP_QUICKACK, PeerSocket, WorklistServer

    listening = socket.create_server(("127.0.0.1", 0))
    server = object.__new__(WorklistServer)
    server.socket = listening
    with listening, socket.create_connection(listening.getsockname()) as modality:
        accepted, _ = server.get_request()
        with accepted:
            assert isinstance(accepted, PeerSocket)
            assert accepted.peer == "127.0.0.1"
            assert accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 1
            modality.sendall(b"A-ASSOCIATE")
            assert accepted.recv(64) == b"A-ASSOCIATE"
            assert accepted.getsockopt(socket.IPPROTO_TCP, TCP_QUICKACK) == 1
            accepted.sendall(b"ok")
            assert modality.recv(2) == b"ok"
