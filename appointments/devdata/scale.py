"""Scale data (issue 7): weekly sessions, two years of appointments with their history, token counters,
and the outpatient visits of completed appointments, loaded with COPY.

Valid by construction, so the exclusion constraints never have to reject anything: every appointment is
a distinct cell of its doctor's session grid (one slot length per doctor, sessions that never overlap),
and a patient's appointments are checked against each other for overlap whatever their status. Token
numbers are 1..k per doctor and local day in booking order (created_at follows the token).
"""

from __future__ import annotations

import random
import zoneinfo
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from appointments.models import Appointment
from clinic.devdata.scale import Organisation, Timings, copy_rows, rng_uuid
from patients.devdata.scale import Patients

HEAVY_VISITS = 500
CANCEL_REASONS = ["Patient request", "Feeling better", "Travelling", "Doctor unavailable", "Rescheduled elsewhere"]
VISIT_TYPES = [(t.value, t.label) for t in Appointment.VisitType]
VISIT_TYPE_WEIGHTS = [70, 20, 5, 4, 1]


@dataclass(frozen=True, slots=True)
class CompletedAppointment:
    """What later generators (lab orders) need of a completed appointment."""

    id: Any
    patient: int  # index into Patients
    doctor: int  # index into Organisation.doctors
    branch: int  # index into Organisation.branches
    checked_in: datetime
    completed: datetime


@dataclass
class Scheduled:
    appointments: int
    visits: int
    heavy_patients: int
    completed: list[CompletedAppointment]


@dataclass
class _Booking:
    doctor: int
    day: int  # offset from first_day
    start: int  # local minute of the day
    branch: int
    patient: int
    status: str
    token: int = 0


