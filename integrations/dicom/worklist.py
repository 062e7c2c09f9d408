"""Modality Worklist C-FIND (DICOM PS3.4 annex K) translated both ways: the request identifier into a
lab.selectors.WorklistQuery, and each matching item into the response identifier.

Matching keys (each universal when absent or empty, and `*` alone too):
- Patient ID, Accession Number, Scheduled Station AE Title, Modality: single value or wildcard (`*`, `?`);
- Patient's Name: `family^given`, each part a value or a wildcard, case-insensitive (PS3.4 C.2.2.2.1);
- Scheduled Procedure Step Start Date: a date `YYYYMMDD` or a range `A-B`, `-B`, `A-` (the branch's local
  days);
- Scheduled Procedure Step Start Time: `HH[MM[SS]]` or a range of them; with a date, the two are one
  date-time range (PS3.4 C.2.2.2.5.1: `20261201-20261202` and `0900-1200` is 1 Dec 09:00 to 2 Dec 12:00),
  alone it is a time of day on any day; a time's end includes its last unit (`1200` up to 12:00:59);
- Scheduled Procedure Step Status: SCHEDULED (items `scheduled`) or STARTED (`in_progress`).
Any other key is a return key. A malformed key raises QueryError (status A900).

The Study Instance UID of an item is `2.25.<the item's UUID as an integer>` (PS3.5 B.2: a UID derived from
a UUID needs no registered root), so it is the same on every query and on every server.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from datetime import date, datetime, time, timedelta
from zoneinfo import ZoneInfo

from pydicom.dataset import Dataset

from integrations.dicom.encoding import Element, elements_dataset
from lab.models import ItemStatus, Priority
from lab.selectors import TextMatch, WorklistEntry, WorklistQuery

SPS = "ScheduledProcedureStepSequence"
_DATE = re.compile(r"^\d{8}$")
_TIME = re.compile(r"^(\d{2})(\d{2})?(\d{2})?(\.\d{1,6})?$")
_SPS_STATUS: dict[str, str] = {"SCHEDULED": ItemStatus.SCHEDULED, "STARTED": ItemStatus.IN_PROGRESS}
_STATUS_SPS: dict[str, str] = {str(value): key for key, value in _SPS_STATUS.items()}
_PRIORITY: dict[str, str] = {
    Priority.STAT.value: "STAT",
    Priority.URGENT.value: "HIGH",
    Priority.ROUTINE.value: "ROUTINE",
}
_SEX = {"male": "M", "female": "F", "other": "O"}


class QueryError(ValueError):
    """The identifier cannot be a Modality Worklist query (a malformed key)."""


def study_instance_uid(item_id: uuid.UUID) -> str:
    return f"2.25.{item_id.int}"


def _text(value: object, *, insensitive: bool = False) -> TextMatch | None:
    text = str(value if value is not None else "").strip()
    if not text or text == "*":
        return None
    if "\\" in text or len(text) > 64:
        raise QueryError(f"Not a single value: {text[:64]!r}.")
    return TextMatch(text, wildcard="*" in text or "?" in text, insensitive=insensitive)


def _person_name(value: object) -> tuple[TextMatch | None, TextMatch | None]:
    """Family and given name of a PN key (its first, alphabetic, group; middle names and titles ignored)."""
    text = str(value if value is not None else "").split("=")[0].strip()
    if len(text) > 64 or "\\" in text:
        raise QueryError(f"Not a single person name: {text[:64]!r}.")
    family, _, rest = text.partition("^")
    given = rest.partition("^")[0]
    return _text(family, insensitive=True), _text(given, insensitive=True)


def _day(text: str) -> date:
    if not _DATE.match(text):
        raise QueryError(f"Not a DICOM date (YYYYMMDD): {text[:20]!r}.")
    try:
        return date(int(text[:4]), int(text[4:6]), int(text[6:]))
    except ValueError:
        raise QueryError(f"Not a date: {text!r}.") from None


def _time(text: str, *, end: bool) -> time | None:
    """A DICOM TM; as a range's end, the first instant after it at its precision (None: after the day)."""
    match = _TIME.match(text)
    if not match:
        raise QueryError(f"Not a DICOM time (HHMMSS): {text[:20]!r}.")
    hours, minutes, seconds = (int(part) if part else 0 for part in match.groups()[:3])
    if hours > 23 or minutes > 59 or seconds > 60:
        raise QueryError(f"Not a time: {text!r}.")
    moment = datetime.combine(date.min, time(hours, minutes, min(seconds, 59)))
    if end:
        unit = (
            timedelta(seconds=1) if match.group(3) else timedelta(minutes=1) if match.group(2) else timedelta(hours=1)
        )
        moment += unit
        if moment.date() > date.min:
            return None
    return moment.time()


def _range_ends(value: object, kind: str) -> tuple[str, str]:
    """The two ends of a DICOM range key (`A-B`, `-B`, `A-`; a single value is both); ("", "") when empty."""
    text = str(value or "").strip()
    if not text:
        return "", ""
    start_text, dash, end_text = text.partition("-")
    if not dash:
        end_text = start_text
    if not start_text and not end_text:
        raise QueryError(f"A {kind} range needs at least one end.")
    return start_text, end_text


def _time_range(value: object) -> tuple[time | None, time | None]:
    start_text, end_text = _range_ends(value, "time")
    start = _time(start_text, end=False) if start_text else None
    end = _time(end_text, end=True) if end_text else None
    if start and end and start >= end:
        raise QueryError(f"The range {start_text}-{end_text} ends before it starts.")
    return start, end


