"""POST /api/v1/appointments and GET /api/v1/appointments/{id}: the booking rule (one of the doctor's free
cells), token numbers per doctor and local day, validation, scope and Idempotency-Key."""

from __future__ import annotations

import uuid
from datetime import datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from django.test import Client
from django.utils import timezone

from appointments.models import Appointment, BranchHoliday, DoctorLeave, TokenCounter, WeeklySession
from appointments.slots import Cell, grid
from tests.appointments.lifecycle_helpers import (
    APPOINTMENTS,
    DAY,
    NEXT_DAY,
    assert_slot_unavailable,
    booking,
    counters,
    post_booking,
    session,
)
from tests.factories import BranchFactory, DepartmentFactory, DoctorFactory
from tests.helpers import IST, assert_field_errors, assert_problem, at, bearer, next_monday
from tests.patients.factories import PatientFactory

pytestmark = pytest.mark.django_db


def book(client: Client, token: str, body: dict[str, Any]) -> dict[str, Any]:
    response = post_booking(client, token, body)
    assert response.status_code == 201, response.content
    return response.json()


def db_state() -> tuple[list[Any], list[Any]]:
    """Every appointment and token counter: what a refused request must leave exactly as it was."""
    appointments = sorted(
        Appointment.objects.values_list("id", "patient_id", "doctor_id", "slot_start", "status", "token_number")
    )
    counters = sorted(TokenCounter.objects.values_list("doctor_id", "local_date", "last_number"))
    return appointments, counters


@pytest.fixture
def branch():
    return BranchFactory(code="BLR", name="Bengaluru", time_zone="Asia/Kolkata")


@pytest.fixture
def doctor(branch):
    """Dr. Rao consults at BLR on Mondays and Tuesdays, 09:00-13:00, in 15-minute slots."""
    doctor = DoctorFactory(
        name="Dr. Ananya Rao", department=DepartmentFactory(name="General Medicine"), branches=[branch]
    )
    session(doctor, branch, WeeklySession.Weekday.MONDAY)
    session(doctor, branch, WeeklySession.Weekday.TUESDAY)
    return doctor


@pytest.fixture
def other_doctor(branch):
    doctor = DoctorFactory(name="Dr. Vikram Iyer", department=DepartmentFactory(name="Cardiology"), branches=[branch])
    session(doctor, branch, WeeklySession.Weekday.MONDAY)
    return doctor


@pytest.fixture
def patient(branch):
    return PatientFactory(first_name="Priya", last_name="Sharma", registration_branch=branch)


@pytest.fixture
def other_patient(branch):
    return PatientFactory(first_name="Rahul", last_name="Verma", registration_branch=branch)


@pytest.fixture
def writer(branch, token_for):
    return token_for(["appointments:write", "appointments:read"], branches=[branch])


# --- Booking a free cell ------------------------------------------------------------------------------


