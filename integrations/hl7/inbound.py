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
import ipaddress
import logging
import re
import uuid
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal, InvalidOperation
from typing import Any

from django.conf import settings
from django.contrib.postgres.aggregates import ArrayAgg
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from clinic.errors import FieldError, InvalidState
from integrations.hl7 import er7
from integrations.hl7.messages import ts
from integrations.hl7.models import Hl7Charset, Hl7ReceivedMessage, Hl7Sender
from lab import ports

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
                [problem.code, _CODE_TEXT.get(problem.code, ""), "HL70357"],
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


# --- Senders (docs/hl7-inbound.md) --------------------------------------------------------------------------


@dataclass(frozen=True)
class Sender:
    id: uuid.UUID
    name: str
    networks: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]
    application: str  # casefolded; "" takes any not registered to another sender
    facility: str
    branch_ids: tuple[uuid.UUID, ...]
    charset: str

    @property
    def specificity(self) -> int:
        return bool(self.application) + bool(self.facility)

    def presents(self, application: str, facility: str) -> bool:
        return (not self.application or self.application == application) and (
            not self.facility or self.facility == facility
        )


def _networks(values: Sequence[str]) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
    networks = []
    for value in values:
        try:
            networks.append(ipaddress.ip_network(value, strict=False))
        except ValueError:
            continue  # validated on save; a row written around the validator reaches nobody
    return tuple(networks)


def senders_active() -> list[Sender]:
    """Every active sender with its branches, in one query (a handful of rows, read per message so that a
    sender switched off or narrowed in the admin is so for the next message)."""
    rows = (
        Hl7Sender.objects.filter(is_active=True)
        .annotate(branch_ids=ArrayAgg("branches__id", distinct=True))
        .values("id", "name", "networks", "sending_application", "sending_facility", "default_charset", "branch_ids")
    )
    return [
        Sender(
            id=row["id"],
            name=row["name"],
            networks=_networks(row["networks"]),
            application=row["sending_application"].strip().casefold(),
            facility=row["sending_facility"].strip().casefold(),
            branch_ids=tuple(branch for branch in row["branch_ids"] if branch is not None),
            charset=row["default_charset"],
        )
        for row in rows
    ]


def sender_resolve(senders: Sequence[Sender], *, peer: str | None, application: str, facility: str) -> Sender | None:
    """The registered sender of a message from `peer` presenting MSH-3 `application` and MSH-4 `facility`,
    or None (see the module docstring: an identity belongs to its most specific registration)."""
    try:
        ip = ipaddress.ip_address(peer or "")
    except ValueError:
        return None
    if ip.version == 6 and ip.ipv4_mapped:
        ip = ip.ipv4_mapped
    application, facility = application.strip().casefold(), facility.strip().casefold()
    owners = [s for s in senders if s.specificity and s.presents(application, facility)]
    if owners:
        top = max(s.specificity for s in owners)
        candidates = [s for s in owners if s.specificity == top]
    else:
        candidates = [s for s in senders if not s.specificity]
    reachable = [s for s in candidates if any(ip in network for network in s.networks)]
    if len(reachable) > 1:
        logger.warning("HL7 senders %s all match one message: narrow their networks", [s.name for s in reachable])
        return None
    return reachable[0] if reachable else None


# --- Reading the bytes -------------------------------------------------------------------------------------

_CODECS = {"ASCII": "ascii", "8859/1": "latin-1", "UNICODE UTF-8": "utf-8", "UNICODE": "utf-8", "UTF-8": "utf-8"}
_DEFAULT_CODECS: dict[str, str] = {
    Hl7Charset.UTF8.value: "utf-8",
    Hl7Charset.LATIN1.value: "latin-1",
    Hl7Charset.ASCII.value: "ascii",
}
# C0 controls but tab (segments end in CR or LF, which the parser splits on), DEL and C1 controls: none of
# them has a place in a field (HL7 v2.5.1 section 2.7 escapes what text needs).
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x0c\x0e-\x1f\x7f-\x9f]")
_MAX_CONTROL_ID = 199  # Hl7ReceivedMessage.control_id; MSH-10 is ST(199)


def _printable(text: str) -> str:
    """What of a field that failed to read may be echoed in an ACK."""
    return "".join(ch for ch in text if " " <= ch <= "~")[:_MAX_CONTROL_ID]


