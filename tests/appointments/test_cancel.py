"""DELETE /api/v1/appointments/{id}?reason=…: a required reason, booked appointments only, the branch's
cancellation window (and after the start) refused with cancellable_until, the freed cell and the kept
token number, and the staff path that ignores the window."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest
from django.utils import timezone

from appointments import services
from appointments.models import Appointment, AppointmentChange
from clinic.errors import FieldError
from tests.appointments.factories import AppointmentFactory
from tests.appointments.lifecycle_helpers import (
    DAY,
    Clinic,
    EventRecorder,
    NearTerm,
    assert_invalid_state,
    book,
    book_near,
    book_rao,
    counters,
    delete_appointment,
    get_appointment,
    get_slots,
    history,
    iso,
    local,
    make_clinic,
    make_near_term,
    snapshot,
)
from tests.helpers import assert_field_errors, assert_problem, at

pytestmark = pytest.mark.django_db

WINDOW_DETAIL = (
    "Appointments at this branch can be cancelled through the API only until 120 minutes before they start; "
    "ask the clinic's staff."
)


@pytest.fixture
def clinic(token_for) -> Clinic:
    return make_clinic(token_for)


@pytest.fixture
def near(token_for) -> NearTerm:
    return make_near_term(token_for)


@pytest.fixture
def published(monkeypatch) -> EventRecorder:
    return EventRecorder(monkeypatch)


def cancellable_until(body: dict[str, Any], window_minutes: int = 120) -> str:
    """slot_start minus the window, in the branch's offset (as slot_start is written)."""
    start = datetime.fromisoformat(body["slot_start"])
    return (start - timedelta(minutes=window_minutes)).isoformat()


# --- Cancelling ----------------------------------------------------------------------------------------


def test_cancelling_a_booked_appointment_returns_it_cancelled_with_the_reason(client, clinic, published):
    appointment = book_rao(client, clinic, "09:15", "09:30")
    published.clear()
    started = timezone.now()

    response = delete_appointment(client, clinic.writer, appointment["appointment_id"], reason="Travelling")

    assert response.status_code == 200, response.content
    assert response["Content-Type"] == "application/json"
    row = Appointment.objects.get(id=appointment["appointment_id"])
    assert started <= row.cancelled_at <= row.updated_at <= timezone.now()
    expected = {
        **appointment,
        "status": "cancelled",
        "cancelled_at": local(row.cancelled_at),
        "cancellation_reason": "Travelling",
        "version": 2,
        "updated_at": local(row.updated_at),
    }
    assert response.json() == expected
    assert get_appointment(client, clinic.writer, appointment["appointment_id"]).json() == expected
    assert (row.status, row.cancellation_reason, row.token_number, row.version) == ("cancelled", "Travelling", 1, 2)
    assert history(appointment["appointment_id"]) == [(1, "booked"), (2, "cancelled")]
    assert AppointmentChange.objects.get(appointment_id=row.id, version=2).reason == "Travelling"
    assert published.calls == [("appointment.cancelled", {"appointment": expected})]


def test_a_cancelled_cell_is_free_again_and_the_next_booking_takes_the_next_token(client, clinic):
    book_rao(client, clinic, "09:00", "09:15", patient=clinic.other_patient)  # token 1
    appointment = book_rao(client, clinic, "09:15", "09:30")  # token 2
    assert (iso(DAY, "09:15"), iso(DAY, "09:30")) not in get_slots(client, clinic.writer, clinic.doctor, DAY)

    delete_appointment(client, clinic.writer, appointment["appointment_id"], reason="Travelling")

    assert get_slots(client, clinic.writer, clinic.doctor, DAY)[0] == (iso(DAY, "09:15"), iso(DAY, "09:30"))
    rebooked = book_rao(client, clinic, "09:15", "09:30")
    assert rebooked["token_number"] == 3
    assert sorted(Appointment.objects.values_list("status", "token_number", "slot_start")) == [
        ("booked", 1, at(DAY, "09:00")),
        ("booked", 3, at(DAY, "09:15")),
        ("cancelled", 2, at(DAY, "09:15")),
    ]
    assert counters() == {(clinic.doctor.id, DAY): 3}


