"""GET /api/v1/appointments/slots: a doctor's sessions at a branch on a local date, minus leave and
holidays, cut into a grid, minus booked and started cells (docs/api-rules.md §10)."""

from __future__ import annotations

import zoneinfo
from datetime import date, datetime, time, timedelta
from typing import Any

import pytest
from django.utils import timezone

from appointments.models import Appointment
from appointments.slots import Cell, free_cells, is_free_cell
from tests.appointments.factories import (
    AppointmentFactory,
    BranchHolidayFactory,
    DoctorLeaveFactory,
    WeeklySessionFactory,
    at,
    future_monday,
)
from tests.factories import BranchFactory, DoctorFactory
from tests.helpers import assert_problem, bearer, error_codes, weekday_on_or_after

pytestmark = pytest.mark.django_db

SLOTS = "/api/v1/appointments/slots"
IST = "+05:30"


def hm(value: str) -> time:
    hour, minute = value.split(":")
    return time(int(hour), int(minute))


def every(start: str, end: str, minutes: int) -> list[tuple[str, str]]:
    """The (start, end) pairs of a grid from `start` in steps of `minutes`, ending by `end` (HH:MM)."""
    day = date(2000, 1, 1)
    cursor, stop, step = datetime.combine(day, hm(start)), datetime.combine(day, hm(end)), timedelta(minutes=minutes)
    pairs = []
    while cursor + step <= stop:
        pairs.append((f"{cursor:%H:%M}", f"{cursor + step:%H:%M}"))
        cursor += step
    return pairs


def cells(day: date, offset: str, pairs: list[tuple[str, str]]) -> list[dict[str, str]]:
    return [{"start_time": f"{day}T{s}:00{offset}", "end_time": f"{day}T{e}:00{offset}"} for s, e in pairs]


def get_slots(client: Any, token: str, **params: Any) -> Any:
    return client.get(SLOTS, params, **bearer(token))


def ok(response: Any) -> list[dict[str, str]]:
    assert response.status_code == 200, response.content
    assert response["Content-Type"] == "application/json"
    body = response.json()
    assert response["X-Total-Count"] == str(len(body))
    return body


@pytest.fixture
def reader(token_for: Any) -> str:
    return token_for(["appointments:read"])


@pytest.fixture
def monday() -> date:
    return future_monday()


@pytest.fixture
def blr() -> Any:
    return BranchFactory(code="BLR", name="Bengaluru")


@pytest.fixture
def mum() -> Any:
    return BranchFactory(code="MUM", name="Mumbai", state="Maharashtra")


@pytest.fixture
def doctor(blr: Any) -> Any:
    """Consults at BLR on Mondays 09:00-12:00, in 15-minute cells."""
    doctor = DoctorFactory(name="Dr. Ananya Rao", branches=[blr], default_slot_minutes=15)
    WeeklySessionFactory(doctor=doctor, branch=blr, weekday=0, start=time(9), end=time(12))
    return doctor


@pytest.fixture
def two_branch_doctor(blr: Any, mum: Any) -> Any:
    """Consults on Mondays at BLR 09:00-11:00 and at MUM 14:00-16:00, in 30-minute cells."""
    doctor = DoctorFactory(name="Dr. Two Branches", branches=[blr, mum], default_slot_minutes=30)
    WeeklySessionFactory(doctor=doctor, branch=blr, weekday=0, start=time(9), end=time(11))
    WeeklySessionFactory(doctor=doctor, branch=mum, weekday=0, start=time(14), end=time(16))
    return doctor


# --- The grid -------------------------------------------------------------------------------------


def test_a_session_is_cut_into_cells_of_the_doctors_default_duration_with_the_branch_offset(
    client, reader, blr, monday
):
    doctor = DoctorFactory(branches=[blr], default_slot_minutes=20)
    WeeklySessionFactory(doctor=doctor, branch=blr, weekday=0, start=time(9), end=time(12))

    body = ok(get_slots(client, reader, doctor_id=doctor.id, date=monday))

    assert body[:2] == [
        {"start_time": f"{monday}T09:00:00+05:30", "end_time": f"{monday}T09:20:00+05:30"},
        {"start_time": f"{monday}T09:20:00+05:30", "end_time": f"{monday}T09:40:00+05:30"},
    ]
    assert body == cells(monday, IST, every("09:00", "12:00", 20))
    assert len(body) == 9


