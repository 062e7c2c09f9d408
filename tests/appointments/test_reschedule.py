"""PATCH /api/v1/appointments/{id}/reschedule: a booked appointment moves to another free cell of the same
doctor and branch (the booking rule, its own time not counting as taken); the token number is kept within
the local day and taken afresh on another day; history, version, event, validation and Idempotency-Key."""

from __future__ import annotations

from datetime import datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from django.utils import timezone

from appointments.models import Appointment, AppointmentChange, DoctorLeave
from tests.appointments.lifecycle_helpers import (
    DAY,
    NEXT_DAY,
    Clinic,
    EventRecorder,
    assert_slot_unavailable,
    book,
    book_rao,
    counters,
    delete_appointment,
    get_appointment,
    get_slots,
    iso,
    local,
    make_clinic,
    patch_reschedule,
    reschedule_body,
    session,
    snapshot,
)
from tests.factories import BranchFactory, DoctorFactory
from tests.helpers import IST, assert_field_errors, assert_problem, at
from tests.patients.factories import PatientFactory

pytestmark = pytest.mark.django_db

PATIENT_OVERLAP = "The patient already has an appointment at that time."


@pytest.fixture
def clinic(token_for) -> Clinic:
    return make_clinic(token_for)


@pytest.fixture
def published(monkeypatch) -> EventRecorder:
    return EventRecorder(monkeypatch)


def move(client: Any, clinic: Clinic, appointment: dict[str, Any], start: str, end: str, day=DAY, **extra) -> Any:
    body = reschedule_body(at(day, start), at(day, end), **extra)
    return patch_reschedule(client, clinic.writer, appointment["appointment_id"], body)


# --- Within the same day -------------------------------------------------------------------------------


def test_rescheduling_within_the_day_moves_the_appointment_and_keeps_its_token(client, clinic, published):
    book_rao(client, clinic, "09:00", "09:15", patient=clinic.other_patient)
    appointment = book_rao(client, clinic, "09:15", "09:30")
    published.clear()

    response = move(client, clinic, appointment, "11:00", "11:15", reason="Patient asked for a later time")

    assert response.status_code == 200, response.content
    assert response["Content-Type"] == "application/json"
    row = Appointment.objects.get(id=appointment["appointment_id"])
    expected = {
        **appointment,
        "slot_start": iso(DAY, "11:00"),
        "slot_end": iso(DAY, "11:15"),
        "token_number": 2,
        "version": 2,
        "updated_at": local(row.updated_at),
    }
    assert response.json() == expected
    assert get_appointment(client, clinic.writer, appointment["appointment_id"]).json() == expected
    assert (row.slot_start, row.slot_end, row.local_date, row.token_number, row.status, row.version) == (
        at(DAY, "11:00"),
        at(DAY, "11:15"),
        DAY,
        2,
        "booked",
        2,
    )
    assert counters() == {(clinic.doctor.id, DAY): 2}
    change = AppointmentChange.objects.get(appointment_id=row.id, kind="rescheduled")
    assert (
        change.version,
        change.at,
        change.reason,
        change.previous_slot_start,
        change.previous_slot_end,
        change.previous_token_number,
    ) == (2, row.updated_at, "Patient asked for a later time", at(DAY, "09:15"), at(DAY, "09:30"), 2)
    assert published.calls == [("appointment.rescheduled", {"appointment": expected, "previous": appointment})]


def test_the_old_cell_is_free_and_the_new_one_taken_after_a_reschedule(client, clinic):
    appointment = book_rao(client, clinic, "09:15", "09:30")

    move(client, clinic, appointment, "11:00", "11:15")

    cells = get_slots(client, clinic.writer, clinic.doctor, DAY)
    assert (iso(DAY, "09:15"), iso(DAY, "09:30")) in cells
    assert (iso(DAY, "11:00"), iso(DAY, "11:15")) not in cells
    assert len(cells) == 16 - 1
    again = book_rao(client, clinic, "09:15", "09:30", patient=clinic.other_patient)
    assert again["token_number"] == 2