def test_the_reason_is_stored_without_surrounding_spaces(client, clinic):
    appointment = book_rao(client, clinic, "09:00", "09:15")

    response = delete_appointment(client, clinic.writer, appointment["appointment_id"], reason="  Feeling better  ")

    assert response.status_code == 200, response.content
    assert response.json()["cancellation_reason"] == "Feeling better"
    assert Appointment.objects.get().cancellation_reason == "Feeling better"


# --- Idempotency-Key ------------------------------------------------------------------------------------


def cancel_with_key(client: Any, clinic: Clinic, appointment_id: str, key: str, reason: str) -> Any:
    return client.delete(
        f"/api/v1/appointments/{appointment_id}?reason={reason}",
        HTTP_AUTHORIZATION=f"Bearer {clinic.writer}",
        HTTP_IDEMPOTENCY_KEY=key,
    )


def test_a_retried_cancel_with_its_key_replays_the_200_and_cancels_once(client, clinic, published):
    appointment = book_rao(client, clinic, "09:00", "09:15")
    published.clear()

    first = cancel_with_key(client, clinic, appointment["appointment_id"], "cancel-rao-1", "Travelling")
    after_first = snapshot()
    retry = cancel_with_key(client, clinic, appointment["appointment_id"], "cancel-rao-1", "Travelling")

    assert first.status_code == 200, first.content
    assert not first.has_header("Idempotent-Replayed")
    assert (retry.status_code, retry.content, retry["Idempotent-Replayed"]) == (200, first.content, "true")
    assert snapshot() == after_first
    assert history(appointment["appointment_id"]) == [(1, "booked"), (2, "cancelled")]
    assert published.types == ["appointment.cancelled"]


def test_the_same_key_with_another_reason_is_422_and_changes_nothing(client, clinic, published):
    appointment = book_rao(client, clinic, "09:00", "09:15")
    cancel_with_key(client, clinic, appointment["appointment_id"], "cancel-rao-2", "Travelling")
    before = snapshot()
    published.clear()

    response = cancel_with_key(client, clinic, appointment["appointment_id"], "cancel-rao-2", "Unwell")

    assert_problem(response, 422, "idempotency_key_reused")
    assert snapshot() == before
    assert Appointment.objects.get().cancellation_reason == "Travelling"
    assert published.calls == []


# --- 400: the reason -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "code", "message"),
    [
        ({}, "required", "This field is required."),
        # An empty query value is refused before the body of rules (docs/api-rules.md §5.5), with its message.
        ({"reason": ""}, "blank", "Must not be empty."),
        ({"reason": "   "}, "blank", "Must not be empty."),
        ({"reason": "x" * 501}, "max_length", "Ensure this field has no more than 500 characters."),
    ],
    ids=["missing", "empty", "blank", "too-long"],
)
def test_a_cancel_without_a_usable_reason_is_400_on_reason_and_changes_nothing(
    client, clinic, published, query, code, message
):
    appointment = book_rao(client, clinic, "09:00", "09:15")
    before = snapshot()
    published.clear()

    response = delete_appointment(client, clinic.writer, appointment["appointment_id"], **query)

    assert_field_errors(response, [{"field": "reason", "code": code, "message": message}])
    assert snapshot() == before
    assert published.calls == []


def test_the_service_refuses_a_blank_reason_too(clinic, client):
    appointment = Appointment.objects.get(id=book_rao(client, clinic, "09:00", "09:15")["appointment_id"])
    before = snapshot()

    with pytest.raises(FieldError) as refused:
        services.appointment_cancel(appointment=appointment, reason=" \t ", enforce_window=False)

    assert refused.value.errors == {"reason": "A reason is required to cancel an appointment."}
    assert snapshot() == before


