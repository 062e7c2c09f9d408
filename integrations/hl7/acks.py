"""Acknowledgements of the HL7 listener (docs/hl7-inbound.md, "Refusals"): the ERR a refusal carries, the
exception that carries it out of the reading of a message, and the ACK in 2.5.1."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from django.conf import settings
from django.utils import timezone

from integrations.hl7 import er7
from integrations.hl7.messages import ts

MAX_CONTROL_ID = 199  # Hl7ReceivedMessage.control_id; MSH-10 is ST(199)


@dataclass
class Problem:
    """One ERR segment: HL7 table 0357 code, where (segment, sequence, field) and a message for people."""

    code: str
    text: str
    location: tuple[str, int, int] | None = None


class Rejected(Exception):
    def __init__(self, ack_code: str, problems: list[Problem]) -> None:
        super().__init__(problems[0].text if problems else ack_code)
        self.ack_code, self.problems = ack_code, problems


CODE_TEXT = {
    "100": "Segment sequence error",
    "101": "Required field missing",
    "102": "Data type error",
    "103": "Table value not found",
    "200": "Unsupported message type",
    "201": "Unsupported event code",
    "203": "Unsupported version id",
    "204": "Unknown key identifier",
    "205": "Duplicate key identifier",
    "207": "Application internal error",
}


def ack_build(
    *, code: str, control_id: str, msh: er7.Segment | None, problems: Sequence[Problem] = (), text: str = ""
) -> str:
    """An ACK in 2.5.1 (echoing the sender's trigger event when known); it declares UTF-8 in MSH-18 when it
    carries any other character than ASCII (the listener sends it in UTF-8)."""
    trigger = msh.get(9, 2) if msh is not None else ""
    segments = [
        er7.segment("MSA", code, control_id, text[:80] if text else (problems[0].text[:80] if problems else "")),
    ]
    for problem in problems:
        location: er7.Field = (
            [problem.location[0], str(problem.location[1]), str(problem.location[2])] if problem.location else None
        )
        segments.append(
            er7.segment(
                "ERR",
                None,
                location,
                [problem.code, CODE_TEXT.get(problem.code, ""), "HL70357"],
                "E",
                None,
                None,
                None,
                problem.text[:250],
            )
        )
    application, facility = (msh.get(3), msh.get(4)) if msh is not None else ("", "")
    header = [
        settings.HL7_LISTENER_APPLICATION,
        settings.HL7_LISTENER_FACILITY,
        application,
        facility,
        ts(timezone.now()),
        None,
        ["ACK", trigger, "ACK"],
        (control_id or "ACK")[:15] + "A",  # our own control id, derived so a repeated ACK is identical
        "P",
        "2.5.1",
    ]
    if not all(part.isascii() for part in [*segments, application, facility]):
        header += [None] * 5 + ["UNICODE UTF-8"]
    return er7.message([er7.msh(*header), *segments])


def printable(text: str) -> str:
    """What of a field that failed to read may be echoed in an ACK."""
    return "".join(ch for ch in text if " " <= ch <= "~")[:MAX_CONTROL_ID]
