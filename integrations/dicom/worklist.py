"""Modality Worklist C-FIND (DICOM PS3.4 annex K) translated both ways: the request identifier into a
lab.selectors.WorklistQuery, and each matching item into the response identifier.

Matching keys (each universal when absent or empty, and `*` alone too):
- Patient ID, Accession Number, Scheduled Station AE Title, Modality: single value or wildcard (`*`, `?`);
- Patient's Name: `family^given`, each part a value or a wildcard, case-insensitive (PS3.4 C.2.2.2.1); a key
  with component groups (`alphabetic=ideographic=phonetic`) is matched group by group (PS3.4 C.2.2.2.1.1): we
  store names in the alphabetic group only, so a key constraining the ideographic or phonetic group (`=Gill`)
  matches nothing, and an empty or `*` group matches anything;
- Scheduled Procedure Step Start Date: a date `YYYYMMDD` or a range `A-B`, `-B`, `A-` (the branch's local
  days);
- Scheduled Procedure Step Start Time: `HH[MM[SS]]` or a range of them; with a date, the two are one
  date-time range (PS3.4 C.2.2.2.5.1: `20261201-20261202` and `0900-1200` is 1 Dec 09:00 to 2 Dec 12:00),
  alone it is a time of day on any day; a time's end includes its last unit (`1200` up to 12:00:59);
- Scheduled Procedure Step Status: SCHEDULED (items `scheduled`) or STARTED (`in_progress`);
- Scheduled Station Name: a value or a wildcard, against the imaging station's name.
Any other key is a return key. A malformed key raises QueryError (status A900).

Answers (PS3.4 K.6, Table K.6-1) hold every requested key the table lists, and no other: Type 1 keys with
their value, Type 2 keys empty when unknown (patient weight, admission id...), the conditional ones as their
conditions say (Requested Contrast Agent and Pre-Medication are 2C, "if contrast or pre-medication is to be
applied": we order none, so they are empty; the Scheduled Protocol Code Sequence is 1C beside the step
description: one coded item, the procedure's code). A sequence asked with an item is answered with only the
attributes that item asks for; a sequence asked empty (or with an empty item) is a universal request for all
of them (PS3.4 C.2.2.2.6). Medical Alerts and Allergies come from the patient's active diagnoses and recorded
allergies (patients.ports), read once per C-FIND for all its answers, each value cut to 64 characters and
joined with backslashes (LO, VM 1-n). Keys outside the table (private ones, other modules) are not answered.

The Study Instance UID of an item is `2.25.<the item's UUID as an integer>` (PS3.5 B.2: a UID derived from
a UUID needs no registered root), so it is the same on every query and on every server.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from pydicom.dataset import Dataset

from integrations.dicom.encoding import Element, elements_dataset
from lab.ports import ItemStatus, Priority, TextMatch, WorklistEntry, WorklistQuery, study_instance_uid
from patients.ports import ClinicalAlerts, clinical_alerts

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


def _text(value: object, *, insensitive: bool = False) -> TextMatch | None:
    text = str(value if value is not None else "").strip()
    if not text or text == "*":
        return None
    if "\\" in text or len(text) > 64:
        raise QueryError(f"Not a single value: {text[:64]!r}.")
    return TextMatch(text, wildcard="*" in text or "?" in text, insensitive=insensitive)


def _person_name(value: object) -> tuple[TextMatch | None, TextMatch | None, bool]:
    """Family and given name of a PN key's alphabetic group (middle names and titles ignored), and whether the
    key constrains a group we do not store (ideographic, phonetic): then nothing matches."""
    text = str(value if value is not None else "").strip()
    alphabetic, *others = text.split("=")
    if "\\" in text or len(others) > 2 or len(alphabetic) > 64 or any(len(group) > 64 for group in others):
        raise QueryError(f"Not a single person name: {text[:64]!r}.")
    unstored = any(group.strip().strip("^") not in ("", "*") for group in others)
    family, _, rest = alphabetic.strip().partition("^")
    given = rest.partition("^")[0]
    return _text(family, insensitive=True), _text(given, insensitive=True), unstored


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
    family, given, unstored_group = _person_name(identifier.get("PatientName", ""))
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
        station_name=_text(step.get("ScheduledStationName", "")),
        nothing=unstored_group,
    )


_TITLES = re.compile(r"^(?:dr|prof|mr|mrs|ms|miss)\.?\s+", re.IGNORECASE)


def _pn(*parts: str) -> str:
    """A DICOM person name (family^given); `^`, `=` and `\\` in a name would change its structure."""
    return "^".join(re.sub(r"[\^=\\]", " ", part).strip() for part in parts).rstrip("^")


def _doctor_pn(name: str) -> str:
    """A doctor's name as family^given, the title left out ("Dr. Anil Rao" is Rao^Anil)."""
    words = _TITLES.sub("", name.strip()).split()
    if not words:
        return ""
    return _pn(words[-1], " ".join(words[:-1]))