# --- 409 invalid_state --------------------------------------------------------------------------------


def test_cancelling_twice_is_409_invalid_state_and_keeps_the_first_reason(client, clinic, published):
    appointment = book_rao(client, clinic, "09:00", "09:15")
    delete_appointment(client, clinic.writer, appointment["appointment_id"], reason="Travelling")
    before = snapshot()
    published.clear()

    response = delete_appointment(client, clinic.writer, appointment["appointment_id"], reason="Changed my mind")

    assert_invalid_state(response, "cancelled", "cancel")
    assert snapshot() == before
    assert Appointment.objects.get().cancellation_reason == "Travelling"
    assert published.calls == []


def test_a_checked_in_appointment_inside_the_window_is_invalid_state_not_window(client, near):
    """The state is checked first: once the patient is there, the answer is that it is no longer booked."""
    appointment = book_near(client, near, 30)
    services.appointment_check_in(appointment=Appointment.objects.get(id=appointment["appointment_id"]))
    before = snapshot()

    response = delete_appointment(client, near.writer, appointment["appointment_id"], reason="Left")

    assert_invalid_state(response, "checked_in", "cancel")
    assert snapshot() == before


# --- 409 cancellation_window ---------------------------------------------------------------------------


@pytest.mark.parametrize("minutes_ahead", [5, 60, 105], ids=["5-min-ahead", "1-hour-ahead", "just-inside"])
def test_cancelling_inside_the_window_is_409_with_cancellable_until_and_changes_nothing(
    client, near, published, minutes_ahead
):
    appointment = book_near(client, near, minutes_ahead)
    before = snapshot()
    published.clear()

    response = delete_appointment(client, near.writer, appointment["appointment_id"], reason="Stuck in traffic")

    problem = assert_problem(response, 409, "cancellation_window", cancellable_until=cancellable_until(appointment))
    assert problem["detail"] == WINDOW_DETAIL
    assert problem["cancellable_until"][-6:] == appointment["slot_start"][-6:]  # the branch's offset
    assert snapshot() == before
    assert published.calls == []
    assert get_appointment(client, near.writer, appointment["appointment_id"]).json() == appointment


def test_cancelling_just_outside_the_window_succeeds(client, near, published):
    """The cell starts 126-131 minutes from now: its deadline is still 6-11 minutes away."""
    appointment = book_near(client, near, 126)
    published.clear()

    response = delete_appointment(client, near.writer, appointment["appointment_id"], reason="Feeling better")

    assert response.status_code == 200, response.content
    row = Appointment.objects.get(id=appointment["appointment_id"])
    assert response.json() == {
        **appointment,
        "status": "cancelled",
        "cancelled_at": row.cancelled_at.astimezone(near.branch.zone).isoformat(),
        "cancellation_reason": "Feeling better",
        "version": 2,
        "updated_at": row.updated_at.astimezone(near.branch.zone).isoformat(),
    }
    assert published.types == ["appointment.cancelled"]
    day = datetime.fromisoformat(appointment["slot_start"]).date()
    assert (appointment["slot_start"], appointment["slot_end"]) in get_slots(client, near.writer, near.doctor, day)
    start, end = datetime.fromisoformat(appointment["slot_start"]), datetime.fromisoformat(appointment["slot_end"])
    assert book(client, near.writer, near.patient, near.doctor, start, end)["token_number"] == 2


@pytest.mark.parametrize("minutes_ago", [1, 10, 90])
def test_cancelling_after_the_start_is_409_cancellation_window(client, near, minutes_ago):
    started = timezone.now() - timedelta(minutes=minutes_ago)
    appointment = AppointmentFactory(
        branch=near.branch,
        doctor=near.doctor,
        patient=near.patient,
        slot_start=started,
        slot_end=started + timedelta(minutes=15),
    )
    before = snapshot()

    response = delete_appointment(client, near.writer, str(appointment.id), reason="Too late")

    assert_problem(
        response,
        409,
        "cancellation_window",
        cancellable_until=(started - timedelta(minutes=120)).astimezone(near.branch.zone).isoformat(),
    )
    assert snapshot() == before