def test_booking_a_free_cell_returns_201_with_the_appointment_and_stores_it(client, branch, doctor, patient, writer):
    response = post_booking(
        client, writer, booking(patient, doctor, at(DAY, "09:15"), at(DAY, "09:30"), notes="Fever for three days")
    )

    assert response.status_code == 201, response.content
    assert response["Content-Type"] == "application/json"
    appointment = Appointment.objects.get()
    assert response["Location"] == f"/api/v1/appointments/{appointment.id}"
    assert response.json() == {
        "id": str(appointment.id),
        "appointment_id": str(appointment.id),
        "token_number": 1,
        "status": "booked",
        "patient_id": patient.patient_id,
        "patient": {"id": str(patient.id), "name": "Priya Sharma"},
        "doctor": {"id": str(doctor.id), "name": "Dr. Ananya Rao", "department": "General Medicine"},
        "branch_id": str(branch.id),
        "slot_start": f"{DAY.isoformat()}T09:15:00+05:30",
        "slot_end": f"{DAY.isoformat()}T09:30:00+05:30",
        "visit_type": "consultation",
        "notes": "Fever for three days",
        "created_at": appointment.created_at.astimezone(IST).isoformat(),
        "updated_at": appointment.updated_at.astimezone(IST).isoformat(),
        "checked_in_at": None,
        "completed_at": None,
        "cancelled_at": None,
        "cancellation_reason": None,
        "version": 1,
    }
    assert response.json()["created_at"].endswith("+05:30")
    assert (
        appointment.patient_id,
        appointment.doctor_id,
        appointment.branch_id,
        appointment.slot_start,
        appointment.slot_end,
        appointment.local_date,
        appointment.token_number,
        appointment.status,
        appointment.visit_type,
        appointment.notes,
        appointment.checked_in_at,
        appointment.completed_at,
        appointment.cancelled_at,
        appointment.cancellation_reason,
        appointment.version,
    ) == (
        patient.id,
        doctor.id,
        branch.id,
        at(DAY, "09:15"),
        at(DAY, "09:30"),
        DAY,
        1,
        "booked",
        "consultation",
        "Fever for three days",
        None,
        None,
        None,
        "",
        1,
    )
    assert counters() == {(doctor.id, DAY): 1}


@pytest.mark.parametrize(
    "reference",
    [lambda p: str(p.id), lambda p: p.patient_id, lambda p: p.patient_id.lower().replace("-", "")],
    ids=["uuid", "patient_id", "patient_id-lowercase-without-hyphen"],
)
def test_the_patient_can_be_referenced_by_uuid_or_business_id(client, doctor, patient, writer, reference):
    response = post_booking(
        client,
        writer,
        booking(reference(patient), doctor, at(DAY, "10:00"), at(DAY, "10:15"), visit_type="follow_up"),
    )

    assert response.status_code == 201, response.content
    assert (response.json()["patient_id"], response.json()["patient"]["id"]) == (patient.patient_id, str(patient.id))
    assert response.json()["visit_type"] == "follow_up"
    assert list(Appointment.objects.values_list("patient_id", "visit_type")) == [(patient.id, "follow_up")]


def test_get_returns_the_same_body_as_the_booking(client, doctor, patient, writer):
    booked = book(client, writer, booking(patient, doctor, at(DAY, "09:00"), at(DAY, "09:15"), notes="Cough"))

    response = client.get(f"{APPOINTMENTS}/{booked['appointment_id']}", **bearer(writer))

    assert response.status_code == 200, response.content
    assert response.json() == booked


def test_a_booking_given_in_utc_books_that_instant_and_answers_in_branch_time(client, doctor, patient, writer):
    """09:30 IST is 04:00 UTC: the offset sent does not matter, the instant does."""
    utc = ZoneInfo("UTC")
    body = booking(patient, doctor, at(DAY, "04:00", utc), at(DAY, "04:15", utc))

    response = post_booking(client, writer, body)

    assert response.status_code == 201, response.content
    assert (response.json()["slot_start"], response.json()["slot_end"]) == (
        f"{DAY.isoformat()}T09:30:00+05:30",
        f"{DAY.isoformat()}T09:45:00+05:30",
    )
    assert Appointment.objects.get().slot_start == at(DAY, "09:30")


def test_token_numbers_count_per_doctor_per_local_day(client, doctor, other_doctor, patient, other_patient, writer):
    first = book(client, writer, booking(patient, doctor, at(DAY, "11:00"), at(DAY, "11:15")))
    # Booked later for an earlier cell: tokens follow booking order, not slot order.
    second = book(client, writer, booking(other_patient, doctor, at(DAY, "09:00"), at(DAY, "09:15")))
    other_doctors_first = book(client, writer, booking(patient, other_doctor, at(DAY, "12:00"), at(DAY, "12:15")))
    next_days_first = book(client, writer, booking(patient, doctor, at(NEXT_DAY, "09:00"), at(NEXT_DAY, "09:15")))

    assert [first["token_number"], second["token_number"]] == [1, 2]
    assert other_doctors_first["token_number"] == 1
    assert next_days_first["token_number"] == 1
    assert sorted(Appointment.objects.values_list("doctor_id", "local_date", "token_number")) == sorted(
        [(doctor.id, DAY, 1), (doctor.id, DAY, 2), (other_doctor.id, DAY, 1), (doctor.id, NEXT_DAY, 1)]
    )
    assert counters() == {(doctor.id, DAY): 2, (other_doctor.id, DAY): 1, (doctor.id, NEXT_DAY): 1}