@pytest.mark.parametrize(
    ("current", "target"),
    [
        (("09:00", "09:30"), ("09:15", "09:30")),
        (("09:00", "09:15"), ("09:00", "09:30")),
        (("09:15", "09:30"), ("09:00", "09:30")),
        (("09:00", "10:00"), ("09:30", "10:00")),
    ],
    ids=[
        "30-min-to-its-second-half",
        "15-min-grown-to-30",
        "15-min-to-the-30-min-cell-around-it",
        "60-min-to-its-second-half",
    ],
)
def test_the_appointments_own_time_does_not_block_an_overlapping_target(client, clinic, current, target):
    appointment = book_rao(client, clinic, *current)

    response = move(client, clinic, appointment, *target)

    assert response.status_code == 200, response.content
    assert (response.json()["slot_start"], response.json()["slot_end"]) == (iso(DAY, target[0]), iso(DAY, target[1]))
    assert (response.json()["token_number"], response.json()["version"]) == (1, 2)
    assert Appointment.objects.get().slot_start == at(DAY, target[0])


def test_a_reschedule_may_change_the_length_to_any_cell_the_grid_offers(client, clinic):
    """GET slots with duration=30 lists 10:00-10:30, so a 15-minute appointment may move there."""
    appointment = book_rao(client, clinic, "09:00", "09:15")
    assert (iso(DAY, "10:00"), iso(DAY, "10:30")) in get_slots(client, clinic.writer, clinic.doctor, DAY, duration=30)

    response = move(client, clinic, appointment, "10:00", "10:30")

    assert response.status_code == 200, response.content
    assert (response.json()["slot_start"], response.json()["slot_end"]) == (iso(DAY, "10:00"), iso(DAY, "10:30"))


def test_an_instant_given_in_another_offset_is_the_same_instant(client, clinic):
    appointment = book_rao(client, clinic, "09:00", "09:15")
    utc = ZoneInfo("UTC")
    body = reschedule_body(at(DAY, "05:30", utc), at(DAY, "05:45", utc))  # 11:00-11:15 in Bengaluru

    response = patch_reschedule(client, clinic.writer, appointment["appointment_id"], body)

    assert response.status_code == 200, response.content
    assert (response.json()["slot_start"], response.json()["slot_end"]) == (iso(DAY, "11:00"), iso(DAY, "11:15"))


def test_two_reschedules_keep_the_token_and_count_the_versions(client, clinic):
    appointment = book_rao(client, clinic, "09:00", "09:15")

    first = move(client, clinic, appointment, "10:00", "10:15")
    second = move(client, clinic, appointment, "09:00", "09:15")

    assert (first.status_code, second.status_code) == (200, 200)
    assert [(r.json()["version"], r.json()["token_number"]) for r in (first, second)] == [(2, 1), (3, 1)]
    assert list(
        AppointmentChange.objects.filter(kind="rescheduled")
        .order_by("version")
        .values_list("version", "previous_slot_start", "previous_token_number")
    ) == [(2, at(DAY, "09:00"), 1), (3, at(DAY, "10:00"), 1)]
    assert counters() == {(clinic.doctor.id, DAY): 1}


# --- To another day --------------------------------------------------------------------------------------


def test_rescheduling_to_another_day_takes_that_days_next_token(client, clinic, published):
    book_rao(client, clinic, "09:00", "09:15", day=NEXT_DAY, patient=clinic.other_patient)  # NEXT_DAY token 1
    book_rao(client, clinic, "09:00", "09:15", patient=clinic.other_patient)  # DAY token 1
    appointment = book_rao(client, clinic, "09:30", "09:45")  # DAY token 2
    published.clear()

    response = move(client, clinic, appointment, "10:00", "10:15", day=NEXT_DAY, reason="Travelling on Monday")

    assert response.status_code == 200, response.content
    row = Appointment.objects.get(id=appointment["appointment_id"])
    expected = {
        **appointment,
        "slot_start": iso(NEXT_DAY, "10:00"),
        "slot_end": iso(NEXT_DAY, "10:15"),
        "token_number": 2,
        "version": 2,
        "updated_at": local(row.updated_at),
    }
    assert response.json() == expected
    assert (row.local_date, row.token_number) == (NEXT_DAY, 2)
    assert counters() == {(clinic.doctor.id, DAY): 2, (clinic.doctor.id, NEXT_DAY): 2}
    change = AppointmentChange.objects.get(appointment_id=row.id, kind="rescheduled")
    assert (change.previous_slot_start, change.previous_slot_end, change.previous_token_number, change.reason) == (
        at(DAY, "09:30"),
        at(DAY, "09:45"),
        2,
        "Travelling on Monday",
    )
    assert published.calls == [("appointment.rescheduled", {"appointment": expected, "previous": appointment})]


