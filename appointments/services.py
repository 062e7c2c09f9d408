"""Writes on appointments: booking and the lifecycle of docs/api-rules.md §10.

Booking is race-safe: the free-cell rule is checked in Python for a clear answer, and PostgreSQL's
exclusion constraints make a double booking impossible even when two requests pass that check at once.
Every later change locks the appointment row, so two concurrent transitions are serialised and the
second one sees the state the first one left. appointments.locks holds the locks and the order they are
taken in.
"""

from __future__ import annotations

from datetime import date, datetime, time, timedelta
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from appointments import events, locks, notifications
from appointments.errors import CancellationWindow, OutsideAllowedTime, SlotUnavailable
from appointments.models import Appointment, AppointmentChange
from appointments.slots import is_free_cell
from clinic.db import violated_constraint
from clinic.errors import FieldError, InvalidState
from clinic.models import Branch, Doctor
from patients.models import Patient, Visit

Status = Appointment.Status

# docs/api-rules.md §10: the only transitions; anything else is 409 invalid_state.
TRANSITIONS: dict[str, tuple[Status, ...]] = {
    "reschedule": (Status.BOOKED,),
    "cancel": (Status.BOOKED,),
    "check_in": (Status.BOOKED,),
    "no_show": (Status.BOOKED,),
    "complete": (Status.CHECKED_IN,),
}


def _overlap_refusal(exc: IntegrityError) -> SlotUnavailable | None:
    """The 409 for a lost race (or a patient booked elsewhere at that time); None for other errors."""
    constraint = violated_constraint(exc)
    if constraint == "appointment_patient_no_overlap":
        return SlotUnavailable("The patient already has an appointment at that time.")
    if constraint == "appointment_no_double_booking":
        return SlotUnavailable("That slot was just booked by another request.")
    return None


def _record(appointment: Appointment, kind: str, *, actor: str, reason: str = "", **previous: Any) -> None:
    AppointmentChange.objects.create(
        appointment=appointment,
        version=appointment.version,
        kind=kind,
        at=appointment.updated_at,
        actor=actor[:200],
        reason=reason,
        **previous,
    )


@transaction.atomic
def appointment_book(
    *,
    patient: Patient,
    doctor: Doctor,
    branch: Branch,
    slot_start: datetime,
    slot_end: datetime,
    visit_type: str = Appointment.VisitType.CONSULTATION,
    notes: str = "",
    actor: str = "system",
) -> Appointment:
    """Book [slot_start, slot_end) if it is one of the doctor's free cells; 409 slot_unavailable otherwise,
    or when the patient already has an overlapping active appointment."""
    if not is_free_cell(doctor=doctor, branch=branch, start=slot_start, end=slot_end):
        raise SlotUnavailable("That interval is not a free slot of this doctor at this branch.")
    local_date = slot_start.astimezone(branch.zone).date()
    token_number = locks.doctor_day_next_token(doctor=doctor, local_date=local_date)
    locks.patient_lock(patient_id=patient.pk)
    try:
        # No savepoint: a refused insert aborts the whole booking anyway (the token taken above included).
        with transaction.atomic(savepoint=False):
            appointment = Appointment.objects.create(
                patient=patient,
                doctor=doctor,
                branch=branch,
                slot_start=slot_start,
                slot_end=slot_end,
                local_date=local_date,
                token_number=token_number,
                visit_type=visit_type,
                notes=notes,
            )
    except IntegrityError as exc:
        # Raising rolls the whole transaction back, the token counter's increment included: no gap.
        refusal = _overlap_refusal(exc)
        if refusal is None:
            raise
        raise refusal from None
    _record(appointment, AppointmentChange.Kind.BOOKED, actor=actor)
    events.publish(events.APPOINTMENT_BOOKED, appointment)
    notifications.schedule(events.APPOINTMENT_BOOKED, appointment)
    return appointment


def _lock(appointment: Appointment, action: str) -> Appointment:
    """Re-read the appointment under a row lock and check that `action` is allowed from its status."""
    locked = locks.appointment_lock(appointment_id=appointment.pk)
    if locked.status not in TRANSITIONS[action]:
        allowed = " or ".join(TRANSITIONS[action])
        raise InvalidState(
            f"Cannot {action.replace('_', ' ')} an appointment that is {locked.status}; it must be {allowed}.",
            current_status=locked.status,
        )
    return locked