def test_the_token_day_is_the_branch_local_day(client, token_for, patient):
    """A New York branch's Monday 09:00 is Monday 19:30 in India: numbered on the branch's Monday."""
    new_york = ZoneInfo("America/New_York")
    nyc = BranchFactory(code="NYC", name="New York", time_zone="America/New_York")
    doctor = DoctorFactory(branches=[nyc])
    session(doctor, nyc, WeeklySession.Weekday.MONDAY, "09:00", "10:00")
    visitor = PatientFactory(registration_branch=nyc)
    token = token_for(["appointments:write"])

    response = post_booking(
        client, token, booking(visitor, doctor, at(DAY, "09:00", new_york), at(DAY, "09:15", new_york))
    )

    assert response.status_code == 201, response.content
    assert response.json()["slot_start"] == at(DAY, "09:00", new_york).isoformat()
    assert response.json()["slot_start"].endswith(("-04:00", "-05:00"))
    assert Appointment.objects.get().local_date == DAY
    assert counters() == {(doctor.id, DAY): 1}


# --- 409 slot_unavailable -------------------------------------------------------------------------------


def test_booking_a_taken_cell_is_409_and_changes_nothing(client, doctor, patient, other_patient, writer):
    book(client, writer, booking(patient, doctor, at(DAY, "09:15"), at(DAY, "09:30")))
    before = db_state()

    response = post_booking(client, writer, booking(other_patient, doctor, at(DAY, "09:15"), at(DAY, "09:30")))

    assert_slot_unavailable(response)
    assert db_state() == before
    assert counters() == {(doctor.id, DAY): 1}


def test_an_interval_off_the_grid_is_409(client, doctor, patient, writer):
    before = db_state()

    response = post_booking(client, writer, booking(patient, doctor, at(DAY, "09:07"), at(DAY, "09:22")))

    assert_slot_unavailable(response)
    assert db_state() == before == ([], [])


@pytest.mark.parametrize(
    ("start", "end"),
    [("09:00", "09:30"), ("09:10", "09:20"), ("09:00", "10:00")],
    ids=["30-minute-cell", "10-minute-cell", "60-minute-cell"],
)
def test_a_cell_of_another_duration_overlapping_a_booked_cell_is_409(
    client, doctor, patient, other_patient, writer, start, end
):
    book(client, writer, booking(patient, doctor, at(DAY, "09:15"), at(DAY, "09:30")))
    before = db_state()

    response = post_booking(client, writer, booking(other_patient, doctor, at(DAY, start), at(DAY, end)))

    assert_slot_unavailable(response)
    assert db_state() == before


def test_a_cell_of_another_duration_next_to_a_booked_cell_is_free(client, doctor, patient, other_patient, writer):
    book(client, writer, booking(patient, doctor, at(DAY, "09:15"), at(DAY, "09:30")))

    response = post_booking(client, writer, booking(other_patient, doctor, at(DAY, "09:30"), at(DAY, "10:00")))

    assert response.status_code == 201, response.content
    assert response.json()["token_number"] == 2


