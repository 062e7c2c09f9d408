"""Demo scheduling data for `seed_demo`: weekly sessions on every day of the week, a leave, a holiday and
a few bookings. Idempotent."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date, datetime, time, timedelta

from django.db import transaction
from django.utils import timezone

from appointments.models import Appointment, BranchHoliday, DoctorLeave, WeeklySession
from appointments.services import SlotUnavailable, appointment_book
from clinic.models import Doctor
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
        day = timezone.localdate() + timedelta(days=1)
        for index, patient in enumerate(patients[:3]):
            slot_start = datetime.combine(day, MORNING[0], tzinfo=home.zone) + timedelta(
                minutes=first.default_slot_minutes * index
            )
            try:
                appointment_book(
                    patient=patient,
                    doctor=first,
                    branch=home,
                    slot_start=slot_start,
                    slot_end=slot_start + timedelta(minutes=first.default_slot_minutes),
                )
            except SlotUnavailable:
                continue  # a holiday or leave on that day: the demo simply has fewer bookings
    return {
        "sessions": WeeklySession.objects.filter(doctor__in=doctors).count(),
        "appointments": Appointment.objects.filter(patient__in=patients).count(),
    }
