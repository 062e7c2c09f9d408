"""ORU^R01 results received by the listener, applied through the lab port (docs/hl7-inbound.md).

`message_handle` takes one MLLP payload (bytes) and the peer's address and returns the ACK to send. It
answers
- AR (with ERR) when the payload is not a message we take: no MSH, other delimiters (102 at MSH-1/MSH-2),
  no control id (101), a version other than 2.5/2.5.1 (203), a message other than ORU^R01 (200, 201), an
  impossible MSH-7 (102), no registered sender for this address and MSH-3/MSH-4 (204 at MSH-3), a character
  set we do not read (103 at MSH-18) or bytes that are not that character set (102 at MSH-18), a control
  character in MSH (102), and a control id already used by this sender for another message (205);
- AE (with ERR) when the results cannot be applied: no PID or no PID-3 (101), an order item that the sender's
  branches do not have (204 at OBR-2, the same answer whether the order exists elsewhere or nowhere), a
  patient that is not the order's (204 at PID-3), an OBX-3 naming no analyte or two (204), a bad value or
  unit (102), an unknown result status (103), a control character in a field or an impossible OBX-14 (102);
  nothing is applied then;
- AA when every result was recorded, through `lab.ports.oru_results_apply`, exactly as the REST API
  records them (same validation, flags, versions and events).

Decisions (docs/hl7-inbound.md tells senders the same):
- The sender is the active Hl7Sender whose networks hold the peer and whose MSH-3/MSH-4 the message
  presents. A registered identity (application, facility or both; compared ignoring case, so "lis" cannot
  slip past "LIS") belongs to its sender alone: the most specific registration presenting the message's
  identity owns it, and a message from any other sender's address presenting it is AR. A sender registered
  with neither takes every identity nobody registered. Two senders equally matching is a configuration
  error, answered AR (and logged) rather than guessed.
- MSH is read before the message is decoded, as Latin-1 (one character per byte, so the delimiters fall
  where they are whatever the charset); MSH-18's first repetition, else the sender's default, then decodes
  the whole payload strictly. `UNICODE` and `UTF-8` are read as `UNICODE UTF-8` (spellings senders use).
- The duplicate key is (sender, MSH-10). The content digest is SHA-256 of the decoded segments with MSH-7
  blanked: a sender that stamps a new time on a resend still sends the same message. The same key with
  another digest is AR 205 (table 0357 "Duplicate key identifier"), never the stored AA. Rows from before
  senders were registered (no sender) are not consulted: their key could not tell two senders apart.
- PID-3 names the order's patient when any repetition holds our patient_id (whatever its assigning
  authority, except an ABHA one), or the ABHA number (14 digits, hyphens and spaces ignored) under the
  assigning authority ABHA, ABDM, NDHM or https://healthid.ndhm.gov.in (PID-3.4, namespace or universal id).
- OBX-3 names an analyte of the ordered test by its local code (any case) or its LOINC code, in the first
  (components 1-3) or the alternate (4-6) triplet; naming two analytes is AE 204 naming both.
- SN values are kept as comparator plus number (`>^14`) or as a range (`^10^-^20`); a ratio (`^1^:^128`) or
  a categorical (`^2^+`) is refused on a quantity analyte (102) and kept as written (`1:128`) on a text one.
  Coded analytes take CE/CWE by code or by text, in either triplet.
- A result the order cannot take now (a final one sent again as final, a cancelled order) is 103 at
  OBX-11: the status sent is not one the order takes now.
"""

from __future__ import annotations

import hashlib
import logging
import re
import uuid
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from clinic.errors import FieldError, InvalidState
from integrations.hl7 import er7
from integrations.hl7.acks import MAX_CONTROL_ID, Problem, Rejected, ack_build, printable
from integrations.hl7.models import Hl7Charset, Hl7ReceivedMessage
from integrations.hl7.oru_fields import dtm_read, obx_value_read
from integrations.hl7.selectors import Sender, sender_resolve, senders_active
from lab import ports

logger = logging.getLogger("integrations.hl7.listener")

VERSIONS = ("2.5", "2.5.1")
_STATUS = {"F": "final", "P": "preliminary", "C": "amended"}