@pytest.mark.parametrize(
    ("duration", "starts"),
    [
        (30, ["09:00", "09:30", "10:00", "10:30", "11:00", "11:30"]),
        (45, ["09:00", "09:45", "10:30", "11:15"]),
        (60, ["09:00", "10:00", "11:00"]),
        (5, [pair[0] for pair in every("09:00", "12:00", 5)]),
        (180, ["09:00"]),
    ],
)
def test_the_duration_parameter_changes_the_grid(client, reader, doctor, monday, duration, starts):
    body = ok(get_slots(client, reader, doctor_id=doctor.id, date=monday, duration=duration))

    assert body == cells(monday, IST, every("09:00", "12:00", duration))
    assert [slot["start_time"][11:16] for slot in body] == starts


def test_the_longest_duration_240_is_accepted(client, reader, blr, monday):
    doctor = DoctorFactory(branches=[blr])
    WeeklySessionFactory(doctor=doctor, branch=blr, weekday=0, start=time(8), end=time(13))

    body = ok(get_slots(client, reader, doctor_id=doctor.id, date=monday, duration=240))

    assert body == cells(monday, IST, [("08:00", "12:00")])


def test_a_remainder_shorter_than_a_cell_is_dropped(client, reader, blr, monday):
    doctor = DoctorFactory(branches=[blr], default_slot_minutes=30)
    WeeklySessionFactory(doctor=doctor, branch=blr, weekday=0, start=time(9), end=time(10, 10))

    body = ok(get_slots(client, reader, doctor_id=doctor.id, date=monday))

    assert body == cells(monday, IST, [("09:00", "09:30"), ("09:30", "10:00")])


def test_a_session_shorter_than_the_duration_has_no_cell(client, reader, blr, monday):
    doctor = DoctorFactory(branches=[blr], default_slot_minutes=15)
    WeeklySessionFactory(doctor=doctor, branch=blr, weekday=0, start=time(9), end=time(9, 10))

    assert ok(get_slots(client, reader, doctor_id=doctor.id, date=monday)) == []


def test_several_sessions_a_day_are_gridded_each_from_its_own_start_in_time_order(client, reader, blr, monday):
    doctor = DoctorFactory(branches=[blr], default_slot_minutes=30)
    WeeklySessionFactory(doctor=doctor, branch=blr, weekday=0, start=time(17, 15), end=time(18, 15))
    WeeklySessionFactory(doctor=doctor, branch=blr, weekday=0, start=time(9), end=time(10))
    WeeklySessionFactory(doctor=doctor, branch=blr, weekday=0, start=time(12), end=time(13, 20))
    WeeklySessionFactory(doctor=doctor, branch=blr, weekday=1, start=time(9), end=time(10))

    body = ok(get_slots(client, reader, doctor_id=doctor.id, date=monday))

    assert body == cells(
        monday,
        IST,
        [
            ("09:00", "09:30"),
            ("09:30", "10:00"),
            ("12:00", "12:30"),
            ("12:30", "13:00"),
            ("17:15", "17:45"),
            ("17:45", "18:15"),
        ],
    )


def test_sessions_back_to_back_give_a_continuous_grid(client, reader, blr, monday):
    doctor = DoctorFactory(branches=[blr], default_slot_minutes=30)
    WeeklySessionFactory(doctor=doctor, branch=blr, weekday=0, start=time(9), end=time(10))
    WeeklySessionFactory(doctor=doctor, branch=blr, weekday=0, start=time(10), end=time(11))

    body = ok(get_slots(client, reader, doctor_id=doctor.id, date=monday))

    assert body == cells(monday, IST, every("09:00", "11:00", 30))


@pytest.mark.parametrize("days_after_monday", [1, 2, 6])
def test_a_day_without_a_session_has_no_slots(client, reader, doctor, monday, days_after_monday):
    response = get_slots(client, reader, doctor_id=doctor.id, date=monday + timedelta(days=days_after_monday))

    assert ok(response) == []
    assert response["X-Total-Count"] == "0"


def test_the_same_weekday_of_every_week_has_the_session(client, reader, doctor, monday):
    for week in (1, 2, 10):
        day = monday + timedelta(weeks=week)
        assert ok(get_slots(client, reader, doctor_id=doctor.id, date=day)) == cells(
            day, IST, every("09:00", "12:00", 15)
        )


def test_a_doctor_without_any_session_has_no_slots(client, reader, blr, monday):
    doctor = DoctorFactory(branches=[blr])

    assert ok(get_slots(client, reader, doctor_id=doctor.id, date=monday)) == []