@pytest.mark.parametrize(
    ("start", "end"),
    [("09:00:00", "09:00:01"), ("09:00", "09:02"), ("09:00:00", "09:00:00.000001"), ("09:00:00", "09:04:30")],
    ids=["one-second", "two-minutes", "one-microsecond", "four-and-a-half-minutes"],
)
def test_an_interval_that_is_no_slot_length_is_409(client, doctor, patient, writer, start, end):
    """GET slots offers whole-minute cells of 5..240 minutes only, so nothing else can be booked (and a
    microsecond-long interval must not make the server enumerate billions of grid cells)."""
    response = post_booking(client, writer, booking(patient, doctor, at(DAY, start), at(DAY, end)))

    assert_slot_unavailable(response)
    assert db_state() == ([], [])


@pytest.mark.parametrize(
    ("start", "end"), [("09:00", "09:05"), ("09:00", "13:00")], ids=["five-minutes", "whole-session-240-minutes"]
)
def test_the_shortest_and_longest_cells_can_be_booked(client, doctor, patient, writer, start, end):
    response = post_booking(client, writer, booking(patient, doctor, at(DAY, start), at(DAY, end)))

    assert response.status_code == 201, response.content
    assert (response.json()["slot_start"], response.json()["slot_end"]) == (
        at(DAY, start).isoformat(),
        at(DAY, end).isoformat(),
    )


@pytest.mark.parametrize(
    "closure",
    [
        lambda doctor, branch: DoctorLeave.objects.create(doctor=doctor, start_date=DAY, end_date=DAY),
        lambda doctor, branch: DoctorLeave.objects.create(
            doctor=doctor, start_date=DAY - timedelta(days=3), end_date=DAY + timedelta(days=3), reason="Conference"
        ),
        lambda doctor, branch: BranchHoliday.objects.create(branch=branch, date=DAY, name="Founders' Day"),
    ],
    ids=["leave-that-day", "leave-spanning-the-day", "branch-holiday"],
)
def test_a_leave_day_or_branch_holiday_is_409(client, branch, doctor, patient, writer, closure):
    closure(doctor, branch)

    response = post_booking(client, writer, booking(patient, doctor, at(DAY, "09:00"), at(DAY, "09:15")))

    assert_slot_unavailable(response)
    assert db_state() == ([], [])


def test_leave_and_holidays_of_other_days_or_branches_do_not_block(client, branch, doctor, patient, writer):
    DoctorLeave.objects.create(doctor=doctor, start_date=DAY - timedelta(days=3), end_date=DAY - timedelta(days=1))
    BranchHoliday.objects.create(branch=branch, date=NEXT_DAY, name="Founders' Day")
    BranchHoliday.objects.create(branch=BranchFactory(code="MUM"), date=DAY, name="Local holiday")

    response = post_booking(client, writer, booking(patient, doctor, at(DAY, "09:00"), at(DAY, "09:15")))

    assert response.status_code == 201, response.content


def test_a_cell_that_has_already_started_is_409(client, branch, patient, writer):
    """Today's cell containing the current time (or the one before it) is on the grid but has started."""
    now = timezone.now().astimezone(IST)
    doctor = DoctorFactory(branches=[branch])
    session(doctor, branch, now.weekday(), "00:00", "23:59")
    start = now.replace(minute=now.minute - now.minute % 15, second=0, microsecond=0)
    if start + timedelta(minutes=15) > datetime.combine(now.date(), time(23, 59), tzinfo=IST):
        start -= timedelta(minutes=15)
    end = start + timedelta(minutes=15)
    assert start <= now
    assert Cell(start, end) in grid(doctor=doctor, branch=branch, day=now.date(), duration=timedelta(minutes=15))

    response = post_booking(client, writer, booking(patient, doctor, start, end))

    assert_slot_unavailable(response)
    assert db_state() == ([], [])


def test_a_patient_booked_with_another_doctor_at_an_overlapping_time_is_409(
    client, doctor, other_doctor, patient, writer
):
    """Other doctor's cell is free, so the application's check passes: the exclusion constraint refuses."""
    book(client, writer, booking(patient, doctor, at(DAY, "09:00"), at(DAY, "09:30")))
    before = db_state()

    response = post_booking(client, writer, booking(patient, other_doctor, at(DAY, "09:15"), at(DAY, "09:30")))

    assert_slot_unavailable(response, "The patient already has an appointment at that time.")
    assert db_state() == before
    assert counters() == {(doctor.id, DAY): 1}  # the other doctor's counter increment was rolled back


