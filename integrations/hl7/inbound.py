"""ORU^R01 results received by the listener, applied through the lab results service (CONTRACT section 17).

`message_handle` takes one MLLP payload and returns the ACK to send. It answers
- AR (with ERR) when the payload is not an HL7 v2 message we take: no MSH, other delimiters, no control id,
  a version other than 2.5/2.5.1, a message other than ORU^R01;
- AE (with ERR) when the results cannot be applied: an order item nobody knows (ORC-2, OBR-2, OBR-3 are
  looked up as accession numbers, then as order numbers with OBR-4 naming the test), a patient that is not
  the order's, a bad value or unit, an unknown result status, a cancelled order; nothing is applied then;
- AA when every result was recorded, through `lab.results.lab_results_record` exactly as the REST API
  records them (same validation, flags, versions and events).

An applied message is stored with its ACK under (MSH-3, MSH-4, MSH-10), unique in the database, in the same
transaction as its results: the same message again gets the stored ACK and is not applied twice, even
when both copies arrive at once on two connections. Refused messages (AE, AR) are not stored, so a sender
may fix the order or the value and send them again.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from clinic.errors import FieldError, InvalidState
from integrations.hl7 import er7
from integrations.hl7.messages import ts
from integrations.hl7.models import Hl7ReceivedMessage
from lab.models import LabOrder, LabOrderItem, TestKind
from lab.results import ResultInput, lab_results_record
from lab.selectors import lab_order_item_by_accession

logger = logging.getLogger("integrations.hl7.listener")

VERSIONS = ("2.5", "2.5.1")
_STATUS = {"F": "final", "P": "preliminary", "C": "amended"}


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


_CODE_TEXT = {
    "100": "Segment sequence error",
    "101": "Required field missing",
    "102": "Data type error",
    "103": "Table value not found",
    "200": "Unsupported message type",
    "201": "Unsupported event code",
    "203": "Unsupported version id",
    "204": "Unknown key identifier",
    "207": "Application internal error",
}


def ack_build(
    *, code: str, control_id: str, msh: er7.Segment | None, problems: Sequence[Problem] = (), text: str = ""
) -> str:
    """An ACK in 2.5.1 (echoing the sender's trigger event when known)."""
    trigger = msh.get(9, 2) if msh is not None else ""
    segments = [
        er7.msh(
            settings.HL7_LISTENER_APPLICATION,
            settings.HL7_LISTENER_FACILITY,
            msh.get(3) if msh is not None else "",
            msh.get(4) if msh is not None else "",
            ts(timezone.now()),
            None,
            ["ACK", trigger, "ACK"],
            (control_id or "ACK")[:15] + "A",  # our own control id, derived so a repeated ACK is identical
            "P",
            "2.5.1",
        ),
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
                [problem.code, _CODE_TEXT.get(problem.code, ""), "HL70357"],
                "E",
                None,
                None,
                None,
                problem.text[:250],
            )
        )
    return er7.message(segments)


@dataclass
class _Obx:
    segment: er7.Segment
    number: int  # the OBX's position in the message, 1-based, for ERR
    notes: list[str] = field(default_factory=list)


@dataclass
class _Group:
    obr: er7.Segment
    number: int
    orc: er7.Segment | None
    observations: list[_Obx] = field(default_factory=list)


def _groups(segments: list[er7.Segment]) -> tuple[er7.Segment | None, list[_Group]]:
    pid = None
    groups: list[_Group] = []
    orc = None
    counts: dict[str, int] = defaultdict(int)
    for seg in segments[1:]:
        counts[seg.name] += 1
        if seg.name == "PID" and pid is None:
            pid = seg
        elif seg.name == "ORC":
            orc = seg
        elif seg.name == "OBR":
            groups.append(_Group(obr=seg, number=counts["OBR"], orc=orc))
            orc = None
        elif seg.name == "OBX":
            if not groups:
                raise Rejected("AE", [Problem("100", "An OBX comes before any OBR.", ("OBX", counts["OBX"], 1))])
            groups[-1].observations.append(_Obx(segment=seg, number=counts["OBX"]))
        elif seg.name == "NTE" and groups and groups[-1].observations:
            groups[-1].observations[-1].notes.append(seg.get(3))
    if not groups:
        raise Rejected("AE", [Problem("101", "The message has no OBR segment.", ("OBR", 1, 1))])
    return pid, groups