# --- Leave and holidays ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("first", "last"),
    [(0, 0), (-2, 2), (0, 4), (-7, 0)],
    ids=["that-day", "range-around", "range-from", "range-to"],
)
def test_a_day_of_leave_has_no_slots(client, reader, doctor, monday, first, last):
    DoctorLeaveFactory(doctor=doctor, start_date=monday + timedelta(days=first), end_date=monday + timedelta(days=last))

    assert ok(get_slots(client, reader, doctor_id=doctor.id, date=monday)) == []


@pytest.mark.parametrize(("first", "last"), [(-3, -1), (1, 3)], ids=["ended-the-day-before", "starts-the-day-after"])
def test_leave_on_other_days_leaves_the_slots(client, reader, doctor, monday, first, last):
    DoctorLeaveFactory(doctor=doctor, start_date=monday + timedelta(days=first), end_date=monday + timedelta(days=last))

    assert ok(get_slots(client, reader, doctor_id=doctor.id, date=monday)) == cells(
        monday, IST, every("09:00", "12:00", 15)
    )


def test_another_doctors_leave_leaves_the_slots(client, reader, doctor, blr, monday):
    DoctorLeaveFactory(doctor=DoctorFactory(branches=[blr]), start_date=monday, end_date=monday)

    assert len(ok(get_slots(client, reader, doctor_id=doctor.id, date=monday))) == 12


def test_a_doctors_leave_covers_every_branch(client, reader, two_branch_doctor, blr, mum, monday):
    DoctorLeaveFactory(doctor=two_branch_doctor, start_date=monday, end_date=monday)

    for branch in (blr, mum):
        assert ok(get_slots(client, reader, doctor_id=two_branch_doctor.id, date=monday, branch_id=branch.id)) == []


def test_a_branch_holiday_has_no_slots_but_the_doctors_other_branch_still_has(
    client, reader, two_branch_doctor, blr, mum, monday
):
    BranchHolidayFactory(branch=blr, date=monday, name="Rajyotsava")

    closed = get_slots(client, reader, doctor_id=two_branch_doctor.id, date=monday, branch_id=blr.id)
    open_ = get_slots(client, reader, doctor_id=two_branch_doctor.id, date=monday, branch_id=mum.id)

    assert ok(closed) == []
    assert ok(open_) == cells(monday, IST, every("14:00", "16:00", 30))


def test_a_holiday_on_another_day_or_branch_leaves_the_slots(client, reader, doctor, mum, blr, monday):
    BranchHolidayFactory(branch=blr, date=monday + timedelta(days=1))
    BranchHolidayFactory(branch=mum, date=monday)

    assert len(ok(get_slots(client, reader, doctor_id=doctor.id, date=monday))) == 12


# --- Branches -------------------------------------------------------------------------------------


def test_a_doctor_at_two_branches_needs_branch_id(client, reader, two_branch_doctor, monday):
    response = get_slots(client, reader, doctor_id=two_branch_doctor.id, date=monday)

    body = assert_problem(response, 400, "validation_error")
    assert body["errors"] == [
        {"field": "branch_id", "code": "invalid", "message": "Required: this doctor consults at more than one branch."}
    ]


def test_with_branch_id_only_that_branchs_sessions_are_returned(client, reader, two_branch_doctor, blr, mum, monday):
    at_blr = get_slots(client, reader, doctor_id=two_branch_doctor.id, date=monday, branch_id=blr.id)
    at_mum = get_slots(client, reader, doctor_id=two_branch_doctor.id, date=monday, branch_id=mum.id)

    assert ok(at_blr) == cells(monday, IST, every("09:00", "11:00", 30))
    assert ok(at_mum) == cells(monday, IST, every("14:00", "16:00", 30))


def test_a_doctor_at_one_branch_may_also_be_asked_with_its_branch_id(client, reader, doctor, blr, monday):
    response = get_slots(client, reader, doctor_id=doctor.id, date=monday, branch_id=blr.id)

    assert ok(response) == cells(monday, IST, every("09:00", "12:00", 15))


def test_a_branch_the_doctor_does_not_work_at_is_400_naming_branch_id(client, reader, doctor, mum, monday):
    # Even with a session there on record: the doctor's branches decide, not leftover schedule rows.
    WeeklySessionFactory(doctor=doctor, branch=mum, weekday=0, start=time(14), end=time(15))

    for branch_id in (mum.id, BranchFactory(code="DEL", state="Delhi").id):
        response = get_slots(client, reader, doctor_id=doctor.id, date=monday, branch_id=branch_id)
        body = assert_problem(response, 400, "validation_error")
        assert body["errors"] == [
            {"field": "branch_id", "code": "invalid", "message": "This doctor does not consult at that branch."}
        ]