def generate_sessions(rng: random.Random, *, organisation: Organisation, moment: datetime, timings: Timings) -> int:
    rows = []
    for doctor in organisation.doctors:
        for weekday, sessions in sorted(doctor.sessions.items()):
            for branch_index, start, end in sessions:
                rows.append(
                    (rng_uuid(rng), doctor.id, organisation.branches[branch_index].id, weekday,
                     time(start // 60, start % 60), time(end // 60, end % 60), moment, moment)
                )  # fmt: skip
    return copy_rows(
        "appointments_weeklysession",
        ["id", "doctor_id", "branch_id", "weekday", "start", "end", "created_at", "updated_at"],
        rows,
        timings=timings,
    )


def _status(rng: random.Random, day: int, today: int) -> str:
    roll = rng.random()
    if day < today:
        return "completed" if roll < 0.75 else "cancelled" if roll < 0.87 else "no_show"
    return "booked" if roll < 0.88 else "cancelled"


def generate_appointments(
    rng: random.Random,
    *,
    organisation: Organisation,
    patients: Patients,
    count: int,
    first_day: date,
    today: date,
    last_day: date,
    timings: Timings,
) -> Scheduled:
    """About `count` appointments of random patients over [first_day, last_day], plus 500+ completed ones
    for each of 0.1 % of the patients (the earliest registered: the long histories)."""
    doctors = organisation.doctors
    today_offset, horizon = (today - first_day).days, (last_day - first_day).days
    first_weekday = first_day.weekday()
    # Per doctor and weekday: (branch index, first minute, number of cells) of each session.
    grids = [
        {
            weekday: [(b, s, (e - s) // doctor.slot_minutes) for b, s, e in sessions if e - s >= doctor.slot_minutes]
            for weekday, sessions in doctor.sessions.items()
        }
        for doctor in doctors
    ]
    taken: set[tuple[int, int, int]] = set()
    patient_days: dict[tuple[int, int], list[tuple[int, int]]] = defaultdict(list)
    bookings: list[_Booking] = []

    def book(patient: int, low: int, high: int, status: str | None) -> bool:
        for _ in range(50):
            d = rng.randrange(len(doctors))
            day = rng.randint(low, high)
            sessions = grids[d].get((first_weekday + day) % 7)
            if not sessions:
                continue
            branch, first_minute, cells = rng.choice(sessions)
            start = first_minute + rng.randrange(cells) * doctors[d].slot_minutes
            end = start + doctors[d].slot_minutes
            if (d, day, start) in taken:
                continue
            mine = patient_days[patient, day]
            if any(s < end and start < e for s, e in mine):
                continue
            taken.add((d, day, start))
            mine.append((start, end))
            bookings.append(_Booking(d, day, start, branch, patient, status or _status(rng, day, today_offset)))
            return True
        return False

    heavy = max(1, len(patients.ids) // 1000) if patients.ids else 0
    for patient in range(heavy):
        low = max(0, (patients.registered_days[patient] - first_day).days)
        for _ in range(HEAVY_VISITS + rng.randrange(100)):
            book(patient, low, today_offset - 1, "completed")
    for _ in range(count):
        patient = rng.randrange(len(patients.ids))
        low = max(0, (patients.registered_days[patient] - first_day).days)
        book(patient, low, horizon, None)

    # Tokens 1..k per doctor and day, in a random booking order.
    days: dict[tuple[int, int], list[_Booking]] = defaultdict(list)
    for booking in bookings:
        days[booking.doctor, booking.day].append(booking)
    for group in days.values():
        rng.shuffle(group)
        for token, booking in enumerate(group, start=1):
            booking.token = token

    zones = {b.id: zoneinfo.ZoneInfo("Asia/Kolkata") for b in organisation.branches}
    now = datetime.combine(today, time(6, 30), tzinfo=UTC)
    visits: list[tuple[Any, ...]] = []
    appointments: list[tuple[Any, ...]] = []
    changes: list[tuple[Any, ...]] = []
    completed_appointments: list[CompletedAppointment] = []
    for (d, day), group in sorted(days.items()):
        doctor = doctors[d]
        local = first_day + timedelta(days=day)
        midnight = datetime.combine(local, time.min, tzinfo=zones[organisation.branches[group[0].branch].id])
        open_from = midnight - timedelta(days=14)
        open_until = min(midnight + timedelta(hours=8), now)
        span = max(60.0, (open_until - open_from).total_seconds())
        created_moments = sorted(open_from + timedelta(seconds=rng.uniform(0, span)) for _ in group)
        for booking, created in zip(group, created_moments, strict=True):
            branch = organisation.branches[booking.branch]
            start = (midnight + timedelta(minutes=booking.start)).astimezone(UTC)
            end = start + timedelta(minutes=doctor.slot_minutes)
            created = min(created, start)
            visit_type, label = rng.choices(VISIT_TYPES, weights=VISIT_TYPE_WEIGHTS)[0]
            appointment_id = rng_uuid(rng)
            checked_in = completed = cancelled = visit_id = None
            reason, version, updated = "", 1, created
            history: list[tuple[str, datetime, str]] = [("booked", created, "")]
            if booking.status == "completed":
                checked_in = start - timedelta(minutes=rng.randint(0, 20))
                completed = end + timedelta(minutes=rng.randint(0, 15))
                visit_id = rng_uuid(rng)
                visits.append(
                    (visit_id, patients.ids[booking.patient], "outpatient", doctor.id,
                     organisation.departments[doctor.department_index], branch.id, checked_in, completed, label,
                     completed, completed)
                )  # fmt: skip
                history += [("checked_in", checked_in, ""), ("completed", completed, "")]
                completed_appointments.append(
                    CompletedAppointment(appointment_id, booking.patient, d, booking.branch, checked_in, completed)
                )
                version, updated = 3, completed
            elif booking.status == "cancelled":
                cancelled = created + (start - created) * rng.random()
                reason = rng.choice(CANCEL_REASONS)
                history.append(("cancelled", cancelled, reason))
                version, updated = 2, cancelled
            elif booking.status == "no_show":
                updated = end + timedelta(minutes=30)
                history.append(("no_show", updated, ""))
                version = 2
            appointments.append(
                (appointment_id, patients.ids[booking.patient], doctor.id, branch.id, start, end, local,
                 booking.token, booking.status, visit_type, "", checked_in, completed, cancelled, reason, visit_id,
                 version, created, updated)
            )  # fmt: skip
            for number, (kind, at, why) in enumerate(history, start=1):
                changes.append((appointment_id, number, kind, at, "staff:reception" if number > 1 else "system", why))

    copy_rows(
        "patients_visit",
        ["id", "patient_id", "type", "doctor_id", "department_id", "branch_id", "start", "end", "reason",
         "created_at", "updated_at"],
        visits,
        timings=timings,
    )  # fmt: skip
    copy_rows(
        "appointments_appointment",
        ["id", "patient_id", "doctor_id", "branch_id", "slot_start", "slot_end", "local_date", "token_number",
         "status", "visit_type", "notes", "checked_in_at", "completed_at", "cancelled_at", "cancellation_reason",
         "visit_id", "version", "created_at", "updated_at"],
        appointments,
        timings=timings,
    )  # fmt: skip
    copy_rows(
        "appointments_appointmentchange",
        ["appointment_id", "version", "kind", "at", "actor", "reason"],
        changes,
        timings=timings,
    )
    counters: Iterator[tuple[Any, ...]] = (
        (doctors[d].id, first_day + timedelta(days=day), len(group)) for (d, day), group in sorted(days.items())
    )
    copy_rows("appointments_tokencounter", ["doctor_id", "local_date", "last_number"], counters, timings=timings)
    return Scheduled(len(appointments), len(visits), heavy, completed_appointments)
