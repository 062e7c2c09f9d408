"""Booking under concurrency, through the API with real threads on real PostgreSQL: one cell is booked once,
and token numbers stay gap-free when some booking transactions roll back."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from functools import partial
from typing import Any

import pytest
from django.test import Client

from appointments import events
from appointments.models import Appointment, TokenCounter, WeeklySession
from tests.appointments.lifecycle_helpers import DAY, NEXT_DAY, booking, post_booking, session
from tests.factories import BranchFactory, DoctorFactory
from tests.helpers import at, send_all_at_once
from tests.patients.factories import PatientFactory

ROLLBACK_MARKER = "[force-rollback]"


def post_all_at_once(token: str, bodies: list[dict[str, Any]]) -> list[tuple[int, dict[str, Any]]]:
    """POST every body from its own thread and Client, released together; (status, json) per body, in order."""
    return send_all_at_once([partial(post_booking, token=token, body=body) for body in bodies])


@pytest.fixture
def branch():
    return BranchFactory(code="BLR", name="Bengaluru", time_zone="Asia/Kolkata")


@pytest.fixture
def doctor(branch):
    doctor = DoctorFactory(name="Dr. Ananya Rao", branches=[branch])
    session(doctor, branch, WeeklySession.Weekday.MONDAY, "09:00", "13:00")
    session(doctor, branch, WeeklySession.Weekday.MONDAY, "14:00", "15:00")
    session(doctor, branch, WeeklySession.Weekday.TUESDAY, "09:00", "13:00")
    return doctor


@pytest.fixture
def writer(branch, token_for):
    """One busy client: its rate limit must not be what refuses the burst."""
    return token_for(["appointments:write"], branches=[branch], rate_limit_per_minute=100_000)


@pytest.mark.django_db(transaction=True)
def test_thirty_concurrent_bookings_of_one_cell_yield_one_201_and_twenty_nine_409(branch, doctor, writer):
    patients = [PatientFactory(registration_branch=branch) for _ in range(30)]
    bodies = [booking(p, doctor, at(DAY, "09:15"), at(DAY, "09:30")) for p in patients]

    results = post_all_at_once(writer, bodies)

    statuses = [status for status, _ in results]
    assert sorted(statuses) == [201] + [409] * 29
    winner = statuses.index(201)
    for status, problem in results:
        if status == 409:
            assert problem["code"] == "slot_unavailable"
            assert problem["detail"] in {
                "That interval is not a free slot of this doctor at this branch.",
                "That slot was just booked by another request.",
            }
    appointment = Appointment.objects.get()
    assert (appointment.patient_id, appointment.status, appointment.token_number) == (
        patients[winner].id,
        "booked",
        1,
    )
    assert results[winner][1]["appointment_id"] == str(appointment.id)
    assert list(TokenCounter.objects.values_list("doctor_id", "local_date", "last_number")) == [(doctor.id, DAY, 1)]


@pytest.mark.django_db(transaction=True)
def test_fifty_concurrent_bookings_with_some_rolled_back_get_gap_free_tokens_in_commit_order(
    branch, doctor, writer, monkeypatch
):
    """Every fifth booking fails after its row was inserted (the event publication raises): its 500 leaves
    no row, and the committed bookings are numbered 1..k with no gap and in commit order."""
    publish: Callable[..., None] = events.publish

    def failing_publish(event_type: str, appointment: Appointment, *args: Any, **kwargs: Any) -> None:
        if ROLLBACK_MARKER in appointment.notes:
            raise RuntimeError("forced rollback after the insert")
        publish(event_type, appointment, *args, **kwargs)

    monkeypatch.setattr(events, "publish", failing_publish)
    # The first 50 five-minute cells: 48 in the 09:00-13:00 session, then 14:00 and 14:05.
    starts = [at(DAY, "09:00") + timedelta(minutes=5 * i) for i in range(48)] + [at(DAY, "14:00"), at(DAY, "14:05")]
    patients = [PatientFactory(registration_branch=branch) for _ in range(50)]
    doomed = {i for i in range(50) if i % 5 == 0}
    bodies = [
        booking(p, doctor, start, start + timedelta(minutes=5), notes=f"#{i} {ROLLBACK_MARKER if i in doomed else ''}")
        for i, (p, start) in enumerate(zip(patients, starts, strict=True))
    ]

    results = post_all_at_once(writer, bodies)

    assert [status for status, _ in results] == [500 if i in doomed else 201 for i in range(50)]
    for i in doomed:
        assert set(results[i][1]) == {"type", "title", "status", "code", "request_id"}
        assert results[i][1]["code"] == "internal_error"
    booked = len(results) - len(doomed)
    assert booked == 40
    rows = list(Appointment.objects.order_by("token_number"))
    assert [row.token_number for row in rows] == list(range(1, booked + 1))
    assert {row.patient_id for row in rows} == {patients[i].id for i in range(50) if i not in doomed}
    assert {row.slot_start for row in rows} == {starts[i] for i in range(50) if i not in doomed}
    assert {results[i][1]["token_number"] for i in range(50) if i not in doomed} == set(range(1, booked + 1))
    # The counter row is locked from the token's issue until commit, so numbering follows commit order.
    assert [row.created_at for row in rows] == sorted(row.created_at for row in rows)
    assert list(TokenCounter.objects.values_list("doctor_id", "local_date", "last_number")) == [
        (doctor.id, DAY, booked)
    ]

    http = Client()
    patient = patients[0]
    other_doctor = DoctorFactory(branches=[branch])
    session(other_doctor, branch, WeeklySession.Weekday.MONDAY, "09:00", "13:00")
    other_doctors_first = post_booking(http, writer, booking(patient, other_doctor, at(DAY, "09:00"), at(DAY, "09:05")))
    next_days_first = post_booking(http, writer, booking(patient, doctor, at(NEXT_DAY, "09:00"), at(NEXT_DAY, "09:05")))

    assert other_doctors_first.status_code == 201, other_doctors_first.content
    assert other_doctors_first.json()["token_number"] == 1
    assert next_days_first.status_code == 201, next_days_first.content
    assert next_days_first.json()["token_number"] == 1
    assert sorted(TokenCounter.objects.values_list("doctor_id", "local_date", "last_number")) == sorted(
        [(doctor.id, DAY, booked), (other_doctor.id, DAY, 1), (doctor.id, NEXT_DAY, 1)]
    )