def test_a_malformed_branch_id_is_400_naming_it(client, reader, doctor, monday):
    response = get_slots(client, reader, doctor_id=doctor.id, date=monday, branch_id="BLR")

    assert error_codes(response) == [("branch_id", "invalid")]


def test_a_closed_branch_of_the_doctor_is_not_counted(client, reader, doctor, blr, monday):
    closed = BranchFactory(code="OLD", is_active=False)
    doctor.branches.add(closed)

    assert ok(get_slots(client, reader, doctor_id=doctor.id, date=monday)) == cells(
        monday, IST, every("09:00", "12:00", 15)
    )
    response = get_slots(client, reader, doctor_id=doctor.id, date=monday, branch_id=closed.id)
    assert error_codes(response) == [("branch_id", "invalid")]


def test_a_restricted_client_needs_no_branch_id_for_a_doctor_with_one_visible_branch(
    client, token_for, two_branch_doctor, mum, blr, monday
):
    token = token_for(["appointments:read"], branches=[mum])

    response = get_slots(client, token, doctor_id=two_branch_doctor.id, date=monday)

    assert ok(response) == cells(monday, IST, every("14:00", "16:00", 30))
    hidden = get_slots(client, token, doctor_id=two_branch_doctor.id, date=monday, branch_id=blr.id)
    assert error_codes(hidden) == [("branch_id", "invalid")]


def test_a_restricted_client_gets_404_for_a_doctor_only_at_other_branches(client, token_for, doctor, mum, monday):
    response = get_slots(client, token_for(["appointments:read"], branches=[mum]), doctor_id=doctor.id, date=monday)

    body = assert_problem(response, 404, "not_found")
    assert body["detail"] == f"No doctor {str(doctor.id)!r}."


# --- Booked cells ---------------------------------------------------------------------------------


@pytest.mark.parametrize("status", [Appointment.Status.BOOKED, Appointment.Status.CHECKED_IN])
def test_an_active_appointment_removes_exactly_its_cell(client, reader, doctor, blr, monday, status):
    AppointmentFactory(
        doctor=doctor, branch=blr, slot_start=at(monday, 9, 15, blr), slot_end=at(monday, 9, 30, blr), status=status
    )

    body = ok(get_slots(client, reader, doctor_id=doctor.id, date=monday))

    assert body == cells(monday, IST, [pair for pair in every("09:00", "12:00", 15) if pair[0] != "09:15"])


@pytest.mark.parametrize(
    "status", [Appointment.Status.CANCELLED, Appointment.Status.COMPLETED, Appointment.Status.NO_SHOW]
)
def test_an_inactive_appointment_leaves_its_cell_free(client, reader, doctor, blr, monday, status):
    AppointmentFactory(
        doctor=doctor, branch=blr, slot_start=at(monday, 9, 15, blr), slot_end=at(monday, 9, 30, blr), status=status
    )

    body = ok(get_slots(client, reader, doctor_id=doctor.id, date=monday))

    assert body == cells(monday, IST, every("09:00", "12:00", 15))


def test_an_appointment_of_the_doctor_at_another_branch_removes_the_overlapping_cell(client, reader, blr, mum, monday):
    doctor = DoctorFactory(branches=[blr, mum], default_slot_minutes=15)
    WeeklySessionFactory(doctor=doctor, branch=blr, weekday=0, start=time(9), end=time(10))
    # A row the grid of MUM would never produce (the doctor has no session there): the doctor is busy all the same.
    AppointmentFactory(doctor=doctor, branch=mum, slot_start=at(monday, 9, 15, mum), slot_end=at(monday, 9, 30, mum))

    body = ok(get_slots(client, reader, doctor_id=doctor.id, date=monday, branch_id=blr.id))

    assert body == cells(monday, IST, [("09:00", "09:15"), ("09:30", "09:45"), ("09:45", "10:00")])