def _lo_values(values: tuple[str, ...]) -> str:
    """A multi-valued LO: each value without backslashes nor control characters, cut to 64, joined by `\\`."""
    cleaned = (re.sub(r"[\\\x00-\x1f]", " ", value).strip()[:64].strip() for value in values)
    return "\\".join(value for value in cleaned if value)


def _code_item(entry: WorklistEntry) -> dict[str, str]:
    """The procedure's code: LOINC when the test has one, else the local code (a private scheme, PS3.16 8.2)."""
    if entry.loinc_code:
        return {"CodeValue": entry.loinc_code, "CodingSchemeDesignator": "LN", "CodeMeaning": entry.test_name[:64]}
    return {
        "CodeValue": entry.test_code[:16],
        "CodingSchemeDesignator": "99CLINIC",
        "CodeMeaning": entry.test_name[:64],
    }


# An item's attributes, every one we answer (a sequence value is a list of such items); what is sent is
# filtered to what the query asked.
Item = dict[str, Any]


def _step_item(entry: WorklistEntry) -> Item:
    local = entry.scheduled_at.astimezone(ZoneInfo(entry.time_zone))
    return {
        "ScheduledStationAETitle": entry.station_ae_title or "",  # 1
        "ScheduledProcedureStepStartDate": local.strftime("%Y%m%d"),  # 1
        "ScheduledProcedureStepStartTime": local.strftime("%H%M%S"),  # 1
        "Modality": entry.modality,  # 1
        "ScheduledPerformingPhysicianName": "",  # 2: the technologist is not known when it is scheduled
        "ScheduledProcedureStepDescription": entry.test_name[:64],  # 1C
        "ScheduledStationName": (entry.station_name or "")[:16],  # 2
        "ScheduledProcedureStepLocation": entry.station_location or "",  # 2
        "ScheduledProtocolCodeSequence": [_code_item(entry)],  # 1C
        "PreMedication": "",  # 2C
        "ScheduledProcedureStepID": entry.accession_number[:16],  # 1
        "RequestedContrastAgent": "",  # 2C
        "ScheduledProcedureStepStatus": _STATUS_SPS.get(entry.status, ""),  # 3
        "CommentsOnTheScheduledProcedureStep": "",  # 3
    }


_CODE_KEYS = ("CodeValue", "CodingSchemeDesignator", "CodeMeaning")
_REFERENCE_KEYS = ("ReferencedSOPClassUID", "ReferencedSOPInstanceUID")
# The attributes of each sequence's items that a query may ask for.
_ITEM_KEYS: dict[str, tuple[str, ...]] = {
    SPS: (
        "ScheduledStationAETitle",
        "ScheduledProcedureStepStartDate",
        "ScheduledProcedureStepStartTime",
        "Modality",
        "ScheduledPerformingPhysicianName",
        "ScheduledProcedureStepDescription",
        "ScheduledStationName",
        "ScheduledProcedureStepLocation",
        "ScheduledProtocolCodeSequence",
        "PreMedication",
        "ScheduledProcedureStepID",
        "RequestedContrastAgent",
        "ScheduledProcedureStepStatus",
        "CommentsOnTheScheduledProcedureStep",
    ),
    "ScheduledProtocolCodeSequence": _CODE_KEYS,
    "RequestedProcedureCodeSequence": _CODE_KEYS,
    "ReferencedStudySequence": _REFERENCE_KEYS,
    "ReferencedPatientSequence": _REFERENCE_KEYS,
}


class Answering:
    """What one item's answer is built from: the entry, and its patient's alerts when they were asked for."""

    __slots__ = ("alerts", "entry")

    def __init__(self, entry: WorklistEntry, alerts: ClinicalAlerts | None) -> None:
        self.entry = entry
        self.alerts = alerts


