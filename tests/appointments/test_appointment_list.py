"""GET /api/v1/appointments: a bare array in slot order (then id), paginated in headers, filtered by
patient, doctor, branch, branch-local day or range, and status; a branch-restricted client sees only its
branches' appointments; bad filters are 400s naming the parameter."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from appointments.models import Appointment
from tests.appointments.factories import AppointmentFactory
from tests.appointments.lifecycle_helpers import APPOINTMENTS, DAY, NEXT_DAY, get_appointment
from tests.factories import BranchFactory, DepartmentFactory, DoctorFactory
from tests.helpers import assert_field_errors, assert_problem, at, bearer, link_snapshot
from tests.patients.factories import PatientFactory

pytestmark = pytest.mark.django_db

NEW_YORK = ZoneInfo("America/New_York")


@dataclass
class Roster:
    """Seven appointments at three branches (Bengaluru and Mumbai in India, New York), in every status."""

    blr: Any
    mum: Any
    nyc: Any
    rao: Any
    iyer: Any
    shah: Any
    ny_doctor: Any
    priya: Any
    rahul: Any
    a1: Appointment  # Rao, Priya, DAY 09:00 IST, booked
    a2: Appointment  # Iyer, Rahul, DAY 09:00 IST (same instant as a1), booked
    a3: Appointment  # Rao, Rahul, DAY 10:00 IST, cancelled
    a4: Appointment  # Rao, Priya, NEXT_DAY 09:00 IST, checked in
    a5: Appointment  # Shah (Mumbai), DAY 11:00 IST, booked
    a6: Appointment  # New York, DAY 21:00 local (already NEXT_DAY in UTC and India), completed
    a7: Appointment  # Rao, Priya, a week after DAY 09:00 IST, no show

    def ordered(self, *appointments: Appointment) -> list[str]:
        """The ids of `appointments` in the list's order: slot_start, then id."""
        return [str(a.id) for a in sorted(appointments, key=lambda a: (a.slot_start, a.id))]

    @property
    def everything(self) -> list[str]:
        return self.ordered(self.a1, self.a2, self.a3, self.a4, self.a5, self.a6, self.a7)

    @property
    def at_blr(self) -> list[str]:
        return self.ordered(self.a1, self.a2, self.a3, self.a4, self.a7)


@pytest.fixture
def roster() -> Roster:
    blr = BranchFactory(code="BLR", name="Bengaluru", time_zone="Asia/Kolkata")
    mum = BranchFactory(code="MUM", name="Mumbai", state="Maharashtra", time_zone="Asia/Kolkata")
    nyc = BranchFactory(code="NYC", name="New York", time_zone="America/New_York")
    rao = DoctorFactory(name="Dr. Ananya Rao", department=DepartmentFactory(name="General Medicine"), branches=[blr])
    iyer = DoctorFactory(name="Dr. Vikram Iyer", department=DepartmentFactory(name="Cardiology"), branches=[blr])
    shah = DoctorFactory(name="Dr. Kiran Shah", branches=[mum])
    ny_doctor = DoctorFactory(name="Dr. Emily Stone", branches=[nyc])
    priya = PatientFactory(first_name="Priya", last_name="Sharma", registration_branch=blr)
    rahul = PatientFactory(first_name="Rahul", last_name="Verma", registration_branch=blr)

    def make(doctor, branch, patient, start, status="booked", **extra):
        return AppointmentFactory(
            doctor=doctor,
            branch=branch,
            patient=patient,
            slot_start=start,
            slot_end=start + timedelta(minutes=15),
            status=status,
            **extra,
        )

    return Roster(
        blr=blr,
        mum=mum,
        nyc=nyc,
        rao=rao,
        iyer=iyer,
        shah=shah,
        ny_doctor=ny_doctor,
        priya=priya,
        rahul=rahul,
        a1=make(rao, blr, priya, at(DAY, "09:00")),
        a2=make(iyer, blr, rahul, at(DAY, "09:00")),
        a3=make(rao, blr, rahul, at(DAY, "10:00"), "cancelled", cancellation_reason="Travelling"),
        a4=make(rao, blr, priya, at(NEXT_DAY, "09:00"), "checked_in"),
        a5=make(shah, mum, PatientFactory(registration_branch=mum), at(DAY, "11:00")),
        a6=make(ny_doctor, nyc, PatientFactory(registration_branch=nyc), at(DAY, "21:00", NEW_YORK), "completed"),
        a7=make(rao, blr, priya, at(DAY + timedelta(days=7), "09:00"), "no_show"),
    )