def test_an_appointment_overlapping_two_cells_removes_both(client, reader, doctor, blr, monday):
    AppointmentFactory(doctor=doctor, branch=blr, slot_start=at(monday, 9, 20, blr), slot_end=at(monday, 9, 40, blr))

    body = ok(get_slots(client, reader, doctor_id=doctor.id, date=monday))

    assert [slot["start_time"][11:16] for slot in body[:3]] == ["09:00", "09:45", "10:00"]
    assert body == cells(
        monday, IST, [pair for pair in every("09:00", "12:00", 15) if pair[0] not in ("09:15", "09:30")]
    )


def test_a_booked_cell_of_another_duration_removes_every_overlapping_cell_of_the_asked_grid(
    client, reader, doctor, blr, monday
):
    AppointmentFactory(doctor=doctor, branch=blr, slot_start=at(monday, 9, 15, blr), slot_end=at(monday, 9, 30, blr))
    AppointmentFactory(doctor=doctor, branch=blr, slot_start=at(monday, 10, 45, blr), slot_end=at(monday, 11, 15, blr))

    body = ok(get_slots(client, reader, doctor_id=doctor.id, date=monday, duration=30))

    assert body == cells(monday, IST, [("09:30", "10:00"), ("10:00", "10:30"), ("11:30", "12:00")])


def test_appointments_touching_a_cell_do_not_remove_it(client, reader, doctor, blr, monday):
    AppointmentFactory(doctor=doctor, branch=blr, slot_start=at(monday, 9, 0, blr), slot_end=at(monday, 9, 15, blr))
    AppointmentFactory(doctor=doctor, branch=blr, slot_start=at(monday, 9, 30, blr), slot_end=at(monday, 9, 45, blr))

    body = ok(get_slots(client, reader, doctor_id=doctor.id, date=monday))

    assert body[:2] == cells(monday, IST, [("09:15", "09:30"), ("09:45", "10:00")])
    assert len(body) == 10


def test_another_doctors_appointment_leaves_the_cell_free(client, reader, doctor, blr, monday):
    AppointmentFactory(branch=blr, slot_start=at(monday, 9, 15, blr), slot_end=at(monday, 9, 30, blr))

    assert len(ok(get_slots(client, reader, doctor_id=doctor.id, date=monday))) == 12


def test_appointments_on_other_days_leave_the_cells_free(client, reader, doctor, blr, monday):
    for day in (monday - timedelta(days=7), monday + timedelta(days=1)):
        AppointmentFactory(doctor=doctor, branch=blr, slot_start=at(day, 9, 15, blr), slot_end=at(day, 9, 30, blr))

    assert len(ok(get_slots(client, reader, doctor_id=doctor.id, date=monday))) == 12


# --- Started cells --------------------------------------------------------------------------------


def test_cells_already_started_today_are_gone_and_later_cells_remain(client, reader):
    # A zone where it is now between 03:00 and 19:59, so a session around "now" fits in the local day.
    for name in ("Asia/Kolkata", "Europe/London", "America/New_York", "Asia/Tokyo", "Pacific/Honolulu"):
        local_now = timezone.now().astimezone(zoneinfo.ZoneInfo(name))
        if 3 <= local_now.hour < 20:
            break
    branch = BranchFactory(code="NOW", time_zone=name)
    doctor = DoctorFactory(branches=[branch], default_slot_minutes=15)
    start = local_now.replace(minute=0, second=0, microsecond=0) - timedelta(hours=2)
    end = start + timedelta(hours=5)
    WeeklySessionFactory(doctor=doctor, branch=branch, weekday=local_now.weekday(), start=start.time(), end=end.time())
    grid = [
        (start + timedelta(minutes=15 * n)).astimezone(branch.zone) for n in range(20)
    ]  # the whole session, in quarters

    before = timezone.now()
    response = get_slots(client, reader, doctor_id=doctor.id, date=local_now.date())
    after = timezone.now()

    starts = [datetime.fromisoformat(slot["start_time"]) for slot in ok(response)]
    # Cells starting at or before now are gone; a quarter-hour boundary passing mid-request is tolerated.
    assert starts in ([c for c in grid if c > before], [c for c in grid if c > after])
    assert len(grid) - len(starts) >= 9  # the two hours before this hour, and this hour's first quarter
    assert len(starts) >= 8
    assert starts[-1] == grid[-1]


def test_the_cell_starting_exactly_now_is_gone(monkeypatch, blr, doctor, monday):
    monkeypatch.setattr("appointments.slots.timezone.now", lambda: at(monday, 9, 15, blr))

    result = free_cells(doctor=doctor, branch=blr, day=monday, duration=timedelta(minutes=15))

    assert [cell.start for cell in result] == [at(monday, 9, 30, blr) + timedelta(minutes=15 * n) for n in range(10)]