# Table K.6-1's return keys outside the step (type in the comment); only the requested ones are built.
_VALUES: dict[str, Callable[[Answering], str | list[Item]]] = {
    # Patient identification and demographics
    "PatientName": lambda a: _pn(a.entry.last_name, a.entry.first_name),  # 1
    "PatientID": lambda a: a.entry.patient_id,  # 1
    "IssuerOfPatientID": lambda a: "",  # 3
    "PatientBirthDate": lambda a: a.entry.date_of_birth.strftime("%Y%m%d"),  # 2
    "PatientSex": lambda a: _SEX.get(a.entry.gender, ""),  # 2
    "PatientWeight": lambda a: "",  # 2: not recorded with the order
    "ConfidentialityConstraintOnPatientDataDescription": lambda a: "",  # 2
    # Patient medical
    "PatientState": lambda a: "",  # 2
    "PregnancyStatus": lambda a: "",  # 2 (US: empty, not 4 "unknown", which would be a statement)
    "MedicalAlerts": lambda a: _lo_values(a.alerts.medical_alerts) if a.alerts else "",  # 2
    "Allergies": lambda a: _lo_values(a.alerts.allergies) if a.alerts else "",  # 2
    "SpecialNeeds": lambda a: "",  # 2
    # Visit
    "AdmissionID": lambda a: "",  # 2
    "CurrentPatientLocation": lambda a: "",  # 2
    "ReferencedPatientSequence": lambda a: [],  # 2
    # Imaging service request
    "AccessionNumber": lambda a: a.entry.accession_number[:16],  # 2
    "RequestingPhysician": lambda a: _doctor_pn(a.entry.doctor_name),  # 2
    "ReferringPhysicianName": lambda a: _doctor_pn(a.entry.doctor_name),  # 2
    "PlacerOrderNumberImagingServiceRequest": lambda a: a.entry.order_number[:64],  # 3
    "ImagingServiceRequestComments": lambda a: "",  # 3
    # Requested procedure
    "RequestedProcedureID": lambda a: a.entry.accession_number[:16],  # 1
    "RequestedProcedureDescription": lambda a: a.entry.test_name[:64],  # 1C
    "RequestedProcedureCodeSequence": lambda a: [_code_item(a.entry)],  # 1C
    "StudyInstanceUID": lambda a: study_instance_uid(a.entry.item_id),  # 1
    "ReferencedStudySequence": lambda a: [],  # 2
    "RequestedProcedurePriority": lambda a: _PRIORITY.get(a.entry.priority, "ROUTINE"),  # 2
    "PatientTransportArrangements": lambda a: "",  # 2
    "ReasonForTheRequestedProcedure": lambda a: "",  # 3
    "RequestedProcedureComments": lambda a: "",  # 3
    # Scheduled procedure step
    SPS: lambda a: [_step_item(a.entry)],  # 1
}
ALERT_KEYS = frozenset({"MedicalAlerts", "Allergies"})


@dataclass(frozen=True)
class Requested:
    """The return keys a query asks for that the worklist answers, in the order asked; for a sequence, what its
    items ask for (PS3.4 C.2.2.2.6). Read once per query."""

    keys: tuple[tuple[str, Requested | None], ...]

    @property
    def alerts(self) -> bool:
        return any(keyword in ALERT_KEYS for keyword, _ in self.keys)


def _everything(sequence: str) -> Requested:
    return Requested(tuple((key, _everything(key) if key in _ITEM_KEYS else None) for key in _ITEM_KEYS[sequence]))


def _asked(identifier: Dataset, known: tuple[str, ...] | dict[str, Any]) -> Requested:
    keys: list[tuple[str, Requested | None]] = []
    for element in identifier:
        keyword = element.keyword
        if keyword not in known:
            continue
        if keyword in _ITEM_KEYS:
            items = element.value or []
            sub = _asked(items[0], _ITEM_KEYS[keyword]) if items and len(items[0]) else _everything(keyword)
            keys.append((keyword, sub))
        else:
            keys.append((keyword, None))
    return Requested(tuple(keys))


def requested_keys(requested: Dataset) -> Requested:
    """The return keys a query asks for that the worklist answers (Table K.6-1), read once per query."""
    return _asked(requested, _VALUES)


def _item_elements(item: Item, requested: Requested) -> list[Element]:
    elements: list[Element] = []
    for keyword, sub in requested.keys:
        value = item[keyword]
        if sub is not None:
            elements.append((keyword, [_item_elements(part, sub) for part in value]))
        else:
            elements.append((keyword, value))
    return elements


def answers_alerts(entries: list[WorklistEntry], requested: Requested) -> dict[uuid.UUID, ClinicalAlerts]:
    """The patients' alerts for these answers, in one read, when the query asks for them."""
    if not requested.alerts or not entries:
        return {}
    return clinical_alerts({entry.patient_uuid for entry in entries})


def answer_elements(
    entry: WorklistEntry, requested: Requested, alerts: dict[uuid.UUID, ClinicalAlerts] | None = None
) -> list[Element]:
    """The response identifier of one item: exactly the requested keys (a sequence's items filtered alike)."""
    answering = Answering(entry, (alerts or {}).get(entry.patient_uuid))
    elements: list[Element] = [("SpecificCharacterSet", "ISO_IR 192")]  # UTF-8: names need not be ASCII
    for keyword, sub in requested.keys:
        value = _VALUES[keyword](answering)
        if sub is not None:
            assert isinstance(value, list)
            elements.append((keyword, [_item_elements(item, sub) for item in value]))
        else:
            assert isinstance(value, str)
            elements.append((keyword, value))
    return elements


def identifier_for(entry: WorklistEntry, requested: Dataset) -> Dataset:
    """The response identifier of one item as a pydicom Dataset (no alerts read: for tests and tools)."""
    return elements_dataset(answer_elements(entry, requested_keys(requested)))