def _save(appointment: Appointment, fields: list[str]) -> None:
    appointment.version += 1
    appointment.updated_at = timezone.now()
    appointment.save(update_fields=[*fields, "version", "updated_at"])


@transaction.atomic
def appointment_reschedule(
    *,
    appointment: Appointment,
    slot_start: datetime,
    slot_end: datetime,
    reason: str = "",
    actor: str = "system",
    enforce_window: bool = True,
) -> Appointment:
    """Move a booked appointment to another free cell of the same doctor and branch. Within the same local
    day the token number is kept; on another day the appointment takes that day's next number. Through the
    API the branch's cancellation window applies, as to cancelling; staff in the admin, who may cancel late,
    pass enforce_window=False (the patient at the desk or on the phone an hour before)."""
    branch = appointment.branch  # the doctor and branch never change, so the target day is known unlocked
    local_date = slot_start.astimezone(branch.zone).date()
    locks.doctor_day_lock(doctor=appointment.doctor, local_date=local_date)
    appointment = _lock(appointment, "reschedule")
    locks.patient_lock(patient_id=appointment.patient_id)
    now = timezone.now()
    if appointment.slot_start <= now:
        raise InvalidState(
            "The appointment has already started; check the patient in or mark a no-show instead.",
            current_status=appointment.status,
        )
    # Moving an appointment is as late a change as cancelling it: were it allowed inside the window, a move
    # to another day followed by a cancel there would launder a late cancellation.
    if enforce_window:
        _check_window(appointment, now, "rescheduled")
    if (slot_start, slot_end) == (appointment.slot_start, appointment.slot_end):
        raise FieldError({"new_slot_start": "The appointment is already at that time."})
    if not is_free_cell(doctor=appointment.doctor, branch=branch, start=slot_start, end=slot_end, ignoring=appointment):
        raise SlotUnavailable("That interval is not a free slot of this doctor at this branch.")
    previous = events.appointment_payload(appointment)
    before = {
        "previous_slot_start": appointment.slot_start,
        "previous_slot_end": appointment.slot_end,
        "previous_token_number": appointment.token_number,
    }
    if local_date != appointment.local_date:
        # The old day's number stays taken (numbers are never reused); the new day hands out its next.
        appointment.token_number = locks.doctor_day_next_token(doctor=appointment.doctor, local_date=local_date)
        appointment.local_date = local_date
    appointment.slot_start, appointment.slot_end = slot_start, slot_end
    try:
        with transaction.atomic():
            _save(appointment, ["slot_start", "slot_end", "local_date", "token_number"])
    except IntegrityError as exc:
        refusal = _overlap_refusal(exc)
        if refusal is None:
            raise
        raise refusal from None
    _record(appointment, AppointmentChange.Kind.RESCHEDULED, actor=actor, reason=reason, **before)
    events.publish(events.APPOINTMENT_RESCHEDULED, appointment, previous=previous)
    notifications.schedule(events.APPOINTMENT_RESCHEDULED, appointment)
    return appointment


def cancellation_deadline(appointment: Appointment) -> datetime:
    """The last moment the API may cancel: the branch's cancellation window before the start."""
    return appointment.slot_start - timedelta(minutes=appointment.branch.cancellation_window_minutes)


def _check_window(appointment: Appointment, now: datetime, done: str) -> None:
    """409 cancellation_window from the deadline of the appointment's current slot on."""
    deadline = cancellation_deadline(appointment)
    if now >= deadline:
        window = appointment.branch.cancellation_window_minutes
        raise CancellationWindow(
            f"Appointments at this branch can be {done} through the API only until {window} minutes before "
            "they start; ask the clinic's staff.",
            cancellable_until=deadline.astimezone(appointment.branch.zone).isoformat(),
        )