def test_a_cell_in_progress_is_gone_and_the_next_remains(monkeypatch, blr, doctor, monday):
    monkeypatch.setattr("appointments.slots.timezone.now", lambda: at(monday, 10, 7, blr))

    result = free_cells(doctor=doctor, branch=blr, day=monday, duration=timedelta(minutes=15))

    assert result[0] == Cell(at(monday, 10, 15, blr), at(monday, 10, 30, blr))
    assert len(result) == 7


def test_after_the_last_session_ends_the_day_has_no_slots(monkeypatch, blr, doctor, monday):
    monkeypatch.setattr("appointments.slots.timezone.now", lambda: at(monday, 12, 0, blr))

    assert free_cells(doctor=doctor, branch=blr, day=monday, duration=timedelta(minutes=15)) == []


def test_a_past_day_has_no_slots(client, reader, doctor, monday):
    last_month = monday - timedelta(weeks=8)
    assert last_month < timezone.localdate()

    assert ok(get_slots(client, reader, doctor_id=doctor.id, date=last_month)) == []


# --- Time zones -----------------------------------------------------------------------------------


def test_a_tokyo_branch_gives_times_at_plus_nine(client, reader, monday):
    tokyo = BranchFactory(code="TYO", time_zone="Asia/Tokyo")
    doctor = DoctorFactory(branches=[tokyo], default_slot_minutes=30)
    WeeklySessionFactory(doctor=doctor, branch=tokyo, weekday=0, start=time(9), end=time(10))

    body = ok(get_slots(client, reader, doctor_id=doctor.id, date=monday))

    assert body == cells(monday, "+09:00", [("09:00", "09:30"), ("09:30", "10:00")])


def test_the_weekday_is_the_branchs_local_one(client, reader, monday):
    # Monday 02:00-03:00 in Tokyo is Sunday evening in India and in UTC: the session is Monday's.
    tokyo = BranchFactory(code="TYO", time_zone="Asia/Tokyo")
    doctor = DoctorFactory(branches=[tokyo], default_slot_minutes=30)
    WeeklySessionFactory(doctor=doctor, branch=tokyo, weekday=0, start=time(2), end=time(3))

    monday_slots = ok(get_slots(client, reader, doctor_id=doctor.id, date=monday))
    sunday_slots = ok(get_slots(client, reader, doctor_id=doctor.id, date=monday - timedelta(days=1)))

    assert monday_slots == cells(monday, "+09:00", [("02:00", "02:30"), ("02:30", "03:00")])
    assert datetime.fromisoformat(monday_slots[0]["start_time"]).astimezone(zoneinfo.ZoneInfo("UTC")).date() == (
        monday - timedelta(days=1)
    )
    assert sunday_slots == []


@pytest.mark.parametrize(("month", "offset"), [(1, "-05:00"), (7, "-04:00")], ids=["winter", "summer"])
def test_a_new_york_branch_gives_times_with_its_offset_of_that_date(client, reader, month, offset):
    new_york = BranchFactory(code="NYC", time_zone="America/New_York")
    doctor = DoctorFactory(branches=[new_york], default_slot_minutes=30)
    # Monday evening in New York is Tuesday in India and in UTC.
    WeeklySessionFactory(doctor=doctor, branch=new_york, weekday=0, start=time(20), end=time(21))
    day = weekday_on_or_after(date(timezone.localdate().year + 1, month, 1), 0)

    monday_slots = ok(get_slots(client, reader, doctor_id=doctor.id, date=day))
    tuesday_slots = ok(get_slots(client, reader, doctor_id=doctor.id, date=day + timedelta(days=1)))

    assert monday_slots == cells(day, offset, [("20:00", "20:30"), ("20:30", "21:00")])
    assert tuesday_slots == []


def test_a_booked_cell_is_removed_whatever_zone_the_appointment_was_stored_in(client, reader, monday):
    tokyo = BranchFactory(code="TYO", time_zone="Asia/Tokyo")
    doctor = DoctorFactory(branches=[tokyo], default_slot_minutes=30)
    WeeklySessionFactory(doctor=doctor, branch=tokyo, weekday=0, start=time(9), end=time(10))
    utc = zoneinfo.ZoneInfo("UTC")
    AppointmentFactory(
        doctor=doctor,
        branch=tokyo,
        slot_start=datetime.combine(monday, time(0, 30), tzinfo=utc),  # 09:30 in Tokyo
        slot_end=datetime.combine(monday, time(1, 0), tzinfo=utc),
    )

    assert ok(get_slots(client, reader, doctor_id=doctor.id, date=monday)) == cells(
        monday, "+09:00", [("09:00", "09:30")]
    )


