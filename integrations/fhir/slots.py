"""FHIR Slot from the free-cell rule (docs/api-rules.md §10, appointments.slots): the cells GET
/api/v1/appointments/slots offers, at the doctor's default slot length. Slots are computed, not stored.

Search: `practitioner` (Practitioner/<id>, required), `start` (dates with prefixes; one bound at least and
at most 14 days apart), `location` (Location/<id>, the branch; else every visible branch of the doctor),
`status` (free: the only status a computed slot has). The result parameters are the other types'
(integrations.fhir.query): `_count` (default 20, capped at 100), `_offset`, `_sort` (`start`, `_id`, each
optionally `-`), `_summary`, `_elements`, `_total`; the cells of the whole range are computed, then paged.
Read: the id names the doctor, the branch code and the start minute, and is answered while that cell is
still free (else 404).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from django.conf import settings

from appointments.ports import doctor_free_cells
from clinic.errors import NotFound
from clinic.models import Branch, Doctor
from clinic.selectors import doctor_branches_visible, doctor_get
from integrations.fhir import mapping, query
from integrations.fhir.outcome import FhirError
from integrations.fhir.search import bad, parse_date, reference_id
from integrations.models import ApiClient

MAX_DAYS = 14
PARAMS = frozenset({"practitioner", "start", "location", "status"})
SORTS = ("start", "_id")


def slot_id(doctor: Doctor, branch: Branch, start: datetime) -> str:
    # [A-Za-z0-9.-]{1,64}: 32 hex digits, the branch code (2-10 characters), the start in epoch minutes.
    return f"{doctor.id.hex}-{branch.code}-{int(start.timestamp()) // 60}"


def slot_resource(doctor: Doctor, branch: Branch, start: datetime, end: datetime) -> dict[str, Any]:
    zone = ZoneInfo(branch.time_zone)
    # Slot.schedule must reference a Schedule, which this server does not serve: a logical reference (the
    # doctor at the branch) instead of a literal one that would dangle.
    return {
        "resourceType": "Slot",
        "id": slot_id(doctor, branch, start),
        "schedule": {
            "identifier": {"system": mapping.system("schedule"), "value": f"{doctor.id}/{branch.code}"},
            "display": f"{doctor.name} at {branch.name}",
        },
        "status": "free",
        "start": start.astimezone(zone).isoformat(),
        "end": end.astimezone(zone).isoformat(),
    }


def _doctor(client: ApiClient, raw: str | None) -> Doctor:
    if raw is None:
        raise bad("practitioner", "required (Practitioner/<id>): slots are a doctor's.")
    key = reference_id(raw, "Practitioner")
    try:
        return doctor_get(client=client, doctor_id=key or "")
    except NotFound:
        raise bad("practitioner", f"no practitioner {raw!r}.") from None


def _branches(client: ApiClient, doctor: Doctor, raw: str | None) -> list[Branch]:
    branches = doctor_branches_visible(client=client, doctor=doctor)
    if raw is None:
        return branches
    key = reference_id(raw, "Location")
    return [branch for branch in branches if str(branch.id) == key]


def _days(values: list[str]) -> list[date]:
    if not values:
        raise bad("start", "required: a day (2026-03-02) or a range (ge2026-03-02&start=le2026-03-08).")
    local = ZoneInfo(settings.TIME_ZONE)
    first, last = date.min, date.max
    for raw in values:
        value = parse_date("start", raw)
        lo, hi = value.lo.astimezone(local).date(), (value.hi - timedelta(microseconds=1)).astimezone(local).date()
        if value.prefix == "eq":
            first, last = max(first, lo), min(last, hi)
        elif value.prefix in ("ge", "sa", "gt"):
            first = max(first, lo if value.prefix == "ge" else hi)
        elif value.prefix in ("le", "lt", "eb"):
            last = min(last, hi if value.prefix == "le" else lo)
        else:
            raise bad("start", f"prefix {value.prefix!r} is not supported on Slot (eq ge gt sa le lt eb).")
    if first == date.min or last == date.max:
        raise bad("start", "needs a first and a last day.")
    if (last - first).days >= MAX_DAYS:
        raise bad("start", f"at most {MAX_DAYS} days at a time.")
    return [first + timedelta(days=offset) for offset in range((last - first).days + 1)]


@dataclass
class SlotPage:
    slots: list[dict[str, Any]]
    total: int
    result: query.ResultParams


def slot_result(params: list[tuple[str, str]]) -> query.ResultParams:
    """The result parameters of a Slot search, the filters' values kept for the paging links."""
    query.check_format(params)
    result = query.ResultParams()
    result.order = ["start"]
    for name, value in params:
        if len(value) > query.MAX_VALUE_LENGTH:
            raise bad(name, f"longer than {query.MAX_VALUE_LENGTH} characters.")
        if query.result_param(result, "Slot", name, value):
            continue
        if name == "_sort":
            keys = value.split(",")
            if any(key.removeprefix("-") not in SORTS for key in keys):
                raise bad("_sort", f"{value!r}: the sort keys of Slot are {', '.join(SORTS)}, each optionally with -.")
            result.order = keys
        if name in PARAMS or name == "_sort":
            result.used.append((name, value))
    return result