def test_the_old_days_number_is_not_reused_after_a_move_to_another_day(client, clinic):
    appointment = book_rao(client, clinic, "09:00", "09:15")  # DAY token 1
    assert move(client, clinic, appointment, "09:00", "09:15", day=NEXT_DAY).json()["token_number"] == 1

    later = book_rao(client, clinic, "09:00", "09:15", patient=clinic.other_patient)

    assert later["token_number"] == 2
    assert counters() == {(clinic.doctor.id, DAY): 2, (clinic.doctor.id, NEXT_DAY): 1}
    assert sorted(Appointment.objects.values_list("local_date", "token_number")) == [(DAY, 2), (NEXT_DAY, 1)]


def test_moving_back_to_the_first_day_takes_a_new_number_there(client, clinic):
    appointment = book_rao(client, clinic, "09:00", "09:15")  # DAY token 1

    there = move(client, clinic, appointment, "09:00", "09:15", day=NEXT_DAY).json()
    back = move(client, clinic, appointment, "09:00", "09:15").json()

    assert (there["token_number"], back["token_number"]) == (1, 2)
    assert counters() == {(clinic.doctor.id, DAY): 2, (clinic.doctor.id, NEXT_DAY): 1}


def test_the_token_day_of_a_reschedule_is_the_branch_local_day(client, token_for):
    """New York's Monday 21:00 is already Tuesday in UTC (and in India): the token is Monday's."""
    new_york = ZoneInfo("America/New_York")
    nyc = BranchFactory(code="NYC", name="New York", time_zone="America/New_York")
    doctor = DoctorFactory(branches=[nyc])
    session(doctor, nyc, 0, "20:00", "22:00")  # Monday evenings
    session(doctor, nyc, 1, "09:00", "10:00")  # Tuesday mornings
    token = token_for(["appointments:read", "appointments:write"], branches=[nyc])
    patient = PatientFactory(registration_branch=nyc)
    appointment = book(client, token, patient, doctor, at(NEXT_DAY, "09:00", new_york), at(NEXT_DAY, "09:15", new_york))

    response = patch_reschedule(
        client,
        token,
        appointment["appointment_id"],
        reschedule_body(at(DAY, "21:00", new_york), at(DAY, "21:15", new_york)),
    )

    assert response.status_code == 200, response.content
    assert response.json()["slot_start"] == at(DAY, "21:00", new_york).isoformat()
    assert Appointment.objects.get().local_date == DAY
    assert counters() == {(doctor.id, NEXT_DAY): 1, (doctor.id, DAY): 1}


# --- 409 slot_unavailable --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("target", "why"),
    [
        (("09:30", "09:45"), "another appointment's cell"),
        (("09:30", "10:00"), "a 30-minute cell overlapping another appointment"),
        (("09:07", "09:22"), "off the grid"),
        (("13:00", "13:15"), "after the session"),
        (("08:45", "09:00"), "before the session"),
        (("10:00", "10:07"), "a length GET slots never offers"),
        (("10:15", "10:00"), "ending before it starts"),
    ],
    ids=["taken", "overlapping", "off-grid", "after-session", "before-session", "odd-length", "inverted"],
)
def test_a_target_that_is_not_a_free_cell_is_409_and_changes_nothing(client, clinic, published, target, why):
    book_rao(client, clinic, "09:30", "09:45", patient=clinic.other_patient)
    appointment = book_rao(client, clinic, "09:00", "09:15")
    before = snapshot()
    published.clear()

    response = move(client, clinic, appointment, *target)

    assert_slot_unavailable(response)
    assert snapshot() == before
    assert published.calls == []


def test_a_target_on_a_day_without_a_session_is_409_and_takes_no_token_there(client, clinic):
    appointment = book_rao(client, clinic, "09:00", "09:15")
    wednesday = DAY + timedelta(days=2)
    before = snapshot()

    response = move(client, clinic, appointment, "09:00", "09:15", day=wednesday)

    assert_slot_unavailable(response)
    assert snapshot() == before
    assert counters() == {(clinic.doctor.id, DAY): 1}