def test_on_the_spring_forward_day_cells_are_real_durations_and_never_repeat(client, reader):
    new_york = BranchFactory(code="NYC", time_zone="America/New_York")
    doctor = DoctorFactory(branches=[new_york], default_slot_minutes=30)
    WeeklySessionFactory(doctor=doctor, branch=new_york, weekday=6, start=time(1), end=time(4))
    # The second Sunday of March: 02:00 local jumps to 03:00, so 01:00-04:00 lasts two hours.
    day = weekday_on_or_after(date(timezone.localdate().year + 1, 3, 1), 6) + timedelta(weeks=1)

    body = ok(get_slots(client, reader, doctor_id=doctor.id, date=day))

    assert body == [
        {"start_time": f"{day}T01:00:00-05:00", "end_time": f"{day}T01:30:00-05:00"},
        {"start_time": f"{day}T01:30:00-05:00", "end_time": f"{day}T03:00:00-04:00"},
        {"start_time": f"{day}T03:00:00-04:00", "end_time": f"{day}T03:30:00-04:00"},
        {"start_time": f"{day}T03:30:00-04:00", "end_time": f"{day}T04:00:00-04:00"},
    ]


def test_on_the_fall_back_day_cells_are_real_durations(client, reader):
    new_york = BranchFactory(code="NYC", time_zone="America/New_York")
    doctor = DoctorFactory(branches=[new_york], default_slot_minutes=60)
    WeeklySessionFactory(doctor=doctor, branch=new_york, weekday=6, start=time(0), end=time(3))
    # The first Sunday of November: 02:00 local falls back to 01:00, so 00:00-03:00 lasts four hours.
    day = weekday_on_or_after(date(timezone.localdate().year + 1, 11, 1), 6)

    body = ok(get_slots(client, reader, doctor_id=doctor.id, date=day))

    assert body == [
        {"start_time": f"{day}T00:00:00-04:00", "end_time": f"{day}T01:00:00-04:00"},
        {"start_time": f"{day}T01:00:00-04:00", "end_time": f"{day}T01:00:00-05:00"},
        {"start_time": f"{day}T01:00:00-05:00", "end_time": f"{day}T02:00:00-05:00"},
        {"start_time": f"{day}T02:00:00-05:00", "end_time": f"{day}T03:00:00-05:00"},
    ]


# --- The booking rule is the same grid -----------------------------------------------------------


def test_is_free_cell_accepts_exactly_the_free_cells(blr, doctor, monday):
    AppointmentFactory(doctor=doctor, branch=blr, slot_start=at(monday, 9, 15, blr), slot_end=at(monday, 9, 30, blr))
    utc = zoneinfo.ZoneInfo("UTC")

    def free(start: datetime, minutes: int) -> bool:
        return is_free_cell(doctor=doctor, branch=blr, start=start, end=start + timedelta(minutes=minutes))

    assert free(at(monday, 9, 0, blr), 15)
    assert free(at(monday, 11, 45, blr), 15)
    assert free(at(monday, 9, 30, blr).astimezone(utc), 15)  # the same instant in another zone
    assert free(at(monday, 10, 0, blr), 30)
    assert not free(at(monday, 9, 15, blr), 15)  # booked
    assert not free(at(monday, 9, 0, blr), 30)  # overlaps the booked cell
    assert not free(at(monday, 9, 5, blr), 15)  # off the grid
    assert not free(at(monday, 11, 45, blr), 30)  # runs past the session
    assert not free(at(monday, 12, 0, blr), 15)  # outside the session
    assert not free(at(monday, 9, 0, blr), 0)
    assert not free(at(monday + timedelta(days=1), 9, 0, blr), 15)  # no session that day


# --- Parameters -----------------------------------------------------------------------------------


def test_doctor_id_and_date_are_required(client, reader):
    response = client.get(SLOTS, **bearer(reader))

    body = assert_problem(response, 400, "validation_error")
    assert body["errors"] == [
        {"field": "doctor_id", "code": "required", "message": "This field is required."},
        {"field": "date", "code": "required", "message": "This field is required."},
    ]