# --- Reading the bytes -------------------------------------------------------------------------------------

_DEFAULT_CODECS: dict[str, str] = {
    Hl7Charset.UTF8.value: "utf-8",
    Hl7Charset.LATIN1.value: "latin-1",
    Hl7Charset.ASCII.value: "ascii",
}
# C0 controls but tab (segments end in CR or LF, which the parser splits on), DEL and C1 controls: none of
# them has a place in a field (HL7 v2.5.1 section 2.7 escapes what text needs).
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x0c\x0e-\x1f\x7f-\x9f]")


def _header(payload: bytes) -> tuple[er7.Segment, str]:
    """MSH, read before the charset is known (as Latin-1), and its control id; Rejected (AR) when it is not
    an MSH in the standard delimiters."""
    line = re.split(rb"[\r\n]", payload.lstrip(b"\r\n"), maxsplit=1)[0].decode("latin-1")
    if not line.startswith("MSH") or len(line) < 8:
        raise Rejected("AR", [Problem("100", "The message does not start with an MSH segment.", ("MSH", 1, 1))])
    if line[3] != "|":
        fields = line.split(line[3])
        control_id = printable(fields[9]) if len(fields) > 9 else ""
        raise _Refused(control_id, "102", "MSH-1 must be the field separator |.", 1)
    fields = line.split("|")
    control_id = printable(fields[9]) if len(fields) > 9 else ""
    if fields[1] != "^~\\&":
        raise _Refused(control_id, "102", "MSH-2 must be the encoding characters ^~\\&.", 2)
    msh = er7.Segment(name="MSH", fields=("MSH", "|", *fields[1:]))
    return msh, msh.get(10)


class _Refused(Rejected):
    """AR about one MSH field, raised before MSH could be read whole (the control id as far as it reads)."""

    def __init__(self, control_id: str, code: str, text: str, field_number: int) -> None:
        super().__init__("AR", [Problem(code, text, ("MSH", 1, field_number))])
        self.control_id = control_id


def _control_character(segments: Sequence[er7.Segment]) -> Problem | None:
    """Where the first control character is (segment, its sequence among its name, field)."""
    counts: dict[str, int] = defaultdict(int)
    for segment in segments:
        counts[segment.name] += 1
        for number, value in enumerate(segment.fields):
            if _CONTROL.search(value):
                return Problem(
                    "102",
                    f"{segment.name}-{number} holds a control character (U+{ord(_CONTROL.findall(value)[0]):04X}).",
                    (segment.name, counts[segment.name], number),
                )
    return None


def _digest(segments: Sequence[er7.Segment]) -> str:
    """SHA-256 of the message as decoded, MSH-7 (the time it was sent) blanked: what tells a repeat."""
    lines = []
    for segment in segments:
        values = list(segment.fields)
        if segment.name == "MSH":
            values = ["MSH", *values[2:]]  # fields[1] is the separator itself
            if len(values) > 6:
                values[6] = ""
        lines.append("|".join(values))
    return hashlib.sha256("\r".join(lines).encode("utf-8")).hexdigest()


# --- The message -------------------------------------------------------------------------------------------


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


def _groups(segments: list[er7.Segment]) -> tuple[er7.Segment, list[_Group]]:
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
    if pid is None or not pid.raw(3):
        raise Rejected("AE", [Problem("101", "PID with PID-3 (the patient's identifiers) is required.", ("PID", 1, 3))])
    if not groups:
        raise Rejected("AE", [Problem("101", "The message has no OBR segment.", ("OBR", 1, 1))])
    return pid, groups


_UNKNOWN_ORDER = "No order item has this placer or filler order number."


def _target(group: _Group, sender: Sender) -> ports.OruTarget:
    """The order item of an OBR group among the sender's branches: an order elsewhere is answered exactly
    as one that does not exist (no existence oracle)."""
    keys = [k for k in ((group.orc.get(2) if group.orc else ""), group.obr.get(2), group.obr.get(3)) if k]
    group_number = group.orc.get(4) if group.orc else ""
    target = ports.oru_target(
        branch_ids=sender.branch_ids,
        accession_numbers=keys,
        order_numbers=[*keys, group_number],
        test_identifiers=[group.obr.get(4, 1), group.obr.get(4, 4)],
    )
    if target is None:
        raise Rejected("AE", [Problem("204", _UNKNOWN_ORDER, ("OBR", group.number, 2))])
    return target


