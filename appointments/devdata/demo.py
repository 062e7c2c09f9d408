"""Demo scheduling data for `seed_demo`: weekly sessions on every day of the week, a leave, a holiday and
appointments in every status. Idempotent."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date, time, timedelta

from django.db import transaction
from django.utils import timezone

from appointments.models import Appointment, BranchHoliday, DoctorLeave, TokenCounter, WeeklySession
from appointments.services import (
    appointment_book,
    appointment_cancel,
    appointment_check_in,
    appointment_complete,
    appointment_no_show,
)
from appointments.slots import free_cells
from clinic.models import Branch, Doctor
from patients.models import Patient

MORNING = (time(9, 0), time(13, 0))
AFTERNOON = (time(14, 0), time(18, 0))


@transaction.atomic
def seed_demo_schedule(*, doctors: Sequence[Doctor], patients: Sequence[Patient]) -> dict[str, int]:
    for doctor in doctors:
        if WeeklySession.objects.filter(doctor=doctor).exists():
            continue  # a schedule configured by staff is left as it is
        # A doctor at two branches consults at the first in the morning, at the second in the afternoon.
        for branch, (start, end) in zip(doctor.branches.order_by("code"), (MORNING, AFTERNOON), strict=False):
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
    if not Appointment.objects.filter(patient__in=patients).exists() and home is not None:
        _seed_appointments(doctor=first, branch=home, patients=patients[:7])
    return {
        "sessions": WeeklySession.objects.filter(doctor__in=doctors).count(),
        "appointments": Appointment.objects.filter(patient__in=patients).count(),
    }


def _seed_appointments(*, doctor: Doctor, branch: Branch, patients: Sequence[Patient]) -> None:
    """Seven bookings on the doctor's next open day, then one appointment in every other status."""
    length = timedelta(minutes=doctor.default_slot_minutes)
    for offset in range(1, 15):
        cells = free_cells(
            doctor=doctor, branch=branch, day=timezone.localdate() + timedelta(days=offset), duration=length
        )
        if len(cells) >= len(patients):
            break
    else:
        return
    booked = [
        appointment_book(
            patient=patient, doctor=doctor, branch=branch, slot_start=cell.start, slot_end=cell.end, actor="seed_demo"
        )
        for patient, cell in zip(patients, cells, strict=False)
    ]
    if len(booked) < 7:
        return
    # Check-in happens on the appointment's day and a no-show once it has started, so the three that show
    # the clinic's day are moved to today first, back to back and ending around now.
    _move_to_today(doctor=doctor, branch=branch, appointments=[booked[6], booked[4], booked[3]], length=length)
    appointment_check_in(appointment=booked[3], actor="seed_demo")
    appointment_complete(appointment=appointment_check_in(appointment=booked[4], actor="seed_demo"), actor="seed_demo")
    appointment_cancel(appointment=booked[5], reason="Patient travelling", actor="seed_demo", enforce_window=False)
    appointment_no_show(appointment=booked[6], actor="seed_demo")


def _move_to_today(*, doctor: Doctor, branch: Branch, appointments: Sequence[Appointment], length: timedelta) -> None:
    """Demo data only: put the appointments one after another from len x length before now (not before local
    midnight), so the first has started and all are on today's local date. Each keeps its token; today's
    counter is raised past it so later bookings today never hand the number out again."""
    now = timezone.localtime(timezone.now(), branch.zone).replace(second=0, microsecond=0)
    start = max(now - len(appointments) * length, now.replace(hour=0, minute=0))
    for index, appointment in enumerate(appointments):
        slot_start = start + index * length
        Appointment.objects.filter(pk=appointment.pk).update(
            slot_start=slot_start, slot_end=slot_start + length, local_date=slot_start.date()
        )
    counter, _ = TokenCounter.objects.get_or_create(doctor=doctor, local_date=start.date())
    counter.last_number = max([counter.last_number, *(a.token_number for a in appointments)])
    counter.save(update_fields=["last_number"])