def test_a_branch_without_a_window_allows_cancelling_until_the_start_but_not_after(client, token_for):
    near = make_near_term(token_for, window_minutes=0)
    soon = book_near(client, near, 5)
    started_at = timezone.now() - timedelta(minutes=2)
    started = AppointmentFactory(
        branch=near.branch, doctor=near.doctor, slot_start=started_at, slot_end=started_at + timedelta(minutes=5)
    )
    before = Appointment.objects.get(id=started.id).version

    ok = delete_appointment(client, near.writer, soon["appointment_id"], reason="Running late")
    late = delete_appointment(client, near.writer, str(started.id), reason="Running late")

    assert ok.status_code == 200, ok.content
    assert ok.json()["status"] == "cancelled"
    problem = assert_problem(
        late, 409, "cancellation_window", cancellable_until=started_at.astimezone(near.branch.zone).isoformat()
    )
    assert "only until 0 minutes before" in problem["detail"]
    assert Appointment.objects.get(id=started.id).status == "booked"
    assert Appointment.objects.get(id=started.id).version == before


def test_the_window_is_the_branchs_setting(client, token_for):
    """An hour ahead is inside a 120-minute window (above) but outside a 30-minute one."""
    relaxed = make_near_term(token_for, window_minutes=30)
    appointment = book_near(client, relaxed, 60)

    response = delete_appointment(client, relaxed.writer, appointment["appointment_id"], reason="Travelling")

    assert response.status_code == 200, response.content
    assert response.json()["status"] == "cancelled"


# --- The staff path -------------------------------------------------------------------------------------


def test_staff_can_cancel_inside_the_window_with_enforce_window_false(client, near, published):
    appointment = book_near(client, near, 30)
    row = Appointment.objects.get(id=appointment["appointment_id"])
    published.clear()

    cancelled = services.appointment_cancel(
        appointment=row, reason="Doctor called away", actor="staff:reception", enforce_window=False
    )

    assert (cancelled.status, cancelled.cancellation_reason, cancelled.version) == (
        "cancelled",
        "Doctor called away",
        2,
    )
    assert Appointment.objects.get(id=row.id).status == "cancelled"
    change = AppointmentChange.objects.get(appointment_id=row.id, version=2)
    assert (change.kind, change.actor, change.reason) == ("cancelled", "staff:reception", "Doctor called away")
    assert published.types == ["appointment.cancelled"]


def test_staff_can_cancel_an_appointment_that_has_started(near):
    started_at = timezone.now() - timedelta(minutes=10)
    appointment = AppointmentFactory(
        branch=near.branch, doctor=near.doctor, slot_start=started_at, slot_end=started_at + timedelta(minutes=15)
    )

    cancelled = services.appointment_cancel(appointment=appointment, reason="Patient left", enforce_window=False)

    assert (cancelled.status, cancelled.version) == ("cancelled", 2)


def test_the_service_enforces_the_window_by_default(client, near):
    appointment = Appointment.objects.get(id=book_near(client, near, 30)["appointment_id"])
    before = snapshot()

    with pytest.raises(services.CancellationWindow):
        services.appointment_cancel(appointment=appointment, reason="Travelling")

    assert snapshot() == before


def test_the_cancellation_deadline_is_the_window_before_the_start(clinic, client):
    appointment = Appointment.objects.get(id=book_rao(client, clinic, "09:00", "09:15")["appointment_id"])

    assert services.cancellation_deadline(appointment) == at(DAY, "07:00")


def test_an_unknown_appointment_is_404_even_without_a_reason(client, clinic):
    response = delete_appointment(client, clinic.writer, "00000000-0000-4000-8000-000000000000")

    assert_problem(response, 404, "not_found")
