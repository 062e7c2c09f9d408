"""Shared setup and assertions of the appointment suites (booking, reschedule, cancel, check-in, complete,
no-show, list): one small clinic, API call helpers, a full database snapshot for "nothing changed", and a
recorder of published events."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from typing import Any
from urllib.parse import urlencode
from zoneinfo import ZoneInfo

from django.test import Client
from django.utils import timezone

from appointments import events
from appointments.models import Appointment, AppointmentChange, TokenCounter, WeeklySession
from patients.models import Visit
from tests.factories import BranchFactory, DepartmentFactory, DoctorFactory
from tests.helpers import IST, assert_problem, at, bearer, next_monday
from tests.patients.factories import PatientFactory

APPOINTMENTS = "/api/v1/appointments"
SLOTS = "/api/v1/appointments/slots"
STATUSES = ("booked", "checked_in", "completed", "cancelled", "no_show")
ACTIONS = ("reschedule", "cancel", "check-in", "complete", "no-show")
WRITE_SCOPES = ["appointments:read", "appointments:write"]


DAY = next_monday()
NEXT_DAY = DAY + timedelta(days=1)


def iso(day: date, hhmm: str) -> str:
    """How the API writes `day` at hh:mm in a Bengaluru branch."""
    return at(day, hhmm).isoformat()


def local(value: datetime | None) -> str | None:
    return value.astimezone(IST).isoformat() if value else None


def session(doctor: Any, branch: Any, weekday: int, start: str = "09:00", end: str = "13:00") -> WeeklySession:
    return WeeklySession.objects.create(
        doctor=doctor, branch=branch, weekday=weekday, start=time.fromisoformat(start), end=time.fromisoformat(end)
    )


@dataclass
class Clinic:
    """Bengaluru (120-minute cancellation window): Dr. Rao (Mondays and Tuesdays 09:00-13:00) and Dr. Iyer
    (Mondays 09:00-13:00); patients Priya and Rahul; `writer` may read and write appointments at BLR."""

    branch: Any
    doctor: Any
    other_doctor: Any
    patient: Any
    other_patient: Any
    writer: str


def make_clinic(token_for: Any, **writer_options: Any) -> Clinic:
    branch = BranchFactory(code="BLR", name="Bengaluru", time_zone="Asia/Kolkata", cancellation_window_minutes=120)
    doctor = DoctorFactory(
        name="Dr. Ananya Rao", department=DepartmentFactory(name="General Medicine"), branches=[branch]
    )
    session(doctor, branch, WeeklySession.Weekday.MONDAY)
    session(doctor, branch, WeeklySession.Weekday.TUESDAY)
    other_doctor = DoctorFactory(
        name="Dr. Vikram Iyer", department=DepartmentFactory(name="Cardiology"), branches=[branch]
    )
    session(other_doctor, branch, WeeklySession.Weekday.MONDAY)
    return Clinic(
        branch=branch,
        doctor=doctor,
        other_doctor=other_doctor,
        patient=PatientFactory(first_name="Priya", last_name="Sharma", registration_branch=branch),
        other_patient=PatientFactory(first_name="Rahul", last_name="Verma", registration_branch=branch),
        writer=token_for(WRITE_SCOPES, branches=[branch], **writer_options),
    )


def start_now(appointment_id: Any, minutes_ago: int = 1) -> Appointment:
    """Test setup, by a direct ORM update: move a booked appointment so that it started `minutes_ago` minutes
    ago (not before midnight), today at its branch, keeping its length and token. Check-in is allowed only on
    the appointment's local day and no-show only once it has started (docs/api-rules.md §7), and booking
    cannot create such an appointment (a cell that has started is not bookable)."""
    appointment = Appointment.objects.select_related("branch").get(id=appointment_id)
    now = timezone.now().astimezone(appointment.branch.zone)
    midnight = now.replace(hour=0, minute=0, second=0, microsecond=0)
    start = max(now - timedelta(minutes=minutes_ago), midnight)
    Appointment.objects.filter(id=appointment.id).update(
        slot_start=start, slot_end=start + (appointment.slot_end - appointment.slot_start), local_date=start.date()
    )
    appointment.refresh_from_db()
    return appointment


# --- Calls -----------------------------------------------------------------------------------------------


def post_json(client: Client, token: str | None, path: str, body: Any = None, key: str | None = None) -> Any:
    headers = bearer(token) if token else {}
    if key is not None:
        headers["HTTP_IDEMPOTENCY_KEY"] = key
    if body is None:  # no body at all, as an HTTP client sends a bare POST (the test client's post() would
        return client.generic("POST", path, **headers)  # send an empty multipart form)
    return client.post(path, json.dumps(body), content_type="application/json", **headers)


def booking(patient: Any, doctor: Any, start: datetime, end: datetime, **extra: Any) -> dict[str, Any]:
    """A booking body; `patient` is a Patient (referenced by business id) or a reference string."""
    ref = patient if isinstance(patient, str) else patient.patient_id
    return {
        "patient_id": ref,
        "doctor_id": str(doctor.id),
        "slot_start": start.isoformat(),
        "slot_end": end.isoformat(),
        **extra,
    }


def post_booking(client: Client, token: str, body: Any, key: str | None = None) -> Any:
    headers = {"HTTP_IDEMPOTENCY_KEY": key} if key is not None else {}
    return client.post(APPOINTMENTS, json.dumps(body), content_type="application/json", **bearer(token), **headers)


def book(
    client: Client, token: str, patient: Any, doctor: Any, start: datetime, end: datetime, **extra: Any
) -> dict[str, Any]:
    """Book through the API (so tokens and counters are the real ones); the 201 body."""
    body = {
        "patient_id": patient.patient_id,
        "doctor_id": str(doctor.id),
        "slot_start": start.isoformat(),
        "slot_end": end.isoformat(),
        **extra,
    }
    response = post_json(client, token, APPOINTMENTS, body)
    assert response.status_code == 201, response.content
    return response.json()


def book_rao(
    client: Client, clinic: Clinic, start: str, end: str, *, day: date = DAY, patient: Any = None
) -> dict[str, Any]:
    """Book Dr. Rao on `day` from `start` to `end` (HH:MM, Bengaluru) for Priya unless told otherwise."""
    return book(client, clinic.writer, patient or clinic.patient, clinic.doctor, at(day, start), at(day, end))


def reschedule_body(start: datetime, end: datetime, **extra: Any) -> dict[str, Any]:
    return {"new_slot_start": start.isoformat(), "new_slot_end": end.isoformat(), **extra}


def patch_reschedule(client: Client, token: str | None, appointment_id: str, body: Any, key: str | None = None) -> Any:
    headers = bearer(token) if token else {}
    if key is not None:
        headers["HTTP_IDEMPOTENCY_KEY"] = key
    return client.patch(
        f"{APPOINTMENTS}/{appointment_id}/reschedule", json.dumps(body), content_type="application/json", **headers
    )


def delete_appointment(client: Client, token: str | None, appointment_id: str, **query: Any) -> Any:
    headers = bearer(token) if token else {}
    suffix = f"?{urlencode(query)}" if query else ""
    return client.delete(f"{APPOINTMENTS}/{appointment_id}{suffix}", **headers)


def post_action(client: Client, token: str | None, appointment_id: str, action: str, body: Any = None) -> Any:
    """POST …/{id}/check-in | complete | no-show."""
    return post_json(client, token, f"{APPOINTMENTS}/{appointment_id}/{action}", body)


RESCHEDULE_TARGET = (at(DAY, "10:00"), at(DAY, "10:15"))


def perform(client: Client, token: str | None, appointment_id: str, action: str) -> Any:
    """One of ACTIONS with a valid request: reschedule to DAY 10:00-10:15, cancel "Travelling", or the POST."""
    if action == "reschedule":
        return patch_reschedule(client, token, appointment_id, reschedule_body(*RESCHEDULE_TARGET))
    if action == "cancel":
        return delete_appointment(client, token, appointment_id, reason="Travelling")
    return post_action(client, token, appointment_id, action)


def get_appointment(client: Client, token: str, appointment_id: str) -> Any:
    return client.get(f"{APPOINTMENTS}/{appointment_id}", **bearer(token))


def get_slots(client: Client, token: str, doctor: Any, day: date, **params: Any) -> list[tuple[str, str]]:
    response = client.get(SLOTS, {"doctor_id": str(doctor.id), "date": day.isoformat(), **params}, **bearer(token))
    assert response.status_code == 200, response.content
    return [(cell["start_time"], cell["end_time"]) for cell in response.json()]


# --- Assertions ----------------------------------------------------------------------------------------


def assert_invalid_state(response: Any, status: str, action: str, allowed: str = "booked") -> None:
    problem = assert_problem(response, 409, "invalid_state", current_status=status)
    assert problem["detail"] == f"Cannot {action} an appointment that is {status}; it must be {allowed}."


def assert_slot_unavailable(
    response: Any, detail: str = "That interval is not a free slot of this doctor at this branch."
) -> None:
    assert assert_problem(response, 409, "slot_unavailable")["detail"] == detail


# --- State -----------------------------------------------------------------------------------------------

_APPOINTMENT_FIELDS = [field.attname for field in Appointment._meta.concrete_fields]


def snapshot() -> dict[str, Any]:
    """Every row a lifecycle request can touch, field by field: a refused request must leave it equal."""
    return {
        "appointments": sorted(Appointment.objects.values_list(*_APPOINTMENT_FIELDS)),
        "changes": sorted(AppointmentChange.objects.values_list("appointment_id", "version", "kind", "reason")),
        "counters": sorted(TokenCounter.objects.values_list("doctor_id", "local_date", "last_number")),
        "visits": sorted(Visit.objects.values_list("id", "patient_id", "start", "end")),
    }


def counters() -> dict[tuple[Any, date], int]:
    return {(c.doctor_id, c.local_date): c.last_number for c in TokenCounter.objects.all()}


def history(appointment_id: str) -> list[tuple[int, str]]:
    return list(
        AppointmentChange.objects.filter(appointment_id=appointment_id)
        .order_by("version")
        .values_list("version", "kind")
    )


class EventRecorder:
    """Wraps integrations' event_publish as appointments.events calls it: records each (type, payload)
    and still calls the real function, whatever the webhooks work makes it do."""

    def __init__(self, monkeypatch: Any) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        original = events.event_publish

        def record(*, event_type: str, payload: dict[str, Any], **kwargs: Any) -> Any:
            self.calls.append((event_type, json.loads(json.dumps(payload))))
            return original(event_type=event_type, payload=payload, **kwargs)

        monkeypatch.setattr(events, "event_publish", record)

    @property
    def types(self) -> list[str]:
        return [event_type for event_type, _ in self.calls]

    def clear(self) -> None:
        self.calls.clear()


# --- Cells a few hours from now (cancellation window) ---------------------------------------------------


def midday_zone() -> ZoneInfo:
    """A fixed-offset zone in which it is now between 12:00 and 13:00, so cells up to a few hours ahead (or
    a little behind) fall on today's local date whatever the time of day the tests run. POSIX signs:
    Etc/GMT-5 is UTC+05:00."""
    offset = 12 - timezone.now().astimezone(ZoneInfo("UTC")).hour  # -11..+12 hours
    return ZoneInfo("Etc/GMT" if offset == 0 else f"Etc/GMT{-offset:+d}")


@dataclass
class NearTerm:
    """A branch with a 120-minute cancellation window whose doctor consults today 06:00-18:00 local time
    in 5-minute cells, a patient there, and a writer limited to that branch."""

    branch: Any
    doctor: Any
    patient: Any
    writer: str

    def cell(self, minutes_ahead: int) -> tuple[datetime, datetime]:
        """The first 5-minute cell starting at least `minutes_ahead` minutes from now (so at most
        minutes_ahead + 5)."""
        earliest = timezone.now().astimezone(self.branch.zone) + timedelta(minutes=minutes_ahead)
        start = earliest.replace(second=0, microsecond=0)
        if start < earliest:
            start += timedelta(minutes=1)
        start += timedelta(minutes=-start.minute % 5)  # the grid runs from 06:00 in 5-minute steps
        return start, start + timedelta(minutes=5)


def book_near(client: Client, near: NearTerm, minutes_ahead: int) -> dict[str, Any]:
    """Book the near-term doctor's first cell starting at least `minutes_ahead` minutes from now."""
    return book(client, near.writer, near.patient, near.doctor, *near.cell(minutes_ahead))


def make_near_term(token_for: Any, window_minutes: int = 120) -> NearTerm:
    zone = midday_zone()
    branch = BranchFactory(code="NOW", name="Near term", time_zone=zone.key, cancellation_window_minutes=window_minutes)
    doctor = DoctorFactory(name="Dr. Meera Nair", branches=[branch], default_slot_minutes=5)
    session(doctor, branch, timezone.now().astimezone(zone).weekday(), "06:00", "18:00")
    return NearTerm(
        branch=branch,
        doctor=doctor,
        patient=PatientFactory(first_name="Kavya", last_name="Menon", registration_branch=branch),
        writer=token_for(WRITE_SCOPES, branches=[branch]),
    )