def test_a_target_on_the_doctors_leave_is_409(client, clinic):
    appointment = book_rao(client, clinic, "09:00", "09:15")
    DoctorLeave.objects.create(doctor=clinic.doctor, start_date=NEXT_DAY, end_date=NEXT_DAY, reason="Conference")
    before = snapshot()

    response = move(client, clinic, appointment, "09:00", "09:15", day=NEXT_DAY)

    assert_slot_unavailable(response)
    assert snapshot() == before


def test_a_target_cell_that_has_already_started_is_409(client, clinic):
    """Dr. Shah consults all day every day: today's cell around the current time is on the grid but has
    started, so it cannot be the target (next week's cell can)."""
    now = timezone.now().astimezone(IST)
    doctor = DoctorFactory(name="Dr. Shah", branches=[clinic.branch])
    session(doctor, clinic.branch, now.weekday(), "00:00", "23:59")
    start = now.replace(minute=now.minute - now.minute % 15, second=0, microsecond=0)
    if start + timedelta(minutes=15) > datetime.combine(now.date(), time(23, 59), tzinfo=IST):
        start -= timedelta(minutes=15)
    next_week = now.date() + timedelta(days=7)
    appointment = book(client, clinic.writer, clinic.patient, doctor, at(next_week, "09:00"), at(next_week, "09:15"))
    before = snapshot()

    response = patch_reschedule(
        client, clinic.writer, appointment["appointment_id"], reschedule_body(start, start + timedelta(minutes=15))
    )

    assert start <= now
    assert_slot_unavailable(response)
    assert snapshot() == before


def test_a_cell_of_the_doctor_at_another_branch_is_409(client, clinic, token_for):
    """Rescheduling keeps the branch: a free cell of the same doctor elsewhere is not a target."""
    mumbai = BranchFactory(code="MUM", name="Mumbai", state="Maharashtra")
    clinic.doctor.branches.add(mumbai)
    session(clinic.doctor, mumbai, 2, "09:00", "13:00")  # Wednesdays in Mumbai
    token = token_for(["appointments:read", "appointments:write"])
    appointment = book(
        client,
        token,
        clinic.patient,
        clinic.doctor,
        at(DAY, "09:00"),
        at(DAY, "09:15"),
        branch_id=str(clinic.branch.id),
    )
    wednesday = DAY + timedelta(days=2)
    assert get_slots(client, token, clinic.doctor, wednesday, branch_id=str(mumbai.id))[0] == (
        iso(wednesday, "09:00"),
        iso(wednesday, "09:15"),
    )
    before = snapshot()

    response = patch_reschedule(
        client, token, appointment["appointment_id"], reschedule_body(at(wednesday, "09:00"), at(wednesday, "09:15"))
    )

    assert_slot_unavailable(response)
    assert snapshot() == before


def test_a_target_overlapping_another_appointment_of_the_same_patient_is_409(client, clinic, published):
    """Dr. Iyer's 10:00 is free for Dr. Rao's grid check, but Priya is with Dr. Iyer then."""
    book(client, clinic.writer, clinic.patient, clinic.other_doctor, at(DAY, "10:00"), at(DAY, "10:30"))
    appointment = book_rao(client, clinic, "09:00", "09:15")
    before = snapshot()
    published.clear()

    response = move(client, clinic, appointment, "10:15", "10:30")

    assert_slot_unavailable(response, PATIENT_OVERLAP)
    assert snapshot() == before
    assert published.calls == []


def test_a_refused_move_to_another_day_rolls_back_that_days_token(client, clinic):
    """The new day's number is taken before the row is written; the patient-overlap refusal must give it
    back, so the next booking that day gets it."""
    monday_patient_elsewhere = book(
        client, clinic.writer, clinic.patient, clinic.other_doctor, at(DAY, "11:00"), at(DAY, "11:15")
    )
    appointment = book_rao(client, clinic, "09:00", "09:15", day=NEXT_DAY)
    before = snapshot()

    response = patch_reschedule(
        client, clinic.writer, appointment["appointment_id"], reschedule_body(at(DAY, "11:00"), at(DAY, "11:15"))
    )

    assert_slot_unavailable(response, PATIENT_OVERLAP)
    assert snapshot() == before
    assert counters() == {(clinic.other_doctor.id, DAY): 1, (clinic.doctor.id, NEXT_DAY): 1}
    assert monday_patient_elsewhere["token_number"] == 1
    assert book_rao(client, clinic, "11:00", "11:15", patient=clinic.other_patient)["token_number"] == 1


