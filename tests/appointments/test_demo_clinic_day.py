"""seed_demo's clinic day: at each branch, today's appointments sit around the branch's current local time
whatever the hour (seen earlier, a no-show, patients waiting, bookings to come), so a demo always has
patients to check in. The clock is set to the hours that matter: midday, just after and just before midnight."""

from __future__ import annotations

from datetime import datetime, time, timedelta
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command
from django.utils import timezone

from appointments.models import Appointment
from appointments.services import appointment_check_in
from clinic.models import Doctor
from tests.helpers import IST

pytestmark = pytest.mark.django_db
DUTY = {"BLR": "Dr. Kavya Menon", "MUM": "Dr. Farhan Qureshi"}
DAY_PATTERN = [
    "completed", "completed", "no_show", "checked_in", "checked_in", "booked", "booked", "cancelled", "booked", "booked",
]  # fmt: skip


def clock_at(monkeypatch: pytest.MonkeyPatch, hhmm: str) -> datetime:
    """Today (in Bengaluru) at hh:mm: every timezone.now() of the services and the seed answers it."""
    instant = datetime.combine(timezone.localdate(timezone.now(), IST), time.fromisoformat(hhmm), tzinfo=IST)
    monkeypatch.setattr(timezone, "now", lambda: instant)
    return instant


def clinic_day(code: str, day: Any) -> list[Appointment]:
    doctor = Doctor.objects.get(name=DUTY[code])
    return list(Appointment.objects.filter(doctor=doctor, branch__code=code, local_date=day).order_by("slot_start"))


def seed() -> None:
    call_command("seed_demo", stdout=StringIO())


def test_at_midday_each_branch_has_its_day_around_now(monkeypatch):
    now = clock_at(monkeypatch, "12:00")
    seed()

    for code in DUTY:
        day = clinic_day(code, now.date())
        assert [a.status for a in day] == DAY_PATTERN, code
        assert [f"{a.slot_start.astimezone(IST):%H:%M}" for a in day] == [
            "11:00", "11:15", "11:30", "11:45", "12:00", "12:15", "12:30", "12:45", "13:00", "13:15",
        ]  # fmt: skip
        assert [a.token_number for a in day] == list(range(1, 11))
        waiting = [a.checked_in_at.astimezone(IST).strftime("%H:%M") for a in day if a.status == "checked_in"]
        assert waiting == ["11:39", "11:54"]
        seen = [a for a in day if a.status == "completed"]
        assert [(a.visit.start, a.visit.end) for a in seen] == [(a.checked_in_at, a.slot_end) for a in seen]
        assert all(a.completed_at <= now for a in seen)
        assert {a.patient.registration_branch.code for a in day} == {code}


def test_just_before_midnight_the_day_ends_now_and_its_bookings_can_still_be_checked_in(monkeypatch):
    now = clock_at(monkeypatch, "23:50")
    seed()

    day = clinic_day("BLR", now.date())
    assert [a.status for a in day] == DAY_PATTERN
    assert f"{day[-1].slot_start.astimezone(IST):%H:%M}" == "23:30"
    late = appointment_check_in(appointment=day[-1], actor="staff:test")
    assert late.status == "checked_in"


def test_just_after_midnight_the_day_starts_now_with_patients_to_check_in(monkeypatch):
    now = clock_at(monkeypatch, "00:05")
    seed()

    day = clinic_day("MUM", now.date())
    assert f"{day[0].slot_start.astimezone(IST):%H:%M}" == "00:00"
    assert [a.status for a in day] == ["completed", "completed", "booked", *DAY_PATTERN[3:]]  # no slot begun to miss
    booked = [a for a in day if a.status == "booked"]
    assert len(booked) == 5
    assert appointment_check_in(appointment=booked[0], actor="staff:test").status == "checked_in"


def test_a_second_seed_the_same_day_adds_nothing_and_the_next_day_adds_that_days_clinic_and_bookings_ahead(monkeypatch):
    now = clock_at(monkeypatch, "10:00")
    seed()
    seed()
    first = Appointment.objects.count()
    assert len(clinic_day("BLR", now.date())) == 10

    tomorrow = clock_at(monkeypatch, "10:00") + timedelta(days=1)
    monkeypatch.setattr(timezone, "now", lambda: tomorrow)
    seed()

    assert Appointment.objects.count() == first + 20 + 4  # two clinic days, and the bookings ahead renewed
    assert len(clinic_day("BLR", tomorrow.date())) == 10