def _sorted(found: list[dict[str, Any]], order: list[str]) -> list[dict[str, Any]]:
    # Stable sorts, the last key first; the id breaks ties. Starts carry their branch's offset, so they are
    # compared as instants.
    found = sorted(found, key=lambda slot: slot["id"])
    for key in reversed(order):
        name = key.removeprefix("-")
        found.sort(
            key=lambda slot: datetime.fromisoformat(slot["start"]) if name == "start" else slot["id"],
            reverse=key.startswith("-"),
        )
    return found


def slot_page(client: ApiClient, params: list[tuple[str, str]]) -> SlotPage:
    result = slot_result(params)
    found = _sorted(slot_search(client, params), result.order)
    shown = [] if result.count_only else found[result.offset : result.offset + result.count]
    return SlotPage([result.subset(slot) for slot in shown], len(found), result)


def slot_search(client: ApiClient, params: list[tuple[str, str]]) -> list[dict[str, Any]]:
    single = {name: value for name, value in params if name in ("practitioner", "location", "status")}
    if single.get("status", "free") != "free":
        return []
    doctor = _doctor(client, single.get("practitioner"))
    days = _days([value for name, value in params if name == "start"])
    duration = timedelta(minutes=doctor.default_slot_minutes)
    found = []
    for branch in _branches(client, doctor, single.get("location")):
        for day in days:
            for cell in doctor_free_cells(doctor=doctor, branch=branch, day=day, duration=duration):
                found.append(slot_resource(doctor, branch, cell.start, cell.end))
    found.sort(key=lambda slot: (slot["start"], slot["id"]))
    return found


def slot_read(client: ApiClient, key: str) -> dict[str, Any]:
    doctor_hex, _, rest = key.partition("-")
    code, _, minute = rest.rpartition("-")
    missing = FhirError(404, f"Slot/{key} is not known or no longer free.")
    if not (doctor_hex.isascii() and minute.isascii() and minute.isdigit() and len(minute) < 12):
        raise missing
    try:
        doctor = doctor_get(client=client, doctor_id=doctor_hex)
    except NotFound:
        raise missing from None
    branch = next(
        (branch for branch in doctor_branches_visible(client=client, doctor=doctor) if branch.code == code), None
    )
    if branch is None:
        raise missing
    try:
        start = datetime.fromtimestamp(int(minute) * 60, tz=ZoneInfo(branch.time_zone))
    except (OverflowError, ValueError, OSError):
        raise missing from None
    duration = timedelta(minutes=doctor.default_slot_minutes)
    cells = doctor_free_cells(doctor=doctor, branch=branch, day=start.date(), duration=duration)
    cell = next((cell for cell in cells if cell.start == start), None)
    if cell is None:
        raise missing
    return slot_resource(doctor, branch, cell.start, cell.end)
