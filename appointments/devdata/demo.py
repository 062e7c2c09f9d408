"""Demo scheduling data for `seed_demo`: weekly sessions on every day of the week, a leave, a holiday, a few
bookings ahead, and at each branch a clinic day around the branch's current local time, whatever the hour:
patients seen earlier, a no-show, patients checked in and waiting, and bookings still to arrive (one of them
cancelled). Idempotent; run on another day, it adds that day's clinic at each branch."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date, datetime, time, timedelta

from django.db import transaction
from django.utils import timezone

from appointments import locks
from appointments.models import Appointment, AppointmentChange, BranchHoliday, DoctorLeave, WeeklySession
from appointments.services import (
    appointment_book,
    appointment_cancel,
    appointment_check_in,
    appointment_complete,
    appointment_no_show,
)
from appointments.slots import Cell, free_cells, grid
from clinic.models import Branch, Doctor
from patients.models import Patient, Visit

MORNING = (time(9, 0), time(13, 0))
AFTERNOON = (time(14, 0), time(18, 0))
# The duty doctor of a branch consults round the clock, so the demo has a clinic in session at any hour.
ROUND_THE_CLOCK = (time(0, 0), time(23, 59))
ACTOR = "seed_demo"

# A branch's day, in slot order: seen earlier (C), a no-show (N), checked in and waiting (W), still to come
# (B), cancelled (X). The first booking still to come is placed at the first slot after now.
COMPLETED, NO_SHOW, WAITING, BOOKED, CANCELLED = "C", "N", "W", "B", "X"
CLINIC_DAY = (COMPLETED, COMPLETED, NO_SHOW, WAITING, WAITING, BOOKED, BOOKED, CANCELLED, BOOKED, BOOKED)
BEFORE_NOW = CLINIC_DAY.index(BOOKED)


@transaction.atomic
def seed_demo_schedule(
    *, doctors: Sequence[Doctor], patients: Sequence[Patient], duty_doctors: Sequence[Doctor] = ()
) -> dict[str, int]:
    for doctor in doctors:
        if WeeklySession.objects.filter(doctor=doctor).exists():
            continue  # a schedule configured by staff is left as it is
        # A doctor at two branches consults at the first in the morning, at the second in the afternoon.
        hours = [ROUND_THE_CLOCK] if doctor in duty_doctors else [MORNING, AFTERNOON]
        for branch, (start, end) in zip(doctor.branches.order_by("code"), hours, strict=False):
            for weekday in range(7):
                WeeklySession.objects.get_or_create(doctor=doctor, branch=branch, weekday=weekday, start=start, end=end)
    first = doctors[0]
    leave_day = timezone.localdate() + timedelta(days=10)
    DoctorLeave.objects.get_or_create(
        doctor=doctors[1], reason="Cardiology conference", defaults={"start_date": leave_day, "end_date": leave_day}
    )
    home = first.branches.order_by("code").first()
    if home is not None:
        BranchHoliday.objects.get_or_create(
            branch=home, date=date(timezone.localdate().year, 12, 25), defaults={"name": "Christmas"}
        )
        _seed_ahead(doctor=first, branch=home, patients=patients[:4])
    for doctor in duty_doctors:
        for branch in doctor.branches.order_by("code"):
            at_branch = [patient for patient in patients if patient.registration_branch_id == branch.pk]
            _seed_clinic_day(doctor=doctor, branch=branch, patients=at_branch or list(patients))
    return {
        "sessions": WeeklySession.objects.filter(doctor__in=doctors).count(),
        "appointments": Appointment.objects.filter(patient__in=patients).count(),
    }


def _seed_ahead(*, doctor: Doctor, branch: Branch, patients: Sequence[Patient]) -> None:
    """Bookings on the doctor's next open day (to reschedule or cancel in the demo), one of them cancelled;
    once, while none of the doctor's appointments lies ahead."""
    today = timezone.localtime(timezone.now(), branch.zone).date()
    if Appointment.objects.filter(doctor=doctor, local_date__gt=today).exists():
        return
    length = timedelta(minutes=doctor.default_slot_minutes)
    for offset in range(1, 15):
        cells = free_cells(doctor=doctor, branch=branch, day=today + timedelta(days=offset), duration=length)
        if len(cells) >= len(patients):
            break
    else:
        return
    booked = [
        appointment_book(
            patient=patient, doctor=doctor, branch=branch, slot_start=cell.start, slot_end=cell.end, actor=ACTOR
        )
        for patient, cell in zip(patients, cells, strict=False)
    ]
    appointment_cancel(appointment=booked[-1], reason="Patient travelling", actor=ACTOR, enforce_window=False)


