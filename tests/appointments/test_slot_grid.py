"""GET /api/v1/appointments/slots: the grid edge cases of the appointments issue."""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

import pytest
from django.db import IntegrityError, transaction
from django.utils import timezone

from appointments.models import Appointment, BranchHoliday, DoctorLeave, WeeklySession
from tests.appointments.lifecycle_helpers import session
from tests.factories import BranchFactory, DoctorFactory
from tests.helpers import bearer, next_weekday
from tests.patients.factories import PatientFactory

pytestmark = pytest.mark.django_db
SLOTS = "/api/v1/appointments/slots"


@pytest.fixture
def blr():
    return BranchFactory(code="BLR", time_zone="Asia/Kolkata")


@pytest.fixture
def doctor(blr):
    return DoctorFactory(branches=[blr], default_slot_minutes=15)


@pytest.fixture
def reader(token_for):
    return token_for(["appointments:read"])


def slots(client, token, doctor, day: date, **params):
    return client.get(SLOTS, {"doctor_id": str(doctor.id), "date": day.isoformat(), **params}, **bearer(token))


def starts(response) -> list[str]:
    assert response.status_code == 200, response.content
    return [cell["start_time"] for cell in response.json()]


def test_cells_start_at_each_session_start_and_carry_the_branch_offset(client, reader, doctor, blr):
    day = next_weekday(0)
    session(doctor, blr, day.weekday(), "09:00", "10:00")
    session(doctor, blr, day.weekday(), "14:00", "14:30")

    response = slots(client, reader, doctor, day)

    assert response.json() == [
        {"start_time": f"{day}T{s}:00+05:30", "end_time": f"{day}T{e}:00+05:30"}
        for s, e in [("09:00", "09:15"), ("09:15", "09:30"), ("09:30", "09:45"), ("09:45", "10:00"),
                     ("14:00", "14:15"), ("14:15", "14:30")]
    ]  # fmt: skip
    assert response["X-Total-Count"] == "6"


def test_a_session_that_does_not_divide_evenly_drops_the_short_remainder(client, reader, doctor, blr):
    day = next_weekday(1)
    session(doctor, blr, day.weekday(), "09:00", "10:10")

    assert starts(slots(client, reader, doctor, day, duration=30)) == [f"{day}T09:00:00+05:30", f"{day}T09:30:00+05:30"]


def test_leave_and_holidays_remove_the_whole_day(client, reader, doctor, blr):
    leave_day, holiday = next_weekday(2), next_weekday(3)
    session(doctor, blr, leave_day.weekday(), "09:00", "10:00")
    session(doctor, blr, holiday.weekday(), "09:00", "10:00")
    DoctorLeave.objects.create(doctor=doctor, start_date=leave_day - timedelta(days=1), end_date=leave_day)
    BranchHoliday.objects.create(branch=blr, date=holiday, name="Festival")

    assert starts(slots(client, reader, doctor, leave_day)) == []
    assert starts(slots(client, reader, doctor, holiday)) == []
    assert len(starts(slots(client, reader, doctor, holiday + timedelta(days=7)))) == 4


def test_a_doctor_at_two_branches_needs_branch_id_and_gets_that_branchs_sessions(client, reader, blr):
    mum = BranchFactory(code="MUM", state="Maharashtra")
    doctor = DoctorFactory(branches=[blr, mum], default_slot_minutes=30)
    day = next_weekday(4)
    session(doctor, blr, day.weekday(), "09:00", "10:00")
    session(doctor, mum, day.weekday(), "14:00", "15:00")

    missing = slots(client, reader, doctor, day)
    at_mum = slots(client, reader, doctor, day, branch_id=str(mum.id))

    assert missing.status_code == 400
    assert [e["field"] for e in missing.json()["errors"]] == ["branch_id"]
    assert starts(at_mum) == [f"{day}T14:00:00+05:30", f"{day}T14:30:00+05:30"]