def test_a_missing_date_is_400_naming_date(client, reader, doctor):
    assert error_codes(client.get(SLOTS, {"doctor_id": doctor.id}, **bearer(reader))) == [("date", "required")]


def test_a_missing_doctor_id_is_400_naming_doctor_id(client, reader, monday):
    response = client.get(SLOTS, {"date": monday}, **bearer(reader))

    assert error_codes(response) == [("doctor_id", "required")]


def test_a_malformed_doctor_id_and_date_are_400_naming_both(client, reader):
    response = get_slots(client, reader, doctor_id="abc", date="2026-13-40")

    assert error_codes(response) == [("doctor_id", "invalid"), ("date", "invalid")]


@pytest.mark.parametrize("value", ["23-11-2026", "2026-02-30", "tomorrow", "2026-11-23T09:00:00+05:30"])
def test_a_malformed_date_is_400_naming_date(client, reader, doctor, value):
    response = get_slots(client, reader, doctor_id=doctor.id, date=value)

    assert error_codes(response) == [("date", "invalid")]


@pytest.mark.parametrize(
    ("value", "code"),
    [("0", "min_value"), ("4", "min_value"), ("241", "max_value"), ("x", "invalid"), ("15.5", "invalid")],
)
def test_a_duration_out_of_range_or_not_a_number_is_400_naming_duration(client, reader, doctor, monday, value, code):
    response = get_slots(client, reader, doctor_id=doctor.id, date=monday, duration=value)

    assert error_codes(response) == [("duration", code)]


def test_every_bad_parameter_is_named_at_once(client, reader):
    response = get_slots(client, reader, doctor_id="abc", date="x", branch_id="y", duration="0")

    assert error_codes(response) == [
        ("doctor_id", "invalid"),
        ("date", "invalid"),
        ("branch_id", "invalid"),
        ("duration", "min_value"),
    ]


def test_unknown_query_parameters_are_refused(client, reader, doctor, monday):
    response = get_slots(client, reader, doctor_id=doctor.id, date=monday, colour="blue")

    body = assert_problem(response, 400, "unknown_parameter")
    assert body["errors"] == [{"field": "colour", "code": "unknown_parameter", "message": "Unknown query parameter."}]


def test_an_unknown_doctor_is_404(client, reader, monday):
    missing = "7599fc20-8d9b-4406-96d0-16a9a77dff32"

    response = get_slots(client, reader, doctor_id=missing, date=monday)

    body = assert_problem(response, 404, "not_found")
    assert body["detail"] == f"No doctor {missing!r}."


def test_an_inactive_doctor_is_404(client, reader, blr, monday):
    doctor = DoctorFactory(branches=[blr], is_active=False)
    WeeklySessionFactory(doctor=doctor, branch=blr, weekday=0)

    assert_problem(get_slots(client, reader, doctor_id=doctor.id, date=monday), 404, "not_found")


@pytest.mark.parametrize("scopes", [["patients:read"], ["appointments:write"]], ids=" ".join)
def test_a_token_without_appointments_read_is_403(client, token_for, doctor, monday, scopes):
    response = get_slots(client, token_for(scopes), doctor_id=doctor.id, date=monday)

    body = assert_problem(response, 403, "insufficient_scope")
    assert body["detail"] == "This operation requires the scope appointments:read."
    assert (
        response["WWW-Authenticate"]
        == 'Bearer realm="clinic-api", error="insufficient_scope", scope="appointments:read"'
    )


def test_without_a_token_slots_are_401(client, doctor, monday):
    response = client.get(SLOTS, {"doctor_id": doctor.id, "date": monday})

    assert_problem(response, 401, "not_authenticated")


def test_the_slots_of_a_day_take_a_fixed_number_of_queries(client, reader, doctor, monday, django_assert_num_queries):
    """Token with the client's branches, doctor with its branches (one statement), the day's open sessions (holiday and leave in the
    same query), the appointments of the day, and the audit row: however many sessions and bookings."""
    WeeklySessionFactory(doctor=doctor, branch=doctor.branches.get(), weekday=0, start=time(14), end=time(17))
    for hour in (9, 10, 15):
        start = at(monday, hour, 0, doctor.branches.get())
        AppointmentFactory(
            doctor=doctor, branch=doctor.branches.get(), slot_start=start, slot_end=start + timedelta(minutes=15)
        )

    with django_assert_num_queries(5):
        body = ok(get_slots(client, reader, doctor_id=doctor.id, date=monday))
    assert len(body) == 24 - 3