@pytest.fixture
def reader(token_for) -> str:
    """A client that may read appointments at every branch."""
    return token_for(["appointments:read"])


@pytest.fixture
def blr_reader(token_for, roster) -> str:
    return token_for(["appointments:read"], branches=[roster.blr])


def list_appointments(client: Any, token: str, **params: Any) -> Any:
    return client.get(APPOINTMENTS, params, **bearer(token))


def listed(client: Any, token: str, **params: Any) -> list[str]:
    """The appointment ids of a 200 response, after checking it is a bare array with a matching total."""
    response = list_appointments(client, token, **params)
    assert response.status_code == 200, response.content
    assert response["Content-Type"] == "application/json"
    body = response.json()
    assert isinstance(body, list)
    assert response["X-Total-Count"] == str(len(body))
    return [item["appointment_id"] for item in body]


# --- The list ------------------------------------------------------------------------------------------


def test_the_list_is_a_bare_array_of_appointment_objects_in_slot_order(client, roster, reader):
    response = list_appointments(client, reader)

    assert response.status_code == 200, response.content
    body = response.json()
    assert [item["appointment_id"] for item in body] == roster.everything
    assert response["X-Total-Count"] == "7"
    for item in body:
        assert item == get_appointment(client, reader, item["appointment_id"]).json()
    assert body[0]["patient"]["name"] in {"Priya Sharma", "Rahul Verma"}
    by_id = {item["appointment_id"]: item for item in body}
    assert by_id[str(roster.a6.id)]["slot_start"] == at(DAY, "21:00", NEW_YORK).isoformat()
    assert by_id[str(roster.a3.id)]["cancellation_reason"] == "Travelling"
    assert [by_id[str(a.id)]["status"] for a in (roster.a1, roster.a3, roster.a4, roster.a6, roster.a7)] == [
        "booked",
        "cancelled",
        "checked_in",
        "completed",
        "no_show",
    ]


def test_appointments_at_the_same_instant_are_ordered_by_id(client, roster, reader):
    same_instant = listed(client, reader, date=DAY.isoformat(), branch_id=str(roster.blr.id))[:2]

    assert same_instant == sorted([str(roster.a1.id), str(roster.a2.id)])


def test_an_empty_result_is_an_empty_array_with_a_zero_total(client, roster, reader):
    response = list_appointments(client, reader, date=(DAY + timedelta(days=30)).isoformat())

    assert response.status_code == 200, response.content
    assert response.json() == []
    assert response["X-Total-Count"] == "0"


# --- Filters ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "reference",
    [lambda p: str(p.id), lambda p: p.patient_id, lambda p: p.patient_id.lower().replace("-", "")],
    ids=["uuid", "patient_id", "patient_id-lowercase-without-hyphen"],
)
def test_patient_id_filters_by_uuid_or_business_id(client, roster, reader, reference):
    assert listed(client, reader, patient_id=reference(roster.priya)) == roster.ordered(roster.a1, roster.a4, roster.a7)


def test_doctor_id_filters_by_doctor(client, roster, reader):
    assert listed(client, reader, doctor_id=str(roster.rao.id)) == roster.ordered(
        roster.a1, roster.a3, roster.a4, roster.a7
    )
    assert listed(client, reader, doctor_id=str(roster.iyer.id)) == [str(roster.a2.id)]