def _local_day_bounds(appointment: Appointment) -> tuple[datetime, datetime]:
    """Start and end (exclusive: the next day's midnight) of the appointment's local day at its branch."""
    zone = appointment.branch.zone
    start = datetime.combine(appointment.local_date, time.min, tzinfo=zone)
    if appointment.local_date == date.max:  # no next day to end at
        return start, datetime.combine(date.max, time.max, tzinfo=zone)
    return start, datetime.combine(appointment.local_date + timedelta(days=1), time.min, tzinfo=zone)


@transaction.atomic
def appointment_cancel(
    *, appointment: Appointment, reason: str, actor: str = "system", enforce_window: bool = True
) -> Appointment:
    """Cancel a booked appointment. Through the API the branch's cancellation window applies (409
    cancellation_window from that many minutes before the start on); staff in the admin pass
    enforce_window=False. The token number stays with the cancelled appointment."""
    reason = reason.strip()
    if not reason:
        raise FieldError({"reason": "A reason is required to cancel an appointment."})
    appointment = _lock(appointment, "cancel")
    now = timezone.now()
    if enforce_window:
        _check_window(appointment, now, "cancelled")
    appointment.status = Status.CANCELLED
    appointment.cancelled_at = now
    appointment.cancellation_reason = reason
    _save(appointment, ["status", "cancelled_at", "cancellation_reason"])
    _record(appointment, AppointmentChange.Kind.CANCELLED, actor=actor, reason=reason)
    events.publish(events.APPOINTMENT_CANCELLED, appointment)
    notifications.schedule(events.APPOINTMENT_CANCELLED, appointment)
    return appointment


@transaction.atomic
def appointment_check_in(*, appointment: Appointment, actor: str = "system") -> Appointment:
    """Check the patient in: any time on the appointment's local day at its branch (early arrivals included),
    never on another day. A patient who comes the day after missed the appointment: a no-show."""
    appointment = _lock(appointment, "check_in")
    if timezone.localtime(timezone.now(), appointment.branch.zone).date() != appointment.local_date:
        day_start, day_end = _local_day_bounds(appointment)
        raise OutsideAllowedTime(
            f"An appointment can be checked in only on its day, {appointment.local_date}, at its branch.",
            allowed_from=day_start.isoformat(),
            allowed_until=day_end.isoformat(),
        )
    appointment.status = Status.CHECKED_IN
    appointment.checked_in_at = timezone.now()
    _save(appointment, ["status", "checked_in_at"])
    _record(appointment, AppointmentChange.Kind.CHECKED_IN, actor=actor)
    events.publish(events.APPOINTMENT_CHECKED_IN, appointment)
    return appointment


@transaction.atomic
def appointment_complete(*, appointment: Appointment, actor: str = "system") -> Appointment:
    """Complete a checked-in appointment and add the outpatient visit to the patient's history."""
    appointment = _lock(appointment, "complete")
    now = timezone.now()
    appointment.visit = Visit.objects.create(
        patient=appointment.patient,
        type=Visit.Type.OUTPATIENT,
        doctor=appointment.doctor,
        department=appointment.doctor.department,
        branch=appointment.branch,
        start=appointment.checked_in_at or appointment.slot_start,
        end=now,
        reason=(appointment.notes or appointment.get_visit_type_display())[:255],
    )
    appointment.status = Status.COMPLETED
    appointment.completed_at = now
    _save(appointment, ["status", "completed_at", "visit"])
    _record(appointment, AppointmentChange.Kind.COMPLETED, actor=actor)
    events.publish(events.APPOINTMENT_COMPLETED, appointment)
    return appointment


@transaction.atomic
def appointment_no_show(*, appointment: Appointment, actor: str = "system") -> Appointment:
    """Mark a booked appointment missed, once it has started (before that the patient may still come, and
    the slot must not be freed)."""
    appointment = _lock(appointment, "no_show")
    if timezone.now() < appointment.slot_start:
        raise OutsideAllowedTime(
            "An appointment can be marked a no-show only once it has started.",
            allowed_from=appointment.slot_start.astimezone(appointment.branch.zone).isoformat(),
        )
    appointment.status = Status.NO_SHOW
    _save(appointment, ["status"])
    _record(appointment, AppointmentChange.Kind.NO_SHOW, actor=actor)
    events.publish(events.APPOINTMENT_NO_SHOW, appointment)
    return appointment