_ABHA_AUTHORITIES = frozenset({"abha", "abdm", "ndhm", "https://healthid.ndhm.gov.in"})


def _names_patient(pid: er7.Segment, target: ports.OruTarget) -> bool:
    """Whether any PID-3 repetition is the order's patient (see the module docstring)."""
    for repetition in pid.raw(3).split("~"):
        components = repetition.split("^")
        identifier = er7.unescape(components[0]).strip()
        authority = components[3].split("&") if len(components) > 3 else []
        authorities = {er7.unescape(part).strip().casefold().rstrip("/") for part in authority[:2]}
        if authorities & _ABHA_AUTHORITIES:
            digits = identifier.replace("-", "").replace(" ", "")
            if target.national_health_id and digits == target.national_health_id:
                return True
        elif identifier and identifier == target.patient_id:
            return True
    return False


def _analyte(obx: _Obx, target: ports.OruTarget) -> ports.OruAnalyte:
    seg = obx.segment
    identifiers = {value for value in (seg.get(3, 1).strip(), seg.get(3, 4).strip()) if value}
    folded = {value.casefold() for value in identifiers}
    found = [a for a in target.analytes if a.code.casefold() in folded or a.loinc_code in identifiers]
    if len(found) == 1:
        return found[0]
    if found:
        names = ", ".join(sorted(a.code for a in found))  # the analytes come in id order, which says nothing
        text = f"OBX-3 names more than one analyte of {target.test_code}: {names}."
    else:
        text = f"OBX-3 names no analyte of {target.test_code} (by its code or LOINC code)."
    raise Rejected("AE", [Problem("204", text, ("OBX", obx.number, 3))])


def _performer(obx: er7.Segment, sender: str) -> str:
    family, given, ident = obx.get(16, 2), obx.get(16, 3), obx.get(16, 1)
    name = " ".join(filter(None, (given, family)))
    return name or ident or sender


_FIELD_OF = {"value": 5, "unit": 6, "analyte": 3, "test": 3}


def _apply(segments: list[er7.Segment], msh: er7.Segment, sender: Sender, message_time: datetime) -> list[Any]:
    name = " ".join(filter(None, (msh.get(3), msh.get(4)))) or sender.name
    pid, groups = _groups(segments)
    # (order, status, performed_at, performer, reason) -> [(ResultInput, the OBX it came from)]
    batches: dict[tuple[Any, ...], list[tuple[ports.ResultInput, _Obx]]] = defaultdict(list)
    targets: dict[uuid.UUID, ports.OruTarget] = {}
    order_ids: list[uuid.UUID] = []
    problems: list[Problem] = []
    for group in groups:
        target = _target(group, sender)
        if not _names_patient(pid, target):
            raise Rejected("AE", [Problem("204", "The patient (PID-3) is not the order's patient.", ("PID", 1, 3))])
        if target.order_id not in order_ids:
            order_ids.append(target.order_id)
            targets[target.order_id] = target
        if not group.observations:
            problems.append(Problem("101", "An OBR without any OBX.", ("OBR", group.number, 1)))
        for obx in group.observations:
            seg = obx.segment
            status = _STATUS.get(seg.get(11).upper())
            if status is None:
                problems.append(Problem("103", "OBX-11 must be F, P or C.", ("OBX", obx.number, 11)))
                continue
            try:
                performed_at = dtm_read(seg.get(14) or group.obr.get(7), message_time)
            except ValueError as exc:
                where = 14 if seg.get(14) else 7
                problems.append(
                    Problem("102", str(exc), ("OBX", obx.number, 14) if where == 14 else ("OBR", group.number, 7))
                )
                continue
            try:
                analyte = None if target.imaging else _analyte(obx, target)
                value = obx_value_read(obx.segment, obx.number, analyte)
            except Rejected as exc:
                problems.extend(exc.problems)
                continue
            reason = " ".join(obx.notes) if status == "amended" else ""
            if status == "amended" and not reason:
                reason = f"Corrected result from {name} (HL7 ORU)."
            batches[(target.order_id, status, performed_at, _performer(seg, name), reason)].append(
                (
                    ports.ResultInput(
                        test=target.test_code,
                        analyte=analyte.code if analyte is not None else None,
                        value=value.value,
                        comparator=value.comparator,
                        value_high=value.high,
                        unit=None if target.imaging or not seg.get(6) else seg.get(6),
                        note="" if status == "amended" else " ".join(obx.notes),
                        reported_range=er7.unescape(seg.raw(7)),
                        reported_flag=er7.unescape(seg.raw(8)),
                    ),
                    obx,
                )
            )
    if problems:
        raise Rejected("AE", problems)
    for (order_id, status, performed_at, performer, reason), entries in batches.items():
        try:
            ports.oru_results_apply(
                target=targets[order_id],
                results=[entry for entry, _ in entries],
                performed_at=performed_at,
                performer=performer,
                status=status,
                reason=reason,
                recorded_by=f"hl7:{sender.name}"[:200],
            )
        except ports.OruOrderUnknown:
            # Moved to another branch since it was looked up: the same answer as any unknown order.
            raise Rejected("AE", [Problem("204", _UNKNOWN_ORDER, ("OBR", 1, 2))]) from None
        except FieldError as exc:
            raise Rejected("AE", _field_problems(exc.errors, entries)) from None
        except InvalidState as exc:
            raise Rejected("AE", [Problem("103", str(exc), ("OBX", entries[0][1].number, 11))]) from None
    return order_ids