def test_a_patient_may_book_another_doctor_right_after_an_appointment(client, doctor, other_doctor, patient, writer):
    book(client, writer, booking(patient, doctor, at(DAY, "09:00"), at(DAY, "09:30")))

    response = post_booking(client, writer, booking(patient, other_doctor, at(DAY, "09:30"), at(DAY, "09:45")))

    assert response.status_code == 201, response.content
    assert response.json()["token_number"] == 1


def test_a_cancelled_appointments_cell_can_be_booked_again_and_takes_the_next_token(
    client, doctor, patient, other_patient, writer
):
    first = book(client, writer, booking(patient, doctor, at(DAY, "09:00"), at(DAY, "09:15")))
    Appointment.objects.filter(id=first["appointment_id"]).update(
        status=Appointment.Status.CANCELLED, cancelled_at=timezone.now(), cancellation_reason="Travelling", version=2
    )

    response = post_booking(client, writer, booking(other_patient, doctor, at(DAY, "09:00"), at(DAY, "09:15")))

    assert response.status_code == 201, response.content
    assert response.json()["token_number"] == 2
    assert sorted(Appointment.objects.values_list("patient_id", "status", "token_number")) == sorted(
        [(patient.id, "cancelled", 1), (other_patient.id, "booked", 2)]
    )
    assert counters() == {(doctor.id, DAY): 2}


def test_a_patient_whose_appointment_was_cancelled_can_book_that_time_again(client, doctor, patient, writer):
    first = book(client, writer, booking(patient, doctor, at(DAY, "09:00"), at(DAY, "09:15")))
    Appointment.objects.filter(id=first["appointment_id"]).update(status=Appointment.Status.CANCELLED)

    response = post_booking(client, writer, booking(patient, doctor, at(DAY, "09:00"), at(DAY, "09:15")))

    assert response.status_code == 201, response.content
    assert response.json()["token_number"] == 2


# --- 400: invalid input, named by field ------------------------------------------------------------------


def test_a_booking_missing_every_required_field_names_each_one(client, doctor, writer):
    response = post_booking(client, writer, {})

    assert_field_errors(
        response,
        [
            {"field": name, "code": "required", "message": "This field is required."}
            for name in ("patient_id", "doctor_id", "slot_start", "slot_end")
        ],
    )
    assert db_state() == ([], [])


def test_datetimes_without_an_offset_are_400_naive(client, doctor, patient, writer):
    body = booking(patient, doctor, at(DAY, "09:00"), at(DAY, "09:15"))
    body.update(slot_start=f"{DAY.isoformat()}T09:00:00", slot_end=f"{DAY.isoformat()}T09:15:00")

    response = post_booking(client, writer, body)

    message = "Include the UTC offset, e.g. 2026-11-23T09:00:00+05:30."
    assert_field_errors(
        response,
        [
            {"field": "slot_start", "code": "naive", "message": message},
            {"field": "slot_end", "code": "naive", "message": message},
        ],
    )
    assert db_state() == ([], [])


def test_an_impossible_datetime_is_400_on_that_field(client, doctor, patient, writer):
    body = booking(patient, doctor, at(DAY, "09:00"), at(DAY, "09:15"))
    body["slot_start"] = "2031-02-30T09:00:00+05:30"

    response = post_booking(client, writer, body)

    problem = assert_problem(response, 400, "validation_error")
    assert [error["field"] for error in problem["errors"]] == ["slot_start"]
    assert db_state() == ([], [])