def test_a_patient_may_move_right_next_to_their_other_appointment(client, clinic):
    book(client, clinic.writer, clinic.patient, clinic.other_doctor, at(DAY, "10:00"), at(DAY, "10:30"))
    appointment = book_rao(client, clinic, "09:00", "09:15")

    response = move(client, clinic, appointment, "10:30", "10:45")

    assert response.status_code == 200, response.content


def test_a_cancelled_appointments_cell_is_a_valid_target(client, clinic):
    cancelled = book_rao(client, clinic, "10:00", "10:15", patient=clinic.other_patient)
    assert delete_appointment(client, clinic.writer, cancelled["appointment_id"], reason="Unwell").status_code == 200
    appointment = book_rao(client, clinic, "09:00", "09:15")

    response = move(client, clinic, appointment, "10:00", "10:15")

    assert response.status_code == 200, response.content
    assert sorted(Appointment.objects.values_list("status", "token_number", "slot_start")) == [
        ("booked", 2, at(DAY, "10:00")),
        ("cancelled", 1, at(DAY, "10:00")),
    ]


# --- 400 ----------------------------------------------------------------------------------------------


def test_rescheduling_to_the_exact_current_time_is_400_on_new_slot_start(client, clinic, published):
    appointment = book_rao(client, clinic, "09:00", "09:15")
    before = snapshot()
    published.clear()

    response = move(client, clinic, appointment, "09:00", "09:15")

    assert_field_errors(
        response,
        [{"field": "new_slot_start", "code": "invalid", "message": "The appointment is already at that time."}],
    )
    assert snapshot() == before
    assert published.calls == []


def test_the_current_time_written_in_another_offset_is_still_the_same_time(client, clinic):
    appointment = book_rao(client, clinic, "09:00", "09:15")
    utc = ZoneInfo("UTC")
    before = snapshot()

    response = patch_reschedule(
        client,
        clinic.writer,
        appointment["appointment_id"],
        reschedule_body(at(DAY, "03:30", utc), at(DAY, "03:45", utc)),
    )

    assert_problem(response, 400, "validation_error")
    assert [e["field"] for e in response.json()["errors"]] == ["new_slot_start"]
    assert snapshot() == before


def test_naive_datetimes_are_400_on_both_fields(client, clinic):
    appointment = book_rao(client, clinic, "09:00", "09:15")
    before = snapshot()
    body = {"new_slot_start": f"{DAY}T11:00:00", "new_slot_end": f"{DAY}T11:15:00"}

    response = patch_reschedule(client, clinic.writer, appointment["appointment_id"], body)

    message = "Include the UTC offset, e.g. 2026-11-23T09:00:00+05:30."
    assert_field_errors(
        response,
        [
            {"field": "new_slot_start", "code": "naive", "message": message},
            {"field": "new_slot_end", "code": "naive", "message": message},
        ],
    )
    assert snapshot() == before


def test_a_body_missing_the_times_names_both_fields(client, clinic):
    appointment = book_rao(client, clinic, "09:00", "09:15")
    before = snapshot()

    response = patch_reschedule(client, clinic.writer, appointment["appointment_id"], {"reason": "Later"})

    assert_field_errors(
        response,
        [
            {"field": "new_slot_start", "code": "required", "message": "This field is required."},
            {"field": "new_slot_end", "code": "required", "message": "This field is required."},
        ],
    )
    assert snapshot() == before


def test_an_unknown_field_is_400_and_named_with_the_other_bad_fields(client, clinic):
    appointment = book_rao(client, clinic, "09:00", "09:15")
    before = snapshot()
    body = {"new_slot_start": "tomorrow", "new_slot_end": iso(DAY, "11:15"), "slot_start": iso(DAY, "11:00")}

    response = patch_reschedule(client, clinic.writer, appointment["appointment_id"], body)

    problem = assert_problem(response, 400, "validation_error")
    assert [(e["field"], e["code"]) for e in problem["errors"]] == [
        ("new_slot_start", "invalid"),
        ("slot_start", "unknown_field"),
    ]
    assert snapshot() == before