def test_branch_id_filters_by_branch(client, roster, reader):
    assert listed(client, reader, branch_id=str(roster.mum.id)) == [str(roster.a5.id)]
    assert listed(client, reader, branch_id=str(roster.blr.id)) == roster.at_blr


def test_date_is_the_branch_local_day_of_the_slot(client, roster, reader):
    """New York's DAY 21:00 is NEXT_DAY in UTC and in India: it belongs to DAY."""
    assert listed(client, reader, date=DAY.isoformat()) == roster.ordered(
        roster.a1, roster.a2, roster.a3, roster.a5, roster.a6
    )
    assert listed(client, reader, date=NEXT_DAY.isoformat()) == [str(roster.a4.id)]


def test_date_from_and_date_to_are_inclusive_local_days(client, roster, reader):
    assert listed(client, reader, date_from=NEXT_DAY.isoformat()) == roster.ordered(roster.a4, roster.a7)
    assert listed(client, reader, date_to=DAY.isoformat()) == roster.ordered(
        roster.a1, roster.a2, roster.a3, roster.a5, roster.a6
    )
    assert listed(client, reader, date_from=NEXT_DAY.isoformat(), date_to=NEXT_DAY.isoformat()) == [str(roster.a4.id)]
    assert (
        listed(client, reader, date_from=DAY.isoformat(), date_to=(DAY + timedelta(days=7)).isoformat())
        == roster.everything
    )


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        ("booked", ["a1", "a2", "a5"]),
        ("checked_in", ["a4"]),
        ("completed", ["a6"]),
        ("cancelled", ["a3"]),
        ("no_show", ["a7"]),
    ],
)
def test_status_filters_by_one_status(client, roster, reader, status, expected):
    assert listed(client, reader, status=status) == roster.ordered(*(getattr(roster, name) for name in expected))


def test_filters_combine(client, roster, reader):
    assert listed(
        client, reader, patient_id=roster.priya.patient_id, doctor_id=str(roster.rao.id), status="booked"
    ) == [str(roster.a1.id)]
    assert listed(client, reader, doctor_id=str(roster.rao.id), date=NEXT_DAY.isoformat(), status="booked") == []


def test_unknown_query_parameters_are_refused(client, roster, reader):
    # docs/api-rules.md §1: `doctor` for `doctor_id` must not silently list every appointment.
    response = list_appointments(client, reader, sort="-slot_start", doctor=str(roster.iyer.id))

    problem = assert_problem(response, 400, "unknown_parameter")
    assert [error["field"] for error in problem["errors"]] == ["sort", "doctor"]


# --- Branch restriction ----------------------------------------------------------------------------------


def test_a_branch_restricted_client_sees_only_its_branches_appointments(client, roster, blr_reader):
    assert listed(client, blr_reader) == roster.at_blr
    assert listed(client, blr_reader, date=DAY.isoformat()) == roster.ordered(roster.a1, roster.a2, roster.a3)


def test_a_client_of_two_branches_sees_both(client, roster, token_for):
    token = token_for(["appointments:read"], branches=[roster.blr, roster.nyc])

    assert listed(client, token) == roster.ordered(roster.a1, roster.a2, roster.a3, roster.a4, roster.a6, roster.a7)


def assert_empty(response: Any) -> None:
    """docs/api-rules.md §5.4: a filter naming nothing the client may see finds nothing; not a 400, which
    would tell an id that exists elsewhere from one that exists nowhere."""
    assert response.status_code == 200, response.content
    assert (response.json(), response["X-Total-Count"]) == ([], "0")


def test_a_restricted_client_filtering_by_another_branchs_doctor_finds_nothing_like_an_unknown_one(
    client, roster, blr_reader
):
    assert_empty(list_appointments(client, blr_reader, doctor_id=str(roster.shah.id)))
    assert_empty(list_appointments(client, blr_reader, doctor_id=str(uuid.UUID(int=7))))


@pytest.mark.parametrize(
    "reference", ["PAT-999999", "00000000-0000-4000-8000-000000000000", "nobody"], ids=["business", "uuid", "junk"]
)
def test_an_unknown_patient_id_finds_nothing(client, roster, reader, reference):
    assert_empty(list_appointments(client, reader, patient_id=reference))


