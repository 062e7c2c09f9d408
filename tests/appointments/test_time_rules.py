"""The time rules of docs/api-rules.md §7 on appointments: a reschedule is refused inside the cancellation
window like a cancel (so a late cancellation cannot be laundered through a move to another day), check-in
only on the appointment's local day at its branch, no-show only once it has started."""

from __future__ import annotations

from datetime import date, datetime, time, timedelta
from typing import Any

import pytest
from django.utils import timezone

from appointments.models import Appointment
from tests.appointments.factories import AppointmentFactory
from tests.appointments.lifecycle_helpers import (
    EventRecorder,
    NearTerm,
    assert_invalid_state,
    book_near,
    delete_appointment,
    get_appointment,
    get_slots,
    make_near_term,
    patch_reschedule,
    post_action,
    reschedule_body,
    session,
    snapshot,
)
from tests.helpers import assert_problem

pytestmark = pytest.mark.django_db

RESCHEDULE_WINDOW_DETAIL = (
    "Appointments at this branch can be rescheduled through the API only until 120 minutes before they start; "
    "ask the clinic's staff."
)
CANCEL_WINDOW_DETAIL = (
    "Appointments at this branch can be cancelled through the API only until 120 minutes before they start; "
    "ask the clinic's staff."
)
NO_SHOW_DETAIL = "An appointment can be marked a no-show only once it has started."


@pytest.fixture
def near(token_for) -> NearTerm:
    """120-minute window; the doctor consults today and tomorrow 06:00-18:00 local time (5-minute cells)."""
    near = make_near_term(token_for)
    tomorrow = timezone.now().astimezone(near.branch.zone).date() + timedelta(days=1)
    session(near.doctor, near.branch, tomorrow.weekday(), "06:00", "18:00")
    return near


@pytest.fixture
def published(monkeypatch) -> EventRecorder:
    return EventRecorder(monkeypatch)


def today(near: NearTerm) -> date:
    return timezone.now().astimezone(near.branch.zone).date()


def local_at(near: NearTerm, day: date, hhmm: str) -> datetime:
    return datetime.combine(day, time.fromisoformat(hhmm), tzinfo=near.branch.zone)


def written(near: NearTerm, start: datetime, minutes: int = 15) -> Appointment:
    """A booked appointment written directly (booking refuses cells that have started or lie far off)."""
    return AppointmentFactory(
        branch=near.branch,
        doctor=near.doctor,
        patient=near.patient,
        slot_start=start,
        slot_end=start + timedelta(minutes=minutes),
    )


def deadline(appointment: dict[str, Any]) -> str:
    return (datetime.fromisoformat(appointment["slot_start"]) - timedelta(minutes=120)).isoformat()


def day_bounds(near: NearTerm, day: date) -> dict[str, str]:
    return {
        "allowed_from": local_at(near, day, "00:00").isoformat(),
        "allowed_until": local_at(near, day + timedelta(days=1), "00:00").isoformat(),
    }


# --- Reschedule inside the window ------------------------------------------------------------------------


@pytest.mark.parametrize("minutes_ahead", [5, 105], ids=["5-min-ahead", "just-inside"])
def test_rescheduling_inside_the_window_is_409_cancellation_window_and_changes_nothing(
    client, near, published, minutes_ahead
):
    appointment = book_near(client, near, minutes_ahead)
    before = snapshot()
    published.clear()

    response = patch_reschedule(client, near.writer, appointment["appointment_id"], reschedule_body(*near.cell(240)))

    problem = assert_problem(response, 409, "cancellation_window", cancellable_until=deadline(appointment))
    assert problem["detail"] == RESCHEDULE_WINDOW_DETAIL
    assert snapshot() == before
    assert published.calls == []
    assert get_appointment(client, near.writer, appointment["appointment_id"]).json() == appointment


def test_rescheduling_just_outside_the_window_succeeds(client, near, published):
    """The cell starts 126-131 minutes from now: its deadline is still 6-11 minutes away."""
    appointment = book_near(client, near, 126)
    target = near.cell(240)
    published.clear()

    response = patch_reschedule(client, near.writer, appointment["appointment_id"], reschedule_body(*target))

    assert response.status_code == 200, response.content
    assert (response.json()["slot_start"], response.json()["version"]) == (target[0].isoformat(), 2)
    assert published.types == ["appointment.rescheduled"]


def test_a_late_cancellation_cannot_be_laundered_through_a_move_to_another_day(client, near, published):
    """Inside the window: the move to tomorrow (where cancelling would be allowed) is refused at once, and
    the cancel after it is refused too; the appointment is untouched."""
    appointment = book_near(client, near, 60)
    tomorrow = today(near) + timedelta(days=1)
    before = snapshot()
    published.clear()

    moved = patch_reschedule(
        client,
        near.writer,
        appointment["appointment_id"],
        reschedule_body(local_at(near, tomorrow, "10:00"), local_at(near, tomorrow, "10:05")),
    )
    cancelled = delete_appointment(client, near.writer, appointment["appointment_id"], reason="Not coming")

    moved_problem = assert_problem(moved, 409, "cancellation_window", cancellable_until=deadline(appointment))
    assert moved_problem["detail"] == RESCHEDULE_WINDOW_DETAIL
    cancel_problem = assert_problem(cancelled, 409, "cancellation_window", cancellable_until=deadline(appointment))
    assert cancel_problem["detail"] == CANCEL_WINDOW_DETAIL
    assert snapshot() == before
    assert published.calls == []
    assert get_appointment(client, near.writer, appointment["appointment_id"]).json() == appointment