def test_booked_cells_at_any_branch_are_removed_but_cancelled_ones_are_not(client, reader, doctor, blr):
    day = next_weekday(0, after_days=14)
    session(doctor, blr, day.weekday(), "09:00", "10:00")
    zone = ZoneInfo("Asia/Kolkata")

    def appointment(start: str, status: str, token: int) -> None:
        begin = datetime.combine(day, time.fromisoformat(start), tzinfo=zone)
        Appointment.objects.create(
            patient=PatientFactory(registration_branch=blr), doctor=doctor, branch=blr, slot_start=begin,
            slot_end=begin + timedelta(minutes=15), local_date=day, token_number=token, status=status,
        )  # fmt: skip

    appointment("09:15", Appointment.Status.BOOKED, 1)
    appointment("09:30", Appointment.Status.CANCELLED, 2)

    assert starts(slots(client, reader, doctor, day)) == [
        f"{day}T09:00:00+05:30",
        f"{day}T09:30:00+05:30",
        f"{day}T09:45:00+05:30",
    ]


def test_a_branch_in_another_time_zone_uses_its_own_day_and_offset(client, reader):
    tokyo = BranchFactory(code="TYO", time_zone="Asia/Tokyo")
    doctor = DoctorFactory(branches=[tokyo], default_slot_minutes=60)
    day = next_weekday(5)
    session(doctor, tokyo, day.weekday(), "00:00", "02:00")

    response = slots(client, reader, doctor, day)

    # Tokyo's midnight is the previous day in UTC and in the server's Asia/Kolkata.
    assert starts(response) == [f"{day}T00:00:00+09:00", f"{day}T01:00:00+09:00"]
    first = datetime.fromisoformat(response.json()[0]["start_time"]).astimezone(UTC)
    assert first.date() == day - timedelta(days=1)


def test_cells_already_started_today_are_removed(client, token_for, doctor, blr, monkeypatch):
    today = timezone.localdate()
    session(doctor, blr, today.weekday(), "09:00", "10:00")
    zone = ZoneInfo("Asia/Kolkata")
    # django.utils.timezone.now is patched for every caller, so the token is issued on the same clock.
    monkeypatch.setattr("appointments.slots.timezone.now", lambda: datetime.combine(today, time(9, 20), tzinfo=zone))
    reader = token_for(["appointments:read"])

    assert starts(slots(client, reader, doctor, today)) == [f"{today}T09:30:00+05:30", f"{today}T09:45:00+05:30"]


@pytest.mark.parametrize(
    ("params", "fields"),
    [
        ({}, ["doctor_id", "date"]),
        ({"doctor_id": "abc", "date": "2026-13-40"}, ["doctor_id", "date"]),
        ({"duration": "4"}, ["duration"]),
        ({"duration": "241"}, ["duration"]),
    ],
)
def test_bad_parameters_are_400_naming_each(client, reader, doctor, params, fields):
    query = {"doctor_id": str(doctor.id), "date": next_weekday(0).isoformat()} if "duration" in params else {}
    response = client.get(SLOTS, {**query, **params}, **bearer(reader))

    assert response.status_code == 400
    assert [e["field"] for e in response.json()["errors"]] == fields


def test_an_unknown_doctor_is_404(client, reader):
    response = client.get(
        SLOTS, {"doctor_id": "00000000-0000-0000-0000-000000000001", "date": "2030-01-07"}, **bearer(reader)
    )

    assert response.status_code == 404
    assert response.json()["code"] == "not_found"


def test_overlapping_sessions_of_one_doctor_are_refused_by_the_database(doctor, blr):
    day = next_weekday(0)
    session(doctor, blr, day.weekday(), "09:00", "12:00")
    other = BranchFactory(code="HYD", state="Telangana")
    doctor.branches.add(other)

    with pytest.raises(IntegrityError), transaction.atomic():
        session(doctor, other, day.weekday(), "11:00", "13:00")
    session(doctor, blr, day.weekday(), "12:00", "13:00")  # adjacent is fine

    assert WeeklySession.objects.filter(doctor=doctor).count() == 2