def _item(group: _Group) -> LabOrderItem:
    keys = [k for k in ((group.orc.get(2) if group.orc else ""), group.obr.get(2), group.obr.get(3)) if k]
    item = lab_order_item_by_accession(*keys)
    if item is None and keys:
        test_code = group.obr.get(4)
        group_number = group.orc.get(4) if group.orc else ""
        item = (
            LabOrderItem.objects.select_related("test", "order__patient")
            .filter(order__order_number__in=[*keys, group_number] if group_number else keys, test__code=test_code)
            .first()
        )
    if item is None:
        raise Rejected(
            "AE",
            [Problem("204", "No order item has this placer or filler order number.", ("OBR", group.number, 2))],
        )
    return item


def _when(text: str, fallback: datetime) -> datetime:
    """An HL7 DTM (YYYYMMDDHHMM[SS[.S]][+ZZZZ]); without an offset, the clinic's TIME_ZONE."""
    if not text:
        return fallback
    digits, sign, offset = text, "", ""
    for mark in "+-":
        if mark in text[8:]:
            digits, offset = text.rsplit(mark, 1)
            sign = mark
    digits = digits.split(".")[0]
    try:
        moment = datetime.strptime(digits.ljust(14, "0")[:14], "%Y%m%d%H%M%S")  # noqa: DTZ007 - made aware below
        if sign:
            moment = datetime.strptime(f"{digits.ljust(14, '0')[:14]}{sign}{offset}", "%Y%m%d%H%M%S%z")
    except ValueError:
        raise ValueError(f"{text!r} is not an HL7 date and time.") from None
    return moment if moment.tzinfo else timezone.make_aware(moment)


def _performer(obx: er7.Segment, sender: str) -> str:
    family, given, ident = obx.get(16, 2), obx.get(16, 3), obx.get(16, 1)
    name = " ".join(filter(None, (given, family)))
    return name or ident or sender


def _value(obx: er7.Segment) -> str:
    value_type = obx.get(2).upper()
    raw = obx.raw(5)
    if value_type in ("CE", "CWE", "CNE"):
        return obx.get(5, 1)
    if value_type in ("TX", "FT"):
        return "\n".join(er7.unescape(rep) for rep in raw.split("~"))
    return er7.unescape(raw.split("~")[0])


_FIELD_OF = {"value": 5, "unit": 6, "analyte": 3, "test": 3}


def _apply(segments: list[er7.Segment], msh: er7.Segment) -> list[Any]:
    sender = " ".join(filter(None, (msh.get(3), msh.get(4)))) or "HL7"
    pid, groups = _groups(segments)
    message_time = _when(msh.get(7), timezone.now()) if msh.get(7) else timezone.now()
    # (order, status, performed_at, performer, reason) -> [(ResultInput, the OBX it came from)]
    batches: dict[tuple[Any, ...], list[tuple[ResultInput, _Obx]]] = defaultdict(list)
    orders: dict[Any, LabOrder] = {}
    problems: list[Problem] = []
    for group in groups:
        item = _item(group)
        order = item.order
        if pid is not None and pid.get(3) and pid.get(3) != order.patient.patient_id:
            raise Rejected("AE", [Problem("204", "The patient (PID-3) is not the order's patient.", ("PID", 1, 3))])
        orders[order.pk] = order
        if not group.observations:
            problems.append(Problem("101", "An OBR without any OBX.", ("OBR", group.number, 1)))
        for obx in group.observations:
            seg = obx.segment
            status = _STATUS.get(seg.get(11).upper())
            if status is None:
                problems.append(Problem("103", "OBX-11 must be F, P or C.", ("OBX", obx.number, 11)))
                continue
            try:
                performed_at = _when(seg.get(14) or group.obr.get(7), message_time)
            except ValueError as exc:
                problems.append(Problem("102", str(exc), ("OBX", obx.number, 14)))
                continue
            imaging = item.test.kind == TestKind.IMAGING
            reason = " ".join(obx.notes) if status == "amended" else ""
            if status == "amended" and not reason:
                reason = f"Corrected result from {sender} (HL7 ORU)."
            batches[(order.pk, status, performed_at, _performer(seg, sender), reason)].append(
                (
                    ResultInput(
                        test=item.test.code,
                        analyte=None if imaging else seg.get(3),
                        value=_value(seg),
                        unit=None if imaging or not seg.get(6) else seg.get(6),
                        note="" if status == "amended" else " ".join(obx.notes),
                    ),
                    obx,
                )
            )
    if problems:
        raise Rejected("AE", problems)
    for (order_id, status, performed_at, performer, reason), entries in batches.items():
        try:
            lab_results_record(
                order=orders[order_id],
                results=[entry for entry, _ in entries],
                performed_at=performed_at,
                performer=performer,
                status=status,
                reason=reason,
                recorded_by=f"hl7:{sender}"[:200],
            )
        except FieldError as exc:
            raise Rejected("AE", _field_problems(exc.errors, entries)) from None
        except InvalidState as exc:
            raise Rejected("AE", [Problem("207", str(exc), ("OBX", entries[0][1].number, 11))]) from None
    return list(orders)