def test_a_patient_of_a_branch_the_client_may_not_see_finds_nothing(client, roster, blr_reader):
    assert_empty(list_appointments(client, blr_reader, patient_id=roster.a5.patient.patient_id))


def test_an_unknown_branch_and_a_hidden_one_find_nothing_alike(client, roster, blr_reader):
    assert_empty(list_appointments(client, blr_reader, branch_id=str(uuid.UUID(int=9))))
    assert_empty(list_appointments(client, blr_reader, branch_id=str(roster.mum.id)))


def test_a_malformed_reference_is_400_naming_it(client, roster, reader):
    response = list_appointments(client, reader, doctor_id="dr-rao", branch_id="blr", patient_id="P" * 65)

    problem = assert_problem(response, 400, "validation_error")
    assert sorted(e["field"] for e in problem["errors"]) == ["branch_id", "doctor_id", "patient_id"]


def test_date_to_before_date_from_is_400_on_date_to(client, roster, reader):
    response = list_appointments(client, reader, date_from=NEXT_DAY.isoformat(), date_to=DAY.isoformat())

    assert_field_errors(response, [{"field": "date_to", "code": "invalid", "message": "Must not be before date_from."}])


@pytest.mark.parametrize(
    ("params", "fields"),
    [
        ({"status": "done"}, [("status", "invalid_choice")]),
        ({"status": "BOOKED"}, [("status", "invalid_choice")]),
        ({"date": "2026-02-30"}, [("date", "invalid")]),
        ({"date_from": "yesterday"}, [("date_from", "invalid")]),
        ({"doctor_id": "rao"}, [("doctor_id", "invalid")]),
        ({"branch_id": "BLR"}, [("branch_id", "invalid")]),
        (
            {"doctor_id": "rao", "branch_id": "BLR", "date": "x", "status": "done"},
            [("doctor_id", "invalid"), ("branch_id", "invalid"), ("date", "invalid"), ("status", "invalid_choice")],
        ),
    ],
    ids=["status", "status-case", "impossible-date", "date_from", "doctor_id", "branch_id", "all-named"],
)
def test_malformed_filters_are_400_naming_each_parameter(client, roster, reader, params, fields):
    response = list_appointments(client, reader, **params)

    problem = assert_problem(response, 400, "validation_error")
    assert [(e["field"], e["code"]) for e in problem["errors"]] == fields


# --- Pagination ------------------------------------------------------------------------------------------


def link(rels: dict[str, int], per_page: int, as_of: str) -> str:
    return ", ".join(
        f'<http://testserver/api/v1/appointments?as_of={as_of}&page={page}&per_page={per_page}>; rel="{rel}"'
        for rel, page in rels.items()
    )


@pytest.mark.parametrize(
    ("page", "slice_", "rels"),
    [
        (1, slice(0, 3), {"first": 1, "next": 2, "last": 3}),
        (2, slice(3, 6), {"first": 1, "prev": 1, "next": 3, "last": 3}),
        (3, slice(6, 7), {"first": 1, "prev": 2, "last": 3}),
    ],
)
def test_pages_follow_the_order_with_total_and_links(client, roster, reader, page, slice_, rels):
    response = list_appointments(client, reader, per_page=3, page=page)

    assert response.status_code == 200, response.content
    assert [item["appointment_id"] for item in response.json()] == roster.everything[slice_]
    assert response["X-Total-Count"] == "7"
    assert response["Link"] == link(rels, 3, link_snapshot(response["Link"]))


def test_a_page_past_the_end_is_an_empty_array(client, roster, reader):
    response = list_appointments(client, reader, per_page=3, page=4)

    assert response.status_code == 200, response.content
    assert response.json() == []
    assert response["X-Total-Count"] == "7"
    assert response["Link"] == link({"first": 1, "prev": 3, "last": 3}, 3, link_snapshot(response["Link"]))