def test_an_unknown_visit_type_is_400(client, doctor, patient, writer):
    response = post_booking(
        client, writer, booking(patient, doctor, at(DAY, "09:00"), at(DAY, "09:15"), visit_type="x")
    )

    assert_field_errors(
        response, [{"field": "visit_type", "code": "invalid_choice", "message": '"x" is not a valid choice.'}]
    )
    assert db_state() == ([], [])


@pytest.mark.parametrize("reference", ["PAT-999999", str(uuid.UUID(int=7))], ids=["patient_id", "uuid"])
def test_an_unknown_patient_is_400_on_patient_id_not_404(client, doctor, writer, reference):
    response = post_booking(client, writer, booking(reference, doctor, at(DAY, "09:00"), at(DAY, "09:15")))

    assert_field_errors(
        response, [{"field": "patient_id", "code": "invalid", "message": "No such patient available to this client."}]
    )
    assert db_state() == ([], [])


def test_an_unknown_doctor_is_400_on_doctor_id(client, patient, writer):
    body = booking(patient, DoctorFactory.build(), at(DAY, "09:00"), at(DAY, "09:15"))

    response = post_booking(client, writer, body)

    assert_field_errors(
        response, [{"field": "doctor_id", "code": "invalid", "message": "No such doctor available to this client."}]
    )
    assert db_state() == ([], [])


def test_a_patient_of_a_branch_the_client_may_not_see_is_400_on_patient_id(client, doctor, writer):
    """The writer is limited to BLR: a Mumbai patient is as unknown to it as a missing one."""
    mumbai_patient = PatientFactory(registration_branch=BranchFactory(code="MUM", state="Maharashtra"))

    response = post_booking(client, writer, booking(mumbai_patient, doctor, at(DAY, "09:00"), at(DAY, "09:15")))

    assert_field_errors(
        response, [{"field": "patient_id", "code": "invalid", "message": "No such patient available to this client."}]
    )
    assert db_state() == ([], [])


def test_a_doctor_only_at_a_branch_the_client_may_not_see_is_400_on_doctor_id(client, patient, writer):
    mumbai = BranchFactory(code="MUM", state="Maharashtra")
    mumbai_doctor = DoctorFactory(branches=[mumbai])
    session(mumbai_doctor, mumbai, WeeklySession.Weekday.MONDAY)

    response = post_booking(client, writer, booking(patient, mumbai_doctor, at(DAY, "09:00"), at(DAY, "09:15")))

    assert_field_errors(
        response, [{"field": "doctor_id", "code": "invalid", "message": "No such doctor available to this client."}]
    )
    assert db_state() == ([], [])


def test_a_doctor_at_two_branches_needs_branch_id(client, branch, patient, token_for):
    mumbai = BranchFactory(code="MUM", state="Maharashtra")
    doctor = DoctorFactory(branches=[branch, mumbai])
    session(doctor, branch, WeeklySession.Weekday.MONDAY, "09:00", "11:00")
    session(doctor, mumbai, WeeklySession.Weekday.MONDAY, "14:00", "16:00")
    token = token_for(["appointments:write"])

    response = post_booking(client, token, booking(patient, doctor, at(DAY, "09:00"), at(DAY, "09:15")))

    assert_field_errors(
        response,
        [
            {
                "field": "branch_id",
                "code": "invalid",
                "message": "Required: this doctor consults at more than one branch.",
            }
        ],
    )
    assert db_state() == ([], [])

    named = post_booking(
        client, token, booking(patient, doctor, at(DAY, "14:00"), at(DAY, "14:15"), branch_id=str(mumbai.id))
    )
    assert named.status_code == 201, named.content
    assert named.json()["branch_id"] == str(mumbai.id)
    wrong_branch = post_booking(
        client, token, booking(patient, doctor, at(DAY, "09:00"), at(DAY, "09:15"), branch_id=str(mumbai.id))
    )
    assert_slot_unavailable(wrong_branch)  # Mumbai has no 09:00 session
    assert Appointment.objects.count() == 1