def _field_problems(errors: dict[str, str], entries: list[tuple[ports.ResultInput, _Obx]]) -> list[Problem]:
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
        return Problem("203", f"Version {printable(msh.get(12))!r} is not accepted; send 2.5.1.", ("MSH", 1, 12))
    if msh.get(9, 1) != "ORU":
        return Problem("200", f"Only ORU^R01 is accepted, not {printable(msh.get(9, 1))!r}.", ("MSH", 1, 9))
    if msh.get(9, 2) != "R01":
        return Problem("201", f"Only ORU^R01 is accepted, not ORU^{printable(msh.get(9, 2))}.", ("MSH", 1, 9))
    return None


def _answer(code: str, control_id: str, msh: er7.Segment | None, problems: list[Problem], peer: str | None) -> str:
    """A refusal: its one log line (codes and where, never the text, which may quote patient data) and ACK."""
    first = problems[0]
    where = "^".join(map(str, first.location)) if first.location else "-"
    logger.info("HL7 message %r from %s: %s %s at %s", control_id, peer, code, first.code, where)
    return ack_build(code=code, control_id=control_id, msh=msh, problems=problems)


def message_handle(payload: bytes, *, peer: str | None = None) -> str:
    """The ACK (ER7) for one received payload; never raises."""
    try:
        msh, control_id = _header(payload)
    except _Refused as exc:
        return _answer(exc.ack_code, exc.control_id, None, exc.problems, peer)
    except Rejected as exc:
        return _answer(exc.ack_code, "", None, exc.problems, peer)
    try:
        return _handle(payload, peer, msh, control_id)
    except Exception:
        # A bug of ours, not the sender's: every malformed input has its own answer in _handle.
        logger.exception("HL7 message %r from %s: internal error", printable(control_id), peer)
        return ack_build(
            code="AE",
            control_id=printable(control_id),
            msh=msh,
            problems=[Problem("207", "Not applied: internal error.")],
        )