def test_a_reason_over_500_characters_is_400(client, clinic):
    appointment = book_rao(client, clinic, "09:00", "09:15")
    before = snapshot()

    response = move(client, clinic, appointment, "11:00", "11:15", reason="x" * 501)

    problem = assert_problem(response, 400, "validation_error")
    assert [(e["field"], e["code"]) for e in problem["errors"]] == [("reason", "max_length")]
    assert snapshot() == before


def test_a_reschedule_without_a_reason_records_an_empty_one(client, clinic):
    appointment = book_rao(client, clinic, "09:00", "09:15")

    response = move(client, clinic, appointment, "11:00", "11:15")

    assert response.status_code == 200, response.content
    assert AppointmentChange.objects.get(kind="rescheduled").reason == ""


# --- Idempotency-Key ---------------------------------------------------------------------------------------


def test_a_replayed_reschedule_returns_the_same_body_and_changes_once(client, clinic, published):
    appointment = book_rao(client, clinic, "09:00", "09:15")
    body = reschedule_body(at(DAY, "11:00"), at(DAY, "11:15"), reason="Later")
    published.clear()

    first = patch_reschedule(client, clinic.writer, appointment["appointment_id"], body, key="move-priya-1")
    second = patch_reschedule(client, clinic.writer, appointment["appointment_id"], body, key="move-priya-1")

    assert (first.status_code, second.status_code) == (200, 200)
    assert not first.has_header("Idempotent-Replayed")
    assert second["Idempotent-Replayed"] == "true"
    assert second.json() == first.json()
    assert first.json()["version"] == 2
    assert Appointment.objects.get().version == 2
    assert AppointmentChange.objects.filter(kind="rescheduled").count() == 1
    assert published.types == ["appointment.rescheduled"]


def test_the_same_key_with_another_target_is_422_and_changes_nothing(client, clinic):
    appointment = book_rao(client, clinic, "09:00", "09:15")
    first = patch_reschedule(
        client,
        clinic.writer,
        appointment["appointment_id"],
        reschedule_body(at(DAY, "11:00"), at(DAY, "11:15")),
        key="k",
    )
    assert first.status_code == 200, first.content
    before = snapshot()

    response = patch_reschedule(
        client,
        clinic.writer,
        appointment["appointment_id"],
        reschedule_body(at(DAY, "12:00"), at(DAY, "12:15")),
        key="k",
    )

    assert_problem(response, 422, "idempotency_key_reused")
    assert snapshot() == before


def test_without_a_key_a_repeated_reschedule_to_the_new_time_is_400(client, clinic):
    """Only the key makes a retry safe: without it the second identical request asks for the time the
    appointment already has."""
    appointment = book_rao(client, clinic, "09:00", "09:15")
    body = reschedule_body(at(DAY, "11:00"), at(DAY, "11:15"))

    first = patch_reschedule(client, clinic.writer, appointment["appointment_id"], body)
    second = patch_reschedule(client, clinic.writer, appointment["appointment_id"], body)

    assert first.status_code == 200
    assert_problem(second, 400, "validation_error")
    assert Appointment.objects.get().version == 2


def test_an_appointment_that_has_already_started_cannot_be_rescheduled(client, token_for):
    from tests.appointments.factories import AppointmentFactory
    from tests.appointments.lifecycle_helpers import make_near_term

    near = make_near_term(token_for)
    start = timezone.now() - timedelta(minutes=10)
    appointment = AppointmentFactory(
        branch=near.branch,
        doctor=near.doctor,
        patient=near.patient,
        slot_start=start,
        slot_end=start + timedelta(minutes=5),
    )
    target_start, target_end = near.cell(60)
    before = snapshot()

    response = patch_reschedule(client, near.writer, str(appointment.id), reschedule_body(target_start, target_end))

    problem = assert_problem(response, 409, "invalid_state", current_status="booked")
    assert problem["detail"] == "The appointment has already started; check the patient in or mark a no-show instead."
    assert snapshot() == before
    assert Appointment.objects.get(pk=appointment.pk).version == 1