def _header(payload: bytes) -> tuple[er7.Segment, str]:
    """MSH, read before the charset is known (as Latin-1), and its control id; Rejected (AR) when it is not
    an MSH in the standard delimiters."""
    line = re.split(rb"[\r\n]", payload.lstrip(b"\r\n"), maxsplit=1)[0].decode("latin-1")
    if not line.startswith("MSH") or len(line) < 8:
        raise Rejected("AR", [Problem("100", "The message does not start with an MSH segment.", ("MSH", 1, 1))])
    if line[3] != "|":
        fields = line.split(line[3])
        control_id = _printable(fields[9]) if len(fields) > 9 else ""
        raise _Refused(control_id, "102", "MSH-1 must be the field separator |.", 1)
    fields = line.split("|")
    control_id = _printable(fields[9]) if len(fields) > 9 else ""
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


# --- Dates and times ---------------------------------------------------------------------------------------

_DTM = re.compile(r"(\d{4})(\d{2})?(\d{2})?(\d{2})?(\d{2})?(\d{2})?(?:\.\d{1,4})?([+-]\d{4})?")


def _when(text: str, fallback: datetime) -> datetime:
    """An HL7 DTM, YYYY[MM[DD[HH[MM[SS[.S[S[S[S]]]]]]]]][+/-ZZZZ]; without an offset, the clinic's
    TIME_ZONE. ValueError naming the text when it is no such time (year 0, month 13, offset +9999...)."""
    if not text:
        return fallback
    match = _DTM.fullmatch(text)
    if match is None:
        raise ValueError(f"{_printable(text)!r} is not an HL7 date and time (YYYYMMDDHHMMSS[+ZZZZ]).")
    year, month, day, hour, minute, second, offset = match.groups()
    if (month is None and day is not None) or (hour is None and minute is not None):
        raise ValueError(f"{text!r} is not an HL7 date and time.")
    try:
        moment = datetime(int(year), int(month or 1), int(day or 1), int(hour or 0), int(minute or 0))  # noqa: DTZ001 - made aware below
        moment = moment.replace(second=int(second or 0))
        if year < "1900":
            raise ValueError
        if offset is None:
            return timezone.make_aware(moment)
        hours, minutes = int(offset[1:3]), int(offset[3:5])
        if hours > 14 or minutes > 59:
            raise ValueError
        shift = timedelta(hours=hours, minutes=minutes) * (1 if offset[0] == "+" else -1)
        return (moment - shift).replace(tzinfo=UTC)
    except (ValueError, OverflowError):
        raise ValueError(f"{text!r} is not a possible date and time.") from None


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
        names = ", ".join(a.code for a in found)
        text = f"OBX-3 names more than one analyte of {target.test_code}: {names}."
    else:
        text = f"OBX-3 names no analyte of {target.test_code} (by its code or LOINC code)."
    raise Rejected("AE", [Problem("204", text, ("OBX", obx.number, 3))])


_NM = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)")
_SN_COMPARATORS = {"": "", "=": "", "<": "<", "<=": "<=", ">": ">", ">=": ">="}


@dataclass(frozen=True)
class _Value:
    value: Any
    comparator: str = ""
    high: Decimal | None = None


def _number(text: str, obx: _Obx, kind: str) -> Decimal:
    text = text.strip()
    if _NM.fullmatch(text):
        try:
            return Decimal(text)
        except InvalidOperation:
            pass
    raise Rejected("AE", [Problem("102", f"OBX-5 is not a number ({kind}).", ("OBX", obx.number, 5))])