def test_an_unknown_body_field_is_400_unknown_field(client, doctor, patient, writer):
    body = booking(patient, doctor, at(DAY, "09:00"), at(DAY, "09:15"), priority="high")

    response = post_booking(client, writer, body)

    assert_field_errors(response, [{"field": "priority", "code": "unknown_field", "message": "Unknown field."}])
    assert db_state() == ([], [])


# --- Scope and Idempotency-Key -------------------------------------------------------------------------


@pytest.mark.parametrize("scopes", [["appointments:read"], ["patients:write", "patients:read"]])
def test_a_token_without_appointments_write_is_403_and_books_nothing(
    client, branch, doctor, patient, token_for, scopes
):
    token = token_for(scopes, branches=[branch])

    response = post_booking(client, token, booking(patient, doctor, at(DAY, "09:00"), at(DAY, "09:15")))

    problem = assert_problem(response, 403, "insufficient_scope")
    assert problem["detail"] == "This operation requires the scope appointments:write."
    assert response["WWW-Authenticate"] == (
        'Bearer realm="clinic-api", error="insufficient_scope", scope="appointments:write"'
    )
    assert db_state() == ([], [])


def test_a_replayed_booking_returns_the_same_body_and_token_and_books_once(client, doctor, patient, writer):
    body = booking(patient, doctor, at(DAY, "09:00"), at(DAY, "09:15"))

    first = post_booking(client, writer, body, key="book-priya-1")
    second = post_booking(client, writer, body, key="book-priya-1")

    assert (first.status_code, second.status_code) == (201, 201)
    assert not first.has_header("Idempotent-Replayed")
    assert second["Idempotent-Replayed"] == "true"
    assert second.json() == first.json()
    assert second.json()["token_number"] == 1
    assert second["Location"] == first["Location"]
    assert Appointment.objects.count() == 1
    assert counters() == {(doctor.id, DAY): 1}


def test_the_same_key_with_another_booking_is_422_and_books_nothing_more(client, doctor, patient, writer):
    assert (
        post_booking(client, writer, booking(patient, doctor, at(DAY, "09:00"), at(DAY, "09:15")), key="k").status_code
        == 201
    )
    before = db_state()

    response = post_booking(client, writer, booking(patient, doctor, at(DAY, "10:00"), at(DAY, "10:15")), key="k")

    assert_problem(response, 422, "idempotency_key_reused")
    assert db_state() == before


def test_a_refused_booking_is_replayed_as_refused(client, doctor, patient, other_patient, writer):
    """A 409 is stored under its key too: the retry gets the same answer, even once the cell is free."""
    taken = book(client, writer, booking(patient, doctor, at(DAY, "09:00"), at(DAY, "09:15")))
    body = booking(other_patient, doctor, at(DAY, "09:00"), at(DAY, "09:15"))
    first = post_booking(client, writer, body, key="retry-1")
    Appointment.objects.filter(id=taken["appointment_id"]).update(status=Appointment.Status.CANCELLED)

    second = post_booking(client, writer, body, key="retry-1")

    assert_slot_unavailable(first)
    assert second.status_code == 409
    assert second["Idempotent-Replayed"] == "true"
    assert second.json() == first.json()
    assert Appointment.objects.count() == 1
    assert counters() == {(doctor.id, DAY): 1}


def test_a_booking_takes_a_fixed_number_of_queries(client, doctor, patient, writer, django_assert_num_queries):
    """Pinned so the hot path cannot grow silently (bench/scale.py measures it): token with the client's
    branches, patient, doctor with its branches (one statement), the day's sessions and appointments, token
    counter, patient lock, insert, history, webhook subscriptions, event, notification settings, audit: 13. The
    booking's transaction is a savepoint inside the test's (2 more here; BEGIN and COMMIT in production)."""
    monday = next_monday()
    with django_assert_num_queries(15):
        book(client, writer, booking(patient, doctor, at(monday, "09:00"), at(monday, "09:15")))