def _date_range(value: object, zone: ZoneInfo) -> tuple[datetime | None, datetime | None]:
    """A DICOM date or date range (branch-local days) as [from, to) instants."""
    start_text, end_text = _range_ends(value, "date")
    start = _day(start_text) if start_text else None
    end = _day(end_text) if end_text else None
    if start and end and start > end:
        raise QueryError(f"The range {start_text}-{end_text} ends before it starts.")
    return (
        datetime.combine(start, time.min, tzinfo=zone) if start else None,
        datetime.combine(end + timedelta(days=1), time.min, tzinfo=zone) if end and end < date.max else None,
    )


def query_from_identifier(identifier: Dataset, *, branch_id: uuid.UUID, zone: ZoneInfo) -> WorklistQuery:
    step = Dataset()
    if SPS in identifier:
        items = identifier.get(SPS) or []
        if len(items) > 1:
            raise QueryError("The Scheduled Procedure Step Sequence holds at most one item in a query.")
        if items:
            step = items[0]
    status_text = str(step.get("ScheduledProcedureStepStatus", "") or "").strip()
    if status_text and status_text not in _SPS_STATUS:
        statuses: tuple[str, ...] = ()  # a status the worklist never shows (COMPLETED...): nothing matches
    else:
        statuses = (_SPS_STATUS[status_text],) if status_text else (ItemStatus.SCHEDULED, ItemStatus.IN_PROGRESS)
    scheduled_from, scheduled_to = _date_range(step.get("ScheduledProcedureStepStartDate", ""), zone)
    time_from, time_to = _time_range(step.get("ScheduledProcedureStepStartTime", ""))
    if scheduled_from or scheduled_to:
        # One date-time range: the start time on the first day, the end time on the last (PS3.4 C.2.2.2.5.1).
        if scheduled_from and time_from:
            scheduled_from = datetime.combine(scheduled_from.date(), time_from, tzinfo=zone)
        if scheduled_to and time_to:
            scheduled_to = datetime.combine(scheduled_to.date() - timedelta(days=1), time_to, tzinfo=zone)
        time_from = time_to = None
    family, given = _person_name(identifier.get("PatientName", ""))
    return WorklistQuery(
        branch_id=branch_id,
        modality=_text(step.get("Modality", "")),
        scheduled_from=scheduled_from,
        scheduled_to=scheduled_to,
        station_ae_title=_text(step.get("ScheduledStationAETitle", "")),
        patient_id=_text(identifier.get("PatientID", "")),
        accession_number=_text(identifier.get("AccessionNumber", "")),
        patient_family_name=family,
        patient_given_name=given,
        time_from=time_from,
        time_to=time_to,
        statuses=statuses,
    )


def _pn(*parts: str) -> str:
    """A DICOM person name (family^given); `^`, `=` and `\\` in a name would change its structure."""
    return "^".join(re.sub(r"[\^=\\]", " ", part).strip() for part in parts).rstrip("^")


def _code(value: str, scheme: str, meaning: str) -> list[Element]:
    return [("CodeValue", value), ("CodingSchemeDesignator", scheme), ("CodeMeaning", meaning[:64])]


def _step(entry: WorklistEntry) -> list[list[Element]]:
    local = entry.scheduled_at.astimezone(ZoneInfo(entry.time_zone))
    return [
        [
            ("ScheduledStationAETitle", entry.station_ae_title or ""),
            ("Modality", entry.modality),
            ("ScheduledProcedureStepStartDate", local.strftime("%Y%m%d")),
            ("ScheduledProcedureStepStartTime", local.strftime("%H%M%S")),
            ("ScheduledProcedureStepID", entry.accession_number[:16]),
            ("ScheduledProcedureStepDescription", entry.test_name[:64]),
            ("ScheduledProcedureStepStatus", _STATUS_SPS.get(entry.status, "")),
            ("ScheduledPerformingPhysicianName", ""),
        ]
    ]


# Each return key's value for an item; only the requested ones are built (a worklist answers many items).
_VALUES: dict[str, Callable[[WorklistEntry], str | list[list[Element]]]] = {
    "PatientName": lambda entry: _pn(entry.last_name, entry.first_name),
    "PatientID": lambda entry: entry.patient_id,
    "PatientBirthDate": lambda entry: entry.date_of_birth.strftime("%Y%m%d"),
    "PatientSex": lambda entry: _SEX.get(entry.gender, ""),
    "AccessionNumber": lambda entry: entry.accession_number[:16],
    "ReferringPhysicianName": lambda entry: _pn(entry.doctor_name),
    "RequestedProcedureID": lambda entry: entry.accession_number[:16],
    "RequestedProcedureDescription": lambda entry: entry.test_name[:64],
    "RequestedProcedureCodeSequence": lambda entry: [_code(entry.loinc_code, "LN", entry.test_name)],
    "RequestedProcedurePriority": lambda entry: _PRIORITY.get(entry.priority, "ROUTINE"),
    "StudyInstanceUID": lambda entry: study_instance_uid(entry.item_id),
    SPS: _step,
}


def requested_keys(requested: Dataset) -> tuple[str, ...]:
    """The return keys a query asks for that the worklist answers, read once per query."""
    return tuple(keyword for keyword in _VALUES if keyword in requested)


def answer_elements(entry: WorklistEntry, keys: tuple[str, ...]) -> list[Element]:
    """The response identifier of one item: the requested top-level keys (a requested sequence comes whole)."""
    elements: list[Element] = [("SpecificCharacterSet", "ISO_IR 192")]  # UTF-8: names need not be ASCII
    elements += [(keyword, _VALUES[keyword](entry)) for keyword in keys]
    return elements


def identifier_for(entry: WorklistEntry, requested: Dataset) -> Dataset:
    """The response identifier of one item as a pydicom Dataset."""
    return elements_dataset(answer_elements(entry, requested_keys(requested)))