def _value(obx: _Obx, analyte: ports.OruAnalyte | None) -> _Value:
    """OBX-5 read by OBX-2 for this analyte (None: an imaging report); see the module docstring."""
    seg = obx.segment
    value_type = seg.get(2).strip().upper() or "ST"
    raw = seg.raw(5)
    quantity = analyte is not None and analyte.value_type == "quantity"
    if value_type == "NM":
        text = er7.unescape(raw.split("~")[0])
        return _Value(_number(text, obx, "NM")) if quantity else _Value(text)
    if value_type == "SN":
        parts = [er7.unescape(part).strip() for part in raw.split("~")[0].split("^")][:4]
        comparator, first, separator, second = [*parts, "", "", ""][:4]
        if not quantity:
            return _Value(f"{comparator}{first}{separator}{second}")
        if comparator not in _SN_COMPARATORS:
            raise Rejected(
                "AE", [Problem("102", f"SN comparator {comparator!r} cannot be stored.", ("OBX", obx.number, 5))]
            )
        if not separator and not second:
            return _Value(_number(first, obx, "SN"), comparator=_SN_COMPARATORS[comparator])
        if separator == "-" and second and not _SN_COMPARATORS[comparator]:
            return _Value(_number(first, obx, "SN"), high=_number(second, obx, "SN"))
        assert analyte is not None
        shown = f"{first}{separator}{second}"
        kind = "a ratio" if separator in (":", "/") else "not a number or a range"
        text = f"SN {shown} is {kind}; {analyte.code} is a quantity: send a number, a comparator and a number (>14) or a range (10-20)."
        raise Rejected("AE", [Problem("102", text, ("OBX", obx.number, 5))])
    if value_type == "ST":
        return _Value(er7.unescape(raw.split("~")[0]))
    if value_type in ("TX", "FT"):
        return _Value("\n".join(er7.unescape(rep) for rep in raw.split("~")))
    if value_type in ("CE", "CWE", "CNE"):
        code, text, alternate, alternate_text = (seg.get(5, n).strip() for n in (1, 2, 4, 5))
        if analyte is not None and analyte.value_type == "coded":
            allowed = {value.casefold(): value for value in analyte.coded_values}
            for candidate in (code, text, alternate, alternate_text):
                if candidate and candidate.casefold() in allowed:
                    return _Value(allowed[candidate.casefold()])
        return _Value(text or code)
    raise Rejected(
        "AE",
        [Problem("102", f"OBX-2 {value_type!r} is not taken: NM, SN, ST, TX, FT, CE or CWE.", ("OBX", obx.number, 2))],
    )


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
                performed_at = _when(seg.get(14) or group.obr.get(7), message_time)
            except ValueError as exc:
                where = 14 if seg.get(14) else 7
                problems.append(
                    Problem("102", str(exc), ("OBX", obx.number, 14) if where == 14 else ("OBR", group.number, 7))
                )
                continue
            try:
                analyte = None if target.imaging else _analyte(obx, target)
                value = _value(obx, analyte)
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
        return Problem("203", f"Version {_printable(msh.get(12))!r} is not accepted; send 2.5.1.", ("MSH", 1, 12))
    if msh.get(9, 1) != "ORU":
        return Problem("200", f"Only ORU^R01 is accepted, not {_printable(msh.get(9, 1))!r}.", ("MSH", 1, 9))
    if msh.get(9, 2) != "R01":
        return Problem("201", f"Only ORU^R01 is accepted, not ORU^{_printable(msh.get(9, 2))}.", ("MSH", 1, 9))
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
        logger.exception("HL7 message %r from %s: internal error", _printable(control_id), peer)
        return ack_build(
            code="AE",
            control_id=_printable(control_id),
            msh=msh,
            problems=[Problem("207", "Not applied: internal error.")],
        )


def _handle(payload: bytes, peer: str | None, msh: er7.Segment, control_id: str) -> str:
    if not control_id:
        return _answer("AR", "", msh, [Problem("101", "MSH-10 is required.", ("MSH", 1, 10))], peer)
    if len(control_id) > _MAX_CONTROL_ID or _CONTROL.search(control_id):
        problem = Problem("102", "MSH-10 must be at most 199 printable characters.", ("MSH", 1, 10))
        return _answer("AR", _printable(control_id), msh, [problem], peer)
    refusal = _refusal(msh) or _control_character([msh])
    if refusal is not None:
        return _answer("AR", control_id, msh, [refusal], peer)
    try:
        message_time = _when(msh.get(7), timezone.now())
    except ValueError as exc:
        return _answer("AR", control_id, msh, [Problem("102", str(exc), ("MSH", 1, 7))], peer)
    sender = sender_resolve(senders_active(), peer=peer, application=msh.get(3), facility=msh.get(4))
    if sender is None:
        text = "MSH-3/MSH-4 is not registered to a sender at this address."
        return _answer("AR", control_id, msh, [Problem("204", text, ("MSH", 1, 3))], peer)
    declared = msh.get(18).strip()
    codec = _CODECS.get(declared.upper()) if declared else _DEFAULT_CODECS.get(sender.charset, "utf-8")
    if codec is None:
        text = f"MSH-18 {_printable(declared)!r} is not read here: send UNICODE UTF-8, 8859/1 or ASCII."
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