# --- Check-in only on the local day -------------------------------------------------------------------------


@pytest.mark.parametrize("days", [1, -1], ids=["the-day-before", "the-day-after"])
def test_check_in_on_another_day_is_409_outside_allowed_time_and_changes_nothing(client, near, published, days):
    day = today(near) + timedelta(days=days)
    appointment = written(near, local_at(near, day, "10:00"))
    before = snapshot()
    body_before = get_appointment(client, near.writer, str(appointment.id)).json()

    response = post_action(client, near.writer, str(appointment.id), "check-in")

    problem = assert_problem(response, 409, "outside_allowed_time", **day_bounds(near, day))
    assert problem["title"] == "Not allowed at this time"
    assert problem["detail"] == f"An appointment can be checked in only on its day, {day}, at its branch."
    assert problem["allowed_from"].endswith(body_before["slot_start"][-6:])  # the branch's offset
    assert snapshot() == before
    assert published.calls == []
    assert get_appointment(client, near.writer, str(appointment.id)).json() == body_before


def test_an_appointment_in_the_year_9999_can_be_neither_checked_in_nor_completed(client, near, published):
    appointment = written(near, local_at(near, date(9999, 12, 31), "10:00"))
    before = snapshot()

    checked_in = post_action(client, near.writer, str(appointment.id), "check-in")
    completed = post_action(client, near.writer, str(appointment.id), "complete")

    assert_problem(
        checked_in,
        409,
        "outside_allowed_time",
        allowed_from=local_at(near, date(9999, 12, 31), "00:00").isoformat(),
        allowed_until=datetime.combine(date(9999, 12, 31), time.max, tzinfo=near.branch.zone).isoformat(),
    )
    assert_invalid_state(completed, "booked", "complete", "checked_in")
    assert snapshot() == before  # no visit dated today
    assert published.calls == []


def test_check_in_early_on_the_day_succeeds(client, near, published):
    appointment = book_near(client, near, 180)
    published.clear()

    response = post_action(client, near.writer, appointment["appointment_id"], "check-in")

    assert response.status_code == 200, response.content
    assert (response.json()["status"], response.json()["version"]) == ("checked_in", 2)
    assert published.types == ["appointment.checked_in"]


def test_check_in_after_the_start_on_the_same_day_succeeds(client, near):
    start = max(timezone.now() - timedelta(minutes=20), local_at(near, today(near), "00:00"))
    appointment = written(near, start)

    response = post_action(client, near.writer, str(appointment.id), "check-in")

    assert response.status_code == 200, response.content
    assert response.json()["status"] == "checked_in"


# --- No-show only after the start ---------------------------------------------------------------------------


@pytest.mark.parametrize("minutes_ahead", [5, 240])
def test_no_show_before_the_start_is_409_and_the_slot_stays_taken(client, near, published, minutes_ahead):
    appointment = book_near(client, near, minutes_ahead)
    day = datetime.fromisoformat(appointment["slot_start"]).date()
    before = snapshot()
    published.clear()

    response = post_action(client, near.writer, appointment["appointment_id"], "no-show")

    problem = assert_problem(response, 409, "outside_allowed_time", allowed_from=appointment["slot_start"])
    assert problem["detail"] == NO_SHOW_DETAIL
    assert snapshot() == before
    assert published.calls == []
    assert get_appointment(client, near.writer, appointment["appointment_id"]).json() == appointment
    cells = get_slots(client, near.writer, near.doctor, day)
    assert (appointment["slot_start"], appointment["slot_end"]) not in cells


def test_no_show_after_the_start_frees_the_rest_of_the_slot(client, near, published):
    """A 30-minute appointment that started a minute ago: its later 5-minute cells are free after the no-show."""
    appointment = written(near, timezone.now() - timedelta(minutes=1), minutes=30)
    freed = near.cell(10)
    assert (freed[0].isoformat(), freed[1].isoformat()) not in get_slots(client, near.writer, near.doctor, today(near))

    response = post_action(client, near.writer, str(appointment.id), "no-show")

    assert response.status_code == 200, response.content
    assert (response.json()["status"], response.json()["version"]) == ("no_show", 2)
    assert published.types == ["appointment.no_show"]
    assert (freed[0].isoformat(), freed[1].isoformat()) in get_slots(client, near.writer, near.doctor, today(near))


def test_the_admin_obeys_the_no_show_rule(admin_client, near):
    appointment = written(near, timezone.now() + timedelta(minutes=30))
    before = snapshot()

    response = admin_client.post(
        "/admin/appointments/appointment/",
        {"action": "mark_no_show", "_selected_action": [str(appointment.pk)]},
        follow=True,
    )

    assert response.status_code == 200
    assert NO_SHOW_DETAIL.encode() in response.content
    assert snapshot() == before
