"""The appointment state machine of docs/api-rules.md §10 through the API: every (status, action) pair,
check-in, complete (adds the outpatient visit), no-show (frees the slot), the events each change
publishes, and access (scope, token, branch, unknown ids) on every write."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest
from django.utils import timezone

from appointments import services
from appointments.models import Appointment, AppointmentChange
from integrations.models import ApiClient
from patients.models import Visit
from tests.appointments.factories import AppointmentFactory
from tests.appointments.lifecycle_helpers import (
    ACTIONS,
    DAY,
    RESCHEDULE_TARGET,
    STATUSES,
    Clinic,
    EventRecorder,
    assert_invalid_state,
    book,
    get_appointment,
    get_slots,
    history,
    iso,
    local,
    make_clinic,
    make_near_term,
    perform,
    post_action,
    snapshot,
    start_now,
)
from tests.factories import BranchFactory, DoctorFactory
from tests.helpers import assert_field_errors, assert_problem, bearer
from tests.helpers import at as ist_at
from tests.patients.factories import PatientFactory

pytestmark = pytest.mark.django_db

# (status, action) -> the status the action leads to; every other pair is 409 invalid_state.
ALLOWED = {
    ("booked", "reschedule"): "booked",
    ("booked", "cancel"): "cancelled",
    ("booked", "check-in"): "checked_in",
    ("booked", "no-show"): "no_show",
    ("checked_in", "complete"): "completed",
}
# How the refusal names the action, and the status it needed.
REFUSAL_WORDING = {
    "reschedule": ("reschedule", "booked"),
    "cancel": ("cancel", "booked"),
    "check-in": ("check in", "booked"),
    "complete": ("complete", "checked_in"),
    "no-show": ("no show", "booked"),
}


@pytest.fixture
def clinic(token_for) -> Clinic:
    return make_clinic(token_for)


@pytest.fixture
def published(monkeypatch) -> EventRecorder:
    return EventRecorder(monkeypatch)


def appointment_in(client: Any, clinic: Clinic, status: str, started: bool = False) -> dict[str, Any]:
    """Priya's appointment with Dr. Rao on DAY 09:00-09:15, booked through the API and then moved to
    `status` by the services; the current GET body. Checked in, completed and no-show appointments (and
    `started` ones, unless cancelled: cancelling is refused inside the window) are first moved to have
    started a minute ago (start_now): the time rules allow check-in only on the appointment's day and no-show
    only once it has started."""
    booked = book(client, clinic.writer, clinic.patient, clinic.doctor, ist_at(DAY, "09:00"), ist_at(DAY, "09:15"))
    if (started and status != "cancelled") or status in ("checked_in", "completed", "no_show"):
        start_now(booked["appointment_id"])
    appointment = Appointment.objects.get(id=booked["appointment_id"])
    if status in ("checked_in", "completed"):
        appointment = services.appointment_check_in(appointment=appointment)
    if status == "completed":
        services.appointment_complete(appointment=appointment)
    if status == "cancelled":
        services.appointment_cancel(appointment=appointment, reason="Booked twice")
    if status == "no_show":
        services.appointment_no_show(appointment=appointment)
    response = get_appointment(client, clinic.writer, booked["appointment_id"])
    assert response.status_code == 200, response.content
    assert response.json()["status"] == status
    return response.json()


# --- The transition table ------------------------------------------------------------------------------


@pytest.mark.parametrize("action", ACTIONS)
@pytest.mark.parametrize("status", STATUSES)
def test_every_status_and_action_is_allowed_exactly_as_the_contract_says(client, clinic, published, status, action):
    # Check-in and no-show are tried on an appointment that has started (today), the others on one a week
    # ahead (outside the cancellation window): each allowed pair is then allowed by the time rules too.
    before_body = appointment_in(client, clinic, status, started=action in ("check-in", "no-show"))
    appointment_id = before_body["appointment_id"]
    before = snapshot()
    published.clear()
    started = timezone.now()

    response = perform(client, clinic.writer, appointment_id, action)

    finished = timezone.now()
    if (status, action) not in ALLOWED:
        wording, needed = REFUSAL_WORDING[action]
        assert_invalid_state(response, status, wording, needed)
        assert snapshot() == before
        assert published.calls == []
        assert get_appointment(client, clinic.writer, appointment_id).json() == before_body
        return

    assert response.status_code == 200, response.content
    assert response["Content-Type"] == "application/json"
    row = Appointment.objects.get(id=appointment_id)
    assert started <= row.updated_at <= finished
    expected = {
        **before_body,
        "status": ALLOWED[status, action],
        "version": before_body["version"] + 1,
        "updated_at": local(row.updated_at),
    }
    if action == "reschedule":
        expected.update(slot_start=RESCHEDULE_TARGET[0].isoformat(), slot_end=RESCHEDULE_TARGET[1].isoformat())
    elif action == "cancel":
        assert started <= row.cancelled_at <= row.updated_at
        expected.update(cancelled_at=local(row.cancelled_at), cancellation_reason="Travelling")
    elif action == "check-in":
        assert started <= row.checked_in_at <= row.updated_at
        expected.update(checked_in_at=local(row.checked_in_at))
    elif action == "complete":
        assert started <= row.completed_at <= row.updated_at
        expected.update(completed_at=local(row.completed_at))
    assert response.json() == expected
    assert get_appointment(client, clinic.writer, appointment_id).json() == expected
    assert row.version == before_body["version"] + 1
    assert published.types == [
        {
            "reschedule": "appointment.rescheduled",
            "cancel": "appointment.cancelled",
            "check-in": "appointment.checked_in",
            "complete": "appointment.completed",
            "no-show": "appointment.no_show",
        }[action]
    ]


def test_the_transition_table_of_the_services_is_the_contracts():
    assert {action: set(statuses) for action, statuses in services.TRANSITIONS.items()} == {
        "reschedule": {"booked"},
        "cancel": {"booked"},
        "check_in": {"booked"},
        "no_show": {"booked"},
        "complete": {"checked_in"},
    }


# --- Check-in -------------------------------------------------------------------------------------------


def test_check_in_sets_checked_in_at_bumps_the_version_and_records_the_history(client, clinic, published):
    booked = book(client, clinic.writer, clinic.patient, clinic.doctor, ist_at(DAY, "09:30"), ist_at(DAY, "09:45"))
    moved = start_now(booked["appointment_id"])  # check-in only on the appointment's day
    published.clear()

    response = post_action(client, clinic.writer, booked["appointment_id"], "check-in")

    assert response.status_code == 200, response.content
    row = Appointment.objects.get(id=booked["appointment_id"])
    body = response.json()
    assert (body["status"], body["version"], body["token_number"]) == ("checked_in", 2, 1)
    assert body["checked_in_at"] == local(row.checked_in_at)
    assert (body["completed_at"], body["cancelled_at"], body["cancellation_reason"]) == (None, None, None)
    assert (body["slot_start"], body["slot_end"]) == (local(moved.slot_start), local(moved.slot_end))
    assert history(booked["appointment_id"]) == [(1, "booked"), (2, "checked_in")]
    change = AppointmentChange.objects.get(appointment_id=booked["appointment_id"], version=2)
    writer_client = ApiClient.objects.get(branches=clinic.branch)
    assert (change.actor, change.at, change.reason) == (f"api:{writer_client.name}", row.updated_at, "")
    assert published.calls == [("appointment.checked_in", {"appointment": body})]


def test_a_checked_in_appointment_keeps_its_cell_taken(client, token_for):
    # Check-in happens on the appointment's day: a branch whose doctor consults until 18:00 today (local).
    near = make_near_term(token_for)
    start, end = near.cell(180)
    booked = book(client, near.writer, near.patient, near.doctor, start, end)

    response = post_action(client, near.writer, booked["appointment_id"], "check-in")

    assert response.status_code == 200, response.content
    cells = get_slots(client, near.writer, near.doctor, start.date())
    assert ((start - timedelta(minutes=5)).isoformat(), start.isoformat()) in cells
    assert (start.isoformat(), end.isoformat()) not in cells


# --- Complete -------------------------------------------------------------------------------------------


def test_complete_adds_exactly_one_outpatient_visit_linked_to_the_appointment(client, clinic, published):
    booked = book(
        client,
        clinic.writer,
        clinic.patient,
        clinic.doctor,
        ist_at(DAY, "10:00"),
        ist_at(DAY, "10:15"),
        notes="Fever for three days",
    )
    start_now(booked["appointment_id"])  # check-in only on the appointment's day
    checked_in = post_action(client, clinic.writer, booked["appointment_id"], "check-in").json()
    published.clear()
    visits_before = Visit.objects.count()

    response = post_action(client, clinic.writer, booked["appointment_id"], "complete")

    assert response.status_code == 200, response.content
    row = Appointment.objects.select_related("visit").get(id=booked["appointment_id"])
    body = response.json()
    assert (body["status"], body["version"]) == ("completed", 3)
    assert body["checked_in_at"] == checked_in["checked_in_at"]
    assert body["completed_at"] == local(row.completed_at)
    assert Visit.objects.count() == visits_before + 1 == 1
    visit = Visit.objects.get()
    assert row.visit == visit
    assert (
        visit.patient_id,
        visit.type,
        visit.doctor_id,
        visit.department_id,
        visit.branch_id,
        visit.start,
        visit.end,
        visit.reason,
    ) == (
        clinic.patient.id,
        "outpatient",
        clinic.doctor.id,
        clinic.doctor.department_id,
        clinic.branch.id,
        row.checked_in_at,
        row.completed_at,
        "Fever for three days",
    )
    assert history(booked["appointment_id"]) == [(1, "booked"), (2, "checked_in"), (3, "completed")]
    assert published.calls == [("appointment.completed", {"appointment": body})]


def test_the_completed_visit_appears_in_the_patient_profile(client, clinic, token_for):
    booked = book(client, clinic.writer, clinic.patient, clinic.doctor, ist_at(DAY, "10:00"), ist_at(DAY, "10:15"))
    start_now(booked["appointment_id"])  # check-in only on the appointment's day
    post_action(client, clinic.writer, booked["appointment_id"], "check-in")
    completed = post_action(client, clinic.writer, booked["appointment_id"], "complete").json()
    reader = token_for(["patients:read"], branches=[clinic.branch])

    profile = client.get(f"/api/v1/patients/{clinic.patient.patient_id}", **bearer(reader))

    assert profile.status_code == 200, profile.content
    visit = Visit.objects.get()
    assert profile.json()["visit_history"] == [
        {
            "id": str(visit.id),
            "type": "outpatient",
            "start": completed["checked_in_at"],
            "end": completed["completed_at"],
            "doctor": {"id": str(clinic.doctor.id), "name": "Dr. Ananya Rao"},
            "department": "General Medicine",
            "branch_id": str(clinic.branch.id),
            "reason": "Consultation",
        }
    ]
    listed = client.get("/api/v1/patients", {"search": clinic.patient.patient_id}, **bearer(reader))
    assert listed.status_code == 200, listed.content
    assert [p["last_visit_date"] for p in listed.json()] == [completed["checked_in_at"][:10]]


def test_completing_twice_is_409_and_adds_no_second_visit(client, clinic):
    completed = appointment_in(client, clinic, "completed")
    before = snapshot()

    response = post_action(client, clinic.writer, completed["appointment_id"], "complete")

    assert_invalid_state(response, "completed", "complete", "checked_in")
    assert snapshot() == before
    assert Visit.objects.count() == 1


def test_completing_a_booked_appointment_that_was_never_checked_in_is_409_and_adds_no_visit(client, clinic):
    booked = appointment_in(client, clinic, "booked")
    before = snapshot()

    response = post_action(client, clinic.writer, booked["appointment_id"], "complete")

    assert_invalid_state(response, "booked", "complete", "checked_in")
    assert snapshot() == before
    assert Visit.objects.count() == 0


# --- No-show -------------------------------------------------------------------------------------------


def test_no_show_frees_the_cell_keeps_the_token_and_the_next_booking_takes_the_next_number(client, clinic, published):
    first = book(client, clinic.writer, clinic.patient, clinic.doctor, ist_at(DAY, "09:00"), ist_at(DAY, "09:15"))
    assert (iso(DAY, "09:00"), iso(DAY, "09:15")) not in get_slots(client, clinic.writer, clinic.doctor, DAY)
    # No-show only once the appointment has started: it is moved to have started a minute ago (its token
    # and DAY's counter stay as booked).
    moved = start_now(first["appointment_id"])
    published.clear()

    response = post_action(client, clinic.writer, first["appointment_id"], "no-show")

    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["status"], body["version"], body["token_number"]) == ("no_show", 2, 1)
    assert (body["checked_in_at"], body["completed_at"], body["cancelled_at"]) == (None, None, None)
    assert published.calls == [("appointment.no_show", {"appointment": body})]
    assert history(first["appointment_id"]) == [(1, "booked"), (2, "no_show")]
    # The interval is free again: the doctor's exclusion constraint no longer counts the appointment (a cell
    # that has started is not bookable through the API, so the overlapping row is written directly).
    overlapping = AppointmentFactory(
        doctor=clinic.doctor, branch=clinic.branch, slot_start=moved.slot_start, slot_end=moved.slot_end
    )

    again = book(client, clinic.writer, clinic.other_patient, clinic.doctor, ist_at(DAY, "09:00"), ist_at(DAY, "09:15"))

    assert again["token_number"] == 2
    assert sorted(Appointment.objects.exclude(id=overlapping.id).values_list("status", "token_number")) == [
        ("booked", 2),
        ("no_show", 1),
    ]


# --- Bodies --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("action", ["check-in", "complete", "no-show"])
def test_an_unknown_body_field_on_a_status_change_is_400_and_changes_nothing(client, clinic, action):
    appointment = appointment_in(client, clinic, "checked_in" if action == "complete" else "booked", started=True)
    before = snapshot()

    response = post_action(client, clinic.writer, appointment["appointment_id"], action, {"note": "arrived early"})

    assert_field_errors(response, [{"field": "note", "code": "unknown_field", "message": "Unknown field."}])
    assert snapshot() == before


@pytest.mark.parametrize("action", ["check-in", "complete", "no-show"])
def test_an_empty_json_object_is_an_acceptable_empty_body(client, clinic, action):
    appointment = appointment_in(client, clinic, "checked_in" if action == "complete" else "booked", started=True)

    response = post_action(client, clinic.writer, appointment["appointment_id"], action, {})

    assert response.status_code == 200, response.content
    assert response.json()["version"] == appointment["version"] + 1


# --- Access: scope, token, branch, unknown ids ------------------------------------------------------------


def ready_for(client: Any, clinic: Clinic, action: str) -> dict[str, Any]:
    """An appointment from which `action` would succeed (the time rules included): a denial is then about
    access only."""
    started = action in ("check-in", "complete", "no-show")
    return appointment_in(client, clinic, "checked_in" if action == "complete" else "booked", started=started)


@pytest.mark.parametrize("scopes", [["appointments:read"], ["patients:read", "patients:write"]])
@pytest.mark.parametrize("action", ACTIONS)
def test_a_write_with_a_token_lacking_appointments_write_is_403_and_changes_nothing(
    client, clinic, token_for, published, action, scopes
):
    appointment = ready_for(client, clinic, action)
    token = token_for(scopes, branches=[clinic.branch])
    before = snapshot()
    published.clear()

    response = perform(client, token, appointment["appointment_id"], action)

    problem = assert_problem(response, 403, "insufficient_scope")
    assert problem["detail"] == "This operation requires the scope appointments:write."
    assert response["WWW-Authenticate"] == (
        'Bearer realm="clinic-api", error="insufficient_scope", scope="appointments:write"'
    )
    assert snapshot() == before
    assert published.calls == []


@pytest.mark.parametrize("action", ACTIONS)
def test_a_write_without_a_token_is_401_and_changes_nothing(client, clinic, action):
    appointment = ready_for(client, clinic, action)
    before = snapshot()

    response = perform(client, None, appointment["appointment_id"], action)

    assert response.status_code == 401, response.content
    assert response["Content-Type"] == "application/problem+json"
    assert response.json()["code"] == "not_authenticated"
    assert response["WWW-Authenticate"].startswith('Bearer realm="clinic-api"')
    assert snapshot() == before


@pytest.mark.parametrize("action", ACTIONS)
def test_a_write_with_an_invalid_token_is_401_invalid_token_and_changes_nothing(client, clinic, action):
    appointment = ready_for(client, clinic, action)
    before = snapshot()

    response = perform(client, "not-a-real-token", appointment["appointment_id"], action)

    assert_problem(response, 401, "invalid_token")
    assert 'error="invalid_token"' in response["WWW-Authenticate"]
    assert snapshot() == before


@pytest.mark.parametrize("action", ACTIONS)
def test_a_write_on_another_branchs_appointment_is_404_and_changes_nothing(
    client, clinic, token_for, published, action
):
    appointment = ready_for(client, clinic, action)
    mumbai = BranchFactory(code="MUM", name="Mumbai", state="Maharashtra")
    mumbai_writer = token_for(["appointments:read", "appointments:write"], branches=[mumbai])
    before = snapshot()
    published.clear()

    response = perform(client, mumbai_writer, appointment["appointment_id"], action)

    problem = assert_problem(response, 404, "not_found")
    assert problem["detail"] == f"No appointment {appointment['appointment_id']!r}."
    assert snapshot() == before
    assert published.calls == []


def test_another_branchs_appointment_reads_as_404_like_an_unknown_one(client, clinic, token_for):
    appointment = appointment_in(client, clinic, "booked")
    mumbai_reader = token_for(["appointments:read"], branches=[BranchFactory(code="MUM", state="Maharashtra")])
    unknown = "00000000-0000-4000-8000-000000000000"

    hidden = get_appointment(client, mumbai_reader, appointment["appointment_id"])
    missing = get_appointment(client, mumbai_reader, unknown)

    assert assert_problem(hidden, 404, "not_found")["detail"] == f"No appointment {appointment['appointment_id']!r}."
    assert assert_problem(missing, 404, "not_found")["detail"] == f"No appointment {unknown!r}."


@pytest.mark.parametrize("appointment_id", ["00000000-0000-4000-8000-000000000000", "not-a-uuid", "42"])
@pytest.mark.parametrize("action", ACTIONS)
def test_a_write_on_an_unknown_or_malformed_id_is_404(client, clinic, action, appointment_id):
    appointment_in(client, clinic, "booked")
    before = snapshot()

    response = perform(client, clinic.writer, appointment_id, action)

    assert assert_problem(response, 404, "not_found")["detail"] == f"No appointment {appointment_id!r}."
    assert snapshot() == before


@pytest.mark.parametrize("appointment_id", ["00000000-0000-4000-8000-000000000000", "not-a-uuid"])
def test_get_of_an_unknown_or_malformed_id_is_404(client, clinic, appointment_id):
    response = get_appointment(client, clinic.writer, appointment_id)

    assert assert_problem(response, 404, "not_found")["detail"] == f"No appointment {appointment_id!r}."


def test_get_needs_appointments_read(client, clinic, token_for):
    appointment = appointment_in(client, clinic, "booked")
    token = token_for(["appointments:write"], branches=[clinic.branch])

    response = get_appointment(client, token, appointment["appointment_id"])

    assert_problem(response, 403, "insufficient_scope")
    assert response["WWW-Authenticate"] == (
        'Bearer realm="clinic-api", error="insufficient_scope", scope="appointments:read"'
    )


def test_an_unrestricted_client_can_change_an_appointment_at_any_branch(client, clinic, token_for):
    """A client with no branch restriction sees every branch: a Mumbai appointment is not hidden from it."""
    mumbai = BranchFactory(code="MUM", name="Mumbai", state="Maharashtra")
    doctor = DoctorFactory(branches=[mumbai])
    appointment = Appointment.objects.create(
        patient=PatientFactory(registration_branch=mumbai),
        doctor=doctor,
        branch=mumbai,
        slot_start=ist_at(DAY, "09:00"),
        slot_end=ist_at(DAY, "09:15"),
        local_date=DAY,
        token_number=1,
    )
    start_now(appointment.id)  # check-in only on the appointment's day
    token = token_for(["appointments:write"])

    response = post_action(client, token, str(appointment.id), "check-in")

    assert response.status_code == 200, response.content
    assert response.json()["status"] == "checked_in"


# --- Events --------------------------------------------------------------------------------------------


def test_each_change_of_a_day_publishes_one_event_with_the_full_appointment(client, clinic, published):
    """booked -> rescheduled -> checked_in -> completed for Priya; booked -> cancelled and booked -> no_show
    for two others: one event per change, in order, each with the appointment as the response shows it."""
    first = book(client, clinic.writer, clinic.patient, clinic.doctor, ist_at(DAY, "09:00"), ist_at(DAY, "09:15"))
    moved = client.patch(
        f"/api/v1/appointments/{first['appointment_id']}/reschedule",
        {"new_slot_start": iso(DAY, "11:00"), "new_slot_end": iso(DAY, "11:15"), "reason": "Later please"},
        content_type="application/json",
        **bearer(clinic.writer),
    ).json()
    start_now(first["appointment_id"])  # check-in only on the appointment's day (a setup write: no event)
    checked_in = post_action(client, clinic.writer, first["appointment_id"], "check-in").json()
    completed = post_action(client, clinic.writer, first["appointment_id"], "complete").json()
    second = book(
        client, clinic.writer, clinic.other_patient, clinic.doctor, ist_at(DAY, "09:00"), ist_at(DAY, "09:15")
    )
    cancelled = client.delete(
        f"/api/v1/appointments/{second['appointment_id']}?reason=Travelling", **bearer(clinic.writer)
    ).json()
    third_patient = PatientFactory(registration_branch=clinic.branch)
    third = book(client, clinic.writer, third_patient, clinic.doctor, ist_at(DAY, "12:00"), ist_at(DAY, "12:15"))
    start_now(third["appointment_id"], minutes_ago=30)  # no-show once started; clear of Priya's moved slot
    absent = post_action(client, clinic.writer, third["appointment_id"], "no-show").json()

    assert published.calls == [
        ("appointment.booked", {"appointment": first}),
        ("appointment.rescheduled", {"appointment": moved, "previous": first}),
        ("appointment.checked_in", {"appointment": checked_in}),
        ("appointment.completed", {"appointment": completed}),
        ("appointment.booked", {"appointment": second}),
        ("appointment.cancelled", {"appointment": cancelled}),
        ("appointment.booked", {"appointment": third}),
        ("appointment.no_show", {"appointment": absent}),
    ]
    assert [body["version"] for body in (first, moved, checked_in, completed)] == [1, 2, 3, 4]
    assert (cancelled["version"], absent["version"]) == (2, 2)


def test_the_history_keeps_every_change_with_its_actor_and_version(client, clinic):
    booked = book(client, clinic.writer, clinic.patient, clinic.doctor, ist_at(DAY, "09:00"), ist_at(DAY, "09:15"))
    start_now(booked["appointment_id"])  # check-in only on the appointment's day
    post_action(client, clinic.writer, booked["appointment_id"], "check-in")
    post_action(client, clinic.writer, booked["appointment_id"], "complete")

    changes = list(AppointmentChange.objects.filter(appointment_id=booked["appointment_id"]).order_by("version"))

    assert [(c.version, c.kind) for c in changes] == [(1, "booked"), (2, "checked_in"), (3, "completed")]
    assert len({c.actor for c in changes}) == 1
    assert changes[0].actor.startswith("api:")
    assert [c.at for c in changes] == sorted(c.at for c in changes)
    assert changes[-1].at == Appointment.objects.get(id=booked["appointment_id"]).updated_at


def _aware(value: datetime) -> bool:
    return value.tzinfo is not None and value.utcoffset() is not None


def test_status_timestamps_answer_in_the_branchs_offset(client, clinic):
    appointment = appointment_in(client, clinic, "completed")

    body = get_appointment(client, clinic.writer, appointment["appointment_id"]).json()

    for name in ("created_at", "updated_at", "checked_in_at", "completed_at", "slot_start", "slot_end"):
        assert body[name].endswith("+05:30"), (name, body[name])
        assert _aware(datetime.fromisoformat(body[name]))
    assert datetime.fromisoformat(body["completed_at"]) - datetime.fromisoformat(body["checked_in_at"]) < timedelta(
        seconds=30
    )