def _handle(payload: bytes, peer: str | None, msh: er7.Segment, control_id: str) -> str:
    if not control_id:
        return _answer("AR", "", msh, [Problem("101", "MSH-10 is required.", ("MSH", 1, 10))], peer)
    if len(control_id) > MAX_CONTROL_ID or _CONTROL.search(control_id):
        problem = Problem("102", "MSH-10 must be at most 199 printable characters.", ("MSH", 1, 10))
        return _answer("AR", printable(control_id), msh, [problem], peer)
    refusal = _refusal(msh) or _control_character([msh])
    if refusal is not None:
        return _answer("AR", control_id, msh, [refusal], peer)
    try:
        message_time = dtm_read(msh.get(7), timezone.now())
    except ValueError as exc:
        return _answer("AR", control_id, msh, [Problem("102", str(exc), ("MSH", 1, 7))], peer)
    sender = sender_resolve(senders_active(), peer=peer, application=msh.get(3), facility=msh.get(4))
    if sender is None:
        text = "MSH-3/MSH-4 is not registered to a sender at this address."
        return _answer("AR", control_id, msh, [Problem("204", text, ("MSH", 1, 3))], peer)
    declared = msh.get(18).strip()
    codec = er7.CHARSET_CODECS.get(declared.upper()) if declared else _DEFAULT_CODECS.get(sender.charset, "utf-8")
    if codec is None:
        text = f"MSH-18 {printable(declared)!r} is not read here: send UNICODE UTF-8, 8859/1 or ASCII."
        return _answer("AR", control_id, msh, [Problem("103", text, ("MSH", 1, 18))], peer)
    try:
        segments = er7.parse(payload.decode(codec))
    except UnicodeDecodeError as exc:
        charset = declared or sender.charset
        text = f"The message is not {charset}: byte 0x{payload[exc.start]:02X} at offset {exc.start}."
        return _answer("AR", control_id, msh, [Problem("102", text, ("MSH", 1, 18))], peer)
    except er7.Er7Error as exc:
        return _answer("AR", control_id, msh, [Problem("100", str(exc), ("MSH", 1, 1))], peer)
    msh = segments[0]
    spoiled = _control_character(segments)
    if spoiled is not None:
        return _answer(
            "AR" if spoiled.location and spoiled.location[0] == "MSH" else "AE", control_id, msh, [spoiled], peer
        )
    digest = _digest(segments)
    try:
        with transaction.atomic():
            # Copies of one message arriving at once on two connections wait for each other here; the second
            # then finds the first's ACK instead of recording the results again.
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", [f"hl7:{sender.id}|{control_id}"]
                )
            answer = _stored_answer(sender, control_id, digest, msh, peer)
            if answer is not None:
                return answer
            order_ids = _apply(segments, msh, sender, message_time)
            ack = ack_build(code="AA", control_id=control_id, msh=msh)
            Hl7ReceivedMessage.objects.create(
                sender_id=sender.id,
                content_sha256=digest,
                sending_application=msh.get(3)[:180],
                sending_facility=msh.get(4)[:180],
                control_id=control_id,
                message_type="ORU^R01",
                ack=ack,
                order_ids=order_ids,
                peer=peer,
                received_at=timezone.now(),
            )
    except Rejected as exc:
        return _answer(exc.ack_code, control_id, msh, exc.problems, peer)
    except IntegrityError:
        # The same key stored meanwhile on another connection (outside the advisory lock's reach only if
        # the lock was bypassed): its stored ACK, or the reuse refusal, is the answer.
        answer = _stored_answer(sender, control_id, digest, msh, peer)
        if answer is not None:
            return answer
        raise
    logger.info("HL7 message %r from %s (%s): applied to %d orders", control_id, peer, sender.name, len(order_ids))
    return ack


def _stored_answer(sender: Sender, control_id: str, digest: str, msh: er7.Segment, peer: str | None) -> str | None:
    """The answer to a key already applied: its stored ACK for the same content, AR 205 for another."""
    stored = (
        Hl7ReceivedMessage.objects.filter(sender_id=sender.id, control_id=control_id)
        .values_list("ack", "content_sha256")
        .first()
    )
    if stored is None:
        return None
    ack, stored_digest = stored
    if stored_digest == digest:
        logger.info("HL7 message %r from %s: repeated, answered with its stored ACK", control_id, peer)
        return ack
    text = "control id reused: MSH-10 was applied before to another message from this sender; not applied."
    return _answer("AR", control_id, msh, [Problem("205", text, ("MSH", 1, 10))], peer)
