"""Malformed input (docs/hl7-inbound.md): control characters in a field, impossible timestamps, other
encoding characters are AR or AE with a specific ERR code (HL7 table 0357) and one log line; never
"internal error", never a traceback; nothing applied."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from integrations.hl7.models import Hl7ReceivedMessage
from lab.models import LabResult
from tests.integrations.hl7.inbound_support import handle, message, sender
from tests.integrations.hl7.support import lab_world

pytestmark = pytest.mark.django_db(transaction=True)

OK = "NM|718-7^Hemoglobin^LN^HGB^Haemoglobin^L||3.0|g/dL^^UCUM|12.0-15.5||||F"


@pytest.fixture
def world() -> dict[str, Any]:
    world = lab_world()
    sender("City lab", ["10.1.0.0/16"], [world["blr"]])
    return world


def _good(world: Any, control_id: str = "BAD1", **kwargs: Any) -> str:
    return message(control_id, world["items"]["CBC"].accession_number, [OK], pid3=world["patient"].patient_id, **kwargs)


CASES = [
    ("nul in OBX-5", lambda t: t.replace("||3.0|", "||3\x00.0|"), "AE", ("102", "OBX^1^5")),
    ("start of heading in PID-5", lambda t: t.replace("Rao^Asha", "Rao\x01^Asha"), "AE", ("102", "PID^1^5")),
    ("escape character in MSH-4", lambda t: t.replace("|LAB|", "|L\x1bAB|"), "AR", ("102", "MSH^1^4")),
    ("year zero in MSH-7", lambda t: _msh7(t, "00000101000000"), "AR", ("102", "MSH^1^7")),
    ("offset +9999 in MSH-7", lambda t: _msh7(t, "20261127120000+9999"), "AR", ("102", "MSH^1^7")),
    ("month 13 in MSH-7", lambda t: _msh7(t, "20261327120000"), "AR", ("102", "MSH^1^7")),
    ("letters in MSH-7", lambda t: _msh7(t, "yesterday"), "AR", ("102", "MSH^1^7")),
    ("nonsense OBX-14", lambda t: t.replace("||||F", "||||F|||2026-11-27T10:00"), "AE", ("102", "OBX^1^14")),
    ("impossible OBX-14", lambda t: t.replace("||||F", "||||F|||20261131250000"), "AE", ("102", "OBX^1^14")),
    ("OBX-14 offset +9999", lambda t: t.replace("||||F", "||||F|||20261127+9999"), "AE", ("102", "OBX^1^14")),
    ("other encoding characters", lambda t: t.replace("MSH|^~\\&|", "MSH|^~\\#|"), "AR", ("102", "MSH^1^2")),
    ("other field separator", lambda t: t.replace("|", "!"), "AR", ("102", "MSH^1^1")),
    ("an unknown OBX-2", lambda t: t.replace("OBX|1|NM|", "OBX|1|ED|"), "AE", ("102", "OBX^1^2")),
    ("an OBX-11 we do not know", lambda t: t.replace("||||F", "||||X"), "AE", ("103", "OBX^1^11")),
    ("a number that is none", lambda t: t.replace("||3.0|", "||3,0|"), "AE", ("102", "OBX^1^5")),
]


def _msh7(text: str, value: str) -> str:
    fields = text.split("|", 7)
    fields[6] = value
    return "|".join(fields)


@pytest.mark.parametrize(("name", "spoil", "code", "error"), CASES, ids=[case[0] for case in CASES])
def test_malformed_input_gets_a_specific_err_and_one_log_line_without_traceback(
    world: Any, caplog: Any, name: str, spoil: Any, code: str, error: tuple[str, str]
) -> None:
    text = spoil(_good(world))
    with caplog.at_level(logging.INFO, logger="integrations.hl7.listener"):
        ack = handle(text.encode("utf-8"))
    assert (ack.code, ack.control_id, ack.errors) == (code, "BAD1", [error])
    assert "internal error" not in ack.text
    records = [r for r in caplog.records if r.name == "integrations.hl7.listener"]
    assert len(records) == 1, [r.getMessage() for r in records]
    assert records[0].levelno == logging.INFO
    assert all(r.exc_info is None for r in caplog.records)
    assert "Traceback" not in caplog.text
    assert LabResult.objects.count() == 0
    assert Hl7ReceivedMessage.objects.count() == 0


def test_a_payload_that_is_no_hl7_at_all_is_ar_100_without_traceback(world: Any, caplog: Any) -> None:
    with caplog.at_level(logging.INFO, logger="integrations.hl7.listener"):
        for payload in (b"", b"\x00\x01\x02", b"PID|1||X\r", "MSH|^~\\&|\u00e9".encode(), b"MSH"):
            ack = handle(payload)
            assert ack.code == "AR"
            assert ack.errors[0][0] in ("100", "101")
    assert all(r.exc_info is None for r in caplog.records)
    assert "Traceback" not in caplog.text


def test_a_control_id_too_long_or_missing_is_ar(world: Any) -> None:
    assert handle(_good(world, control_id="X" * 200)).errors == [("102", "MSH^1^10")]
    assert handle(_good(world, control_id="")).errors == [("101", "MSH^1^10")]
    assert LabResult.objects.count() == 0


def test_a_genuine_bug_still_answers_ae_207_and_logs_its_traceback(world: Any, caplog: Any, monkeypatch: Any) -> None:
    """The catch-all is for our own bugs only: it answers, and the traceback is there for us."""
    from integrations.hl7 import inbound

    def broken(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("a bug")

    monkeypatch.setattr(inbound, "_apply", broken)
    with caplog.at_level(logging.INFO, logger="integrations.hl7.listener"):
        ack = handle(_good(world))
    assert (ack.code, ack.control_id, ack.errors) == ("AE", "BAD1", [("207", "")])
    assert any(r.exc_info for r in caplog.records)