def _seed_clinic_day(*, doctor: Doctor, branch: Branch, patients: Sequence[Patient]) -> None:
    """CLINIC_DAY on the branch's local today around its current time, once a day per doctor and branch."""
    now = timezone.now()
    today = timezone.localtime(now, branch.zone).date()
    if Appointment.objects.filter(doctor=doctor, branch=branch, local_date=today).exists():
        return
    cells = grid(doctor=doctor, branch=branch, day=today, duration=timedelta(minutes=doctor.default_slot_minutes))
    if len(cells) < len(CLINIC_DAY):
        return
    upcoming = next((index for index, cell in enumerate(cells) if cell.start > now), len(cells))
    # Near midnight the day is shifted to fit: just after, it starts now; just before, it ends now (the
    # bookings then lie in the past, patients who can still be checked in until midnight).
    first = min(max(upcoming - BEFORE_NOW, 0), len(cells) - len(CLINIC_DAY))
    day = list(zip(CLINIC_DAY, cells[first : first + len(CLINIC_DAY)], strict=True))
    # Patients already booked that day (the bookings made ahead on an earlier day) are left out, so no one
    # is booked twice at once; the rest come round again if the day has more slots than patients.
    busy = set(
        Appointment.objects.filter(
            patient__in=patients, local_date=today, status__in=Appointment.ACTIVE_STATUSES
        ).values_list("patient_id", flat=True)
    )
    free = [patient for patient in patients if patient.pk not in busy] or list(patients)
    # Booked in slot order, so token numbers follow the day as a clinic hands them out.
    for index, (kind, cell) in enumerate(day):
        patient = free[index % len(free)]
        appointment = (
            appointment_book(
                patient=patient, doctor=doctor, branch=branch, slot_start=cell.start, slot_end=cell.end, actor=ACTOR
            )
            if cell.start > now
            else _book_past(patient=patient, doctor=doctor, branch=branch, cell=cell, local_date=today)
        )
        _play(appointment, kind, now)


def _book_past(*, patient: Patient, doctor: Doctor, branch: Branch, cell: Cell, local_date: date) -> Appointment:
    """Demo data only: a booking of a slot that has begun (the booking service books free slots ahead only),
    with the day's next token and its history row."""
    appointment = Appointment.objects.create(
        patient=patient,
        doctor=doctor,
        branch=branch,
        slot_start=cell.start,
        slot_end=cell.end,
        local_date=local_date,
        token_number=locks.doctor_day_next_token(doctor=doctor, local_date=local_date),
    )
    AppointmentChange.objects.create(
        appointment=appointment, version=1, kind=AppointmentChange.Kind.BOOKED, at=appointment.updated_at, actor=ACTOR
    )
    return appointment


def _play(appointment: Appointment, kind: str, now: datetime) -> None:
    """Take the appointment through the services to its place in the day, then date the check-in and the
    completion as they would have happened (a few minutes around its slot, never after now)."""
    started = appointment.slot_start <= now
    if kind == CANCELLED:
        # Cancelled by the front desk on the patient's call: staff cancel inside the window too.
        appointment_cancel(
            appointment=appointment, reason="Patient called to cancel", actor=ACTOR, enforce_window=False
        )
    elif kind == NO_SHOW and started:
        appointment_no_show(appointment=appointment, actor=ACTOR)
    elif kind in (COMPLETED, WAITING):
        appointment = appointment_check_in(appointment=appointment, actor=ACTOR)
        checked_in = min(appointment.slot_start - timedelta(minutes=6), now)
        _dated(appointment, AppointmentChange.Kind.CHECKED_IN, checked_in_at=checked_in)
        if kind == COMPLETED:
            appointment = appointment_complete(appointment=appointment, actor=ACTOR)
            completed = min(appointment.slot_end, now)
            _dated(appointment, AppointmentChange.Kind.COMPLETED, completed_at=completed)
            Visit.objects.filter(appointment=appointment).update(start=checked_in, end=max(completed, checked_in))


def _dated(appointment: Appointment, kind: str, **times: datetime) -> None:
    Appointment.objects.filter(pk=appointment.pk).update(**times)
    AppointmentChange.objects.filter(appointment=appointment, kind=kind).update(at=next(iter(times.values())))