def _field_problems(errors: dict[str, str], entries: list[tuple[ResultInput, _Obx]]) -> list[Problem]:
    problems = []
    for key, text in errors.items():
        parts = key.split(".")
        if parts[0] == "results" and len(parts) == 3 and parts[1].isdigit() and int(parts[1]) < len(entries):
            obx = entries[int(parts[1])][1]
            code = "102" if parts[2] in ("value", "unit") else "204"
            problems.append(Problem(code, text, ("OBX", obx.number, _FIELD_OF.get(parts[2], 5))))
        else:
            problems.append(Problem("102", f"{key}: {text}", ("OBX", entries[0][1].number, 14)))
    return problems


def _refusal(msh: er7.Segment) -> Problem | None:
    """Why a message with a control id is not one we take (AR): its version or its type."""
    if msh.get(12) not in VERSIONS:
        return Problem("203", f"Version {msh.get(12)!r} is not accepted; send 2.5.1.", ("MSH", 1, 12))
    if msh.get(9, 1) != "ORU":
        return Problem("200", f"Only ORU^R01 is accepted, not {msh.get(9, 1)!r}.", ("MSH", 1, 9))
    if msh.get(9, 2) != "R01":
        return Problem("201", f"Only ORU^R01 is accepted, not ORU^{msh.get(9, 2)}.", ("MSH", 1, 9))
    return None


def message_handle(payload: bytes, *, peer: str | None = None) -> str:
    """The ACK (ER7) for one received payload; never raises."""
    try:
        segments = er7.parse(payload.decode("utf-8", errors="replace"))
    except er7.Er7Error as exc:
        logger.info("HL7 message from %s refused: %s", peer, exc)
        return ack_build(code="AR", control_id="", msh=None, problems=[Problem("100", str(exc), ("MSH", 1, 1))])
    msh = segments[0]
    control_id = msh.get(10)
    if not control_id:
        return ack_build(
            code="AR", control_id="", msh=msh, problems=[Problem("101", "MSH-10 is required.", ("MSH", 1, 10))]
        )
    refusal = _refusal(msh)
    if refusal is not None:
        return ack_build(code="AR", control_id=control_id, msh=msh, problems=[refusal])
    key = {
        "sending_application": msh.get(3)[:180],
        "sending_facility": msh.get(4)[:180],
        "control_id": control_id[:199],
    }
    try:
        with transaction.atomic():
            # Copies of one message arriving at once on two connections wait for each other here; the second
            # then finds the first's ACK instead of recording the results again.
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
                    ["hl7:" + "|".join((key["sending_application"], key["sending_facility"], key["control_id"]))],
                )
            # One look, under the lock: a repeat is rare, and its answer is the stored ACK.
            stored = Hl7ReceivedMessage.objects.filter(**key).values_list("ack", flat=True).first()
            if stored is not None:
                logger.info("HL7 message %s from %s: repeated, answered with its stored ACK", control_id, peer)
                return stored
            order_ids = _apply(segments, msh)
            ack = ack_build(code="AA", control_id=control_id, msh=msh)
            Hl7ReceivedMessage.objects.create(
                **key, message_type="ORU^R01", ack=ack, order_ids=order_ids, peer=peer, received_at=timezone.now()
            )
    except Rejected as exc:
        logger.info("HL7 message %s from %s: %s (%s)", control_id, peer, exc.ack_code, exc.problems[0].code)
        return ack_build(code=exc.ack_code, control_id=control_id, msh=msh, problems=exc.problems)
    except IntegrityError:
        # The same message applied meanwhile on another connection: its ACK is the answer.
        stored = Hl7ReceivedMessage.objects.filter(**key).values_list("ack", flat=True).first()
        if stored is not None:
            return stored
        logger.exception("HL7 message %s from %s: database refused the results", control_id, peer)
        return ack_build(
            code="AE", control_id=control_id, msh=msh, problems=[Problem("207", "Not applied: internal error.")]
        )
    except Exception:
        logger.exception("HL7 message %s from %s: internal error", control_id, peer)
        return ack_build(
            code="AE", control_id=control_id, msh=msh, problems=[Problem("207", "Not applied: internal error.")]
        )
    logger.info("HL7 message %s from %s: applied to %d orders", control_id, peer, len(order_ids))
    return ack