def test_the_default_page_has_twenty_appointments(client, roster, reader):
    for hour in range(7, 20):
        AppointmentFactory(
            doctor=roster.iyer,
            branch=roster.blr,
            patient=roster.rahul,
            slot_start=at(DAY + timedelta(days=14), f"{hour:02d}:00"),
        )
    AppointmentFactory(
        doctor=roster.iyer,
        branch=roster.blr,
        patient=roster.rahul,
        slot_start=at(DAY + timedelta(days=14), "20:00"),
    )

    response = list_appointments(client, reader)

    assert len(response.json()) == 20
    assert response["X-Total-Count"] == "21"
    assert response["Link"] == link({"first": 1, "next": 2, "last": 2}, 20, link_snapshot(response["Link"]))


@pytest.mark.parametrize(
    ("params", "field", "code"),
    [
        ({"page": 0}, "page", "min_value"),
        ({"per_page": 0}, "per_page", "min_value"),
        ({"per_page": 101}, "per_page", "max_value"),
        ({"page": "two"}, "page", "invalid"),
    ],
)
def test_out_of_range_pagination_is_400(client, roster, reader, params, field, code):
    response = list_appointments(client, reader, **params)

    problem = assert_problem(response, 400, "validation_error")
    assert [(e["field"], e["code"]) for e in problem["errors"]] == [(field, code)]


def test_the_filters_survive_in_the_links(client, roster, reader):
    response = list_appointments(client, reader, doctor_id=str(roster.rao.id), per_page=2)

    assert response["X-Total-Count"] == "4"
    assert f"doctor_id={roster.rao.id}" in response["Link"]
    assert response["Link"].count("doctor_id=") == 3  # first, next, last


# --- Access and cost -------------------------------------------------------------------------------------


def test_the_list_needs_appointments_read(client, roster, token_for):
    token = token_for(["appointments:write", "patients:read"])

    response = list_appointments(client, token)

    assert_problem(response, 403, "insufficient_scope")
    assert response["WWW-Authenticate"] == (
        'Bearer realm="clinic-api", error="insufficient_scope", scope="appointments:read"'
    )


def test_the_list_without_a_token_is_401(client, roster):
    response = client.get(APPOINTMENTS)

    assert response.status_code == 401
    assert response["Content-Type"] == "application/problem+json"


def test_the_number_of_queries_does_not_grow_with_the_page(client, roster, reader):
    with CaptureQueriesContext(connection) as one:
        assert len(list_appointments(client, reader, per_page=1).json()) == 1
    with CaptureQueriesContext(connection) as seven:
        assert len(list_appointments(client, reader, per_page=100).json()) == 7

    # The same, but for the COUNT that a page holding the last rows does without.
    assert len(seven.captured_queries) == len(one.captured_queries) - 1


def test_the_detail_costs_a_fixed_number_of_queries(client, roster, reader):
    with CaptureQueriesContext(connection) as first:
        assert get_appointment(client, reader, str(roster.a1.id)).status_code == 200
    with CaptureQueriesContext(connection) as other:
        assert get_appointment(client, reader, str(roster.a6.id)).status_code == 200

    assert len(first.captured_queries) == len(other.captured_queries)


@pytest.mark.parametrize(
    ("params", "fields"),
    [
        ({"page": 0, "status": "done"}, ["page", "status"]),
        ({"doctor_id": "dr-rao", "status": "done"}, ["doctor_id", "status"]),
        (
            {"patient_id": "P" * 65, "doctor_id": "7", "branch_id": "8", "page": 0},
            ["patient_id", "doctor_id", "branch_id", "page"],
        ),
    ],
    ids=["page-and-status", "malformed-doctor-and-status", "three-malformed-references"],
)
def test_bad_parameters_of_different_kinds_are_named_together(client, roster, reader, params, fields):
    response = list_appointments(client, reader, **params)

    problem = assert_problem(response, 400, "validation_error")
    assert sorted(e["field"] for e in problem["errors"]) == sorted(fields)
