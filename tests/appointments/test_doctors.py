"""GET /api/v1/doctors and GET /api/v1/doctors/{id}: the doctors a client may see, and nothing else."""

from __future__ import annotations

import uuid
from typing import Any
from unittest.mock import ANY

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tests.factories import BranchFactory, DepartmentFactory, DoctorFactory
from tests.helpers import assert_problem, bearer, parse_links

pytestmark = pytest.mark.django_db

DOCTORS = "/api/v1/doctors"


@pytest.fixture
def reader(token_for: Any) -> str:
    return token_for(["appointments:read"])


def names(response: Any) -> list[str]:
    assert response.status_code == 200, response.content
    return [doctor["name"] for doctor in response.json()]


# --- The list ---------------------------------------------------------------------------------------


def test_list_returns_bare_array_of_doctors_ordered_by_name_with_pagination_headers(client, reader):
    blr = BranchFactory(code="BLR")
    mum = BranchFactory(code="MUM", state="Maharashtra")
    cardiology = DepartmentFactory(name="Cardiology")
    rao = DoctorFactory(name="Dr. Ananya Rao", department=cardiology, branches=[blr, mum], default_slot_minutes=20)
    DoctorFactory(name="Dr. Vikram Shah", branches=[mum])
    DoctorFactory(name="Dr. Aditi Iyer", branches=[blr])

    response = client.get(DOCTORS, **bearer(reader))

    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    assert response["X-Total-Count"] == "3"
    assert parse_links(response["Link"], DOCTORS) == {
        "first": {"as_of": [ANY], "page": ["1"], "per_page": ["20"]},
        "last": {"as_of": [ANY], "page": ["1"], "per_page": ["20"]},
    }
    body = response.json()
    assert [doctor["name"] for doctor in body] == ["Dr. Aditi Iyer", "Dr. Ananya Rao", "Dr. Vikram Shah"]
    assert body[1] == {
        "id": str(rao.id),
        "name": "Dr. Ananya Rao",
        "department": {"id": str(cardiology.id), "name": "Cardiology"},
        "branch_ids": sorted([str(blr.id), str(mum.id)]),
        "default_slot_minutes": 20,
    }


def test_doctors_with_the_same_name_are_ordered_by_id(client, reader):
    branch = BranchFactory(code="BLR")
    twins = [DoctorFactory(name="Dr. Same", branches=[branch]) for _ in range(3)]

    response = client.get(DOCTORS, **bearer(reader))

    assert [doctor["id"] for doctor in response.json()] == sorted(str(doctor.id) for doctor in twins)


def test_the_list_is_paginated_with_links(client, reader):
    branch = BranchFactory(code="BLR")
    for letter in "EADBC":
        DoctorFactory(name=f"Dr. {letter}", branches=[branch])

    response = client.get(f"{DOCTORS}?per_page=2&page=2", **bearer(reader))

    assert names(response) == ["Dr. C", "Dr. D"]
    assert response["X-Total-Count"] == "5"
    assert parse_links(response["Link"], DOCTORS) == {
        "first": {"as_of": [ANY], "page": ["1"], "per_page": ["2"]},
        "prev": {"as_of": [ANY], "page": ["1"], "per_page": ["2"]},
        "next": {"as_of": [ANY], "page": ["3"], "per_page": ["2"]},
        "last": {"as_of": [ANY], "page": ["3"], "per_page": ["2"]},
    }


def test_branch_id_filter_lists_the_doctors_consulting_there(client, reader):
    blr = BranchFactory(code="BLR")
    mum = BranchFactory(code="MUM", state="Maharashtra")
    DoctorFactory(name="Dr. Both", branches=[blr, mum])
    DoctorFactory(name="Dr. Bengaluru", branches=[blr])
    DoctorFactory(name="Dr. Mumbai", branches=[mum])

    response = client.get(f"{DOCTORS}?branch_id={mum.id}", **bearer(reader))

    assert names(response) == ["Dr. Both", "Dr. Mumbai"]
    assert response["X-Total-Count"] == "2"
    # The filter narrows the list, not the doctor: branch_ids still shows every visible branch.
    assert response.json()[0]["branch_ids"] == sorted([str(blr.id), str(mum.id)])


def test_a_malformed_branch_id_filter_is_400_naming_it(client, reader):
    response = client.get(f"{DOCTORS}?branch_id=BLR", **bearer(reader))

    body = assert_problem(response, 400, "validation_error")
    assert [(error["field"], error["code"]) for error in body["errors"]] == [("branch_id", "invalid")]


@pytest.mark.parametrize("department", ["Cardiology", "cardiology", "CARDIOLOGY", "cArDiOlOgY"])
def test_department_filter_matches_the_name_case_insensitively(client, reader, department):
    branch = BranchFactory(code="BLR")
    cardiology = DepartmentFactory(name="Cardiology")
    DoctorFactory(name="Dr. Heart", department=cardiology, branches=[branch])
    DoctorFactory(name="Dr. Heart Two", department=cardiology, branches=[branch])
    DoctorFactory(name="Dr. Skin", department=DepartmentFactory(name="Dermatology"), branches=[branch])

    response = client.get(f"{DOCTORS}?department={department}", **bearer(reader))

    assert names(response) == ["Dr. Heart", "Dr. Heart Two"]
    assert response["X-Total-Count"] == "2"


def test_department_filter_accepts_the_department_id(client, reader):
    branch = BranchFactory(code="BLR")
    dermatology = DepartmentFactory(name="Dermatology")
    DoctorFactory(name="Dr. Heart", department=DepartmentFactory(name="Cardiology"), branches=[branch])
    DoctorFactory(name="Dr. Skin", department=dermatology, branches=[branch])

    response = client.get(f"{DOCTORS}?department={dermatology.id}", **bearer(reader))

    assert names(response) == ["Dr. Skin"]


def test_department_filter_matches_the_whole_name_only(client, reader):
    branch = BranchFactory(code="BLR")
    DoctorFactory(name="Dr. Heart", department=DepartmentFactory(name="Cardiology"), branches=[branch])

    for department in ("Cardio", "Neurology", str(uuid.uuid4())):
        response = client.get(f"{DOCTORS}?department={department}", **bearer(reader))
        assert response.json() == []
        assert response["X-Total-Count"] == "0"


def test_branch_and_department_filters_combine(client, reader):
    blr = BranchFactory(code="BLR")
    mum = BranchFactory(code="MUM", state="Maharashtra")
    cardiology = DepartmentFactory(name="Cardiology")
    DoctorFactory(name="Dr. Heart BLR", department=cardiology, branches=[blr])
    DoctorFactory(name="Dr. Heart MUM", department=cardiology, branches=[mum])
    DoctorFactory(name="Dr. Skin MUM", department=DepartmentFactory(name="Dermatology"), branches=[mum])

    response = client.get(f"{DOCTORS}?branch_id={mum.id}&department=cardiology", **bearer(reader))

    assert names(response) == ["Dr. Heart MUM"]


def test_inactive_doctors_are_hidden(client, reader):
    branch = BranchFactory(code="BLR")
    DoctorFactory(name="Dr. Active", branches=[branch])
    retired = DoctorFactory(name="Dr. Retired", branches=[branch], is_active=False)

    response = client.get(DOCTORS, **bearer(reader))

    assert names(response) == ["Dr. Active"]
    assert response["X-Total-Count"] == "1"
    assert_problem(client.get(f"{DOCTORS}/{retired.id}", **bearer(reader)), 404, "not_found")


def test_a_doctor_consulting_only_at_an_inactive_branch_is_hidden(client, token_for):
    open_branch = BranchFactory(code="BLR")
    closed = BranchFactory(code="OLD", is_active=False)
    DoctorFactory(name="Dr. Open", branches=[open_branch, closed])
    gone = DoctorFactory(name="Dr. Closed Branch", branches=[closed])

    for token in (token_for(["appointments:read"]), token_for(["appointments:read"], branches=[open_branch, closed])):
        response = client.get(DOCTORS, **bearer(token))
        assert names(response) == ["Dr. Open"]
        assert response["X-Total-Count"] == "1"
        assert response.json()[0]["branch_ids"] == [str(open_branch.id)]
        assert_problem(client.get(f"{DOCTORS}/{gone.id}", **bearer(token)), 404, "not_found")


def test_a_doctor_at_no_branch_is_hidden(client, reader):
    DoctorFactory(name="Dr. Nowhere")

    response = client.get(DOCTORS, **bearer(reader))

    assert response.json() == []
    assert response["X-Total-Count"] == "0"


# --- Branch restriction ---------------------------------------------------------------------------


def test_a_branch_restricted_client_sees_only_doctors_at_its_branches(client, token_for):
    blr = BranchFactory(code="BLR")
    mum = BranchFactory(code="MUM", state="Maharashtra")
    delhi = BranchFactory(code="DEL", state="Delhi")
    both = DoctorFactory(name="Dr. Both", branches=[blr, mum])
    DoctorFactory(name="Dr. Bengaluru", branches=[blr])
    DoctorFactory(name="Dr. Mumbai", branches=[mum])
    DoctorFactory(name="Dr. Delhi", branches=[delhi])

    response = client.get(DOCTORS, **bearer(token_for(["appointments:read"], branches=[mum, delhi])))

    assert names(response) == ["Dr. Both", "Dr. Delhi", "Dr. Mumbai"]
    assert response["X-Total-Count"] == "3"
    # The doctor also consults at BLR, which this client may not see: the id of BLR is not disclosed.
    assert response.json()[0] == {
        "id": str(both.id),
        "name": "Dr. Both",
        "department": {"id": str(both.department_id), "name": both.department.name},
        "branch_ids": [str(mum.id)],
        "default_slot_minutes": 15,
    }
    assert str(blr.id).encode() not in response.content


def test_a_restricted_client_filtering_by_a_branch_it_cannot_see_gets_an_empty_list(client, token_for):
    blr = BranchFactory(code="BLR")
    mum = BranchFactory(code="MUM", state="Maharashtra")
    DoctorFactory(name="Dr. Both", branches=[blr, mum])
    DoctorFactory(name="Dr. Bengaluru", branches=[blr])

    response = client.get(f"{DOCTORS}?branch_id={blr.id}", **bearer(token_for(["appointments:read"], branches=[mum])))

    assert response.status_code == 200
    assert response.json() == []
    assert response["X-Total-Count"] == "0"


def test_a_restricted_client_pages_through_its_own_doctors_only(client, token_for):
    blr = BranchFactory(code="BLR")
    mum = BranchFactory(code="MUM", state="Maharashtra")
    for letter in "ABC":
        DoctorFactory(name=f"Dr. {letter}", branches=[mum])
    DoctorFactory(name="Dr. AA", branches=[blr])

    response = client.get(f"{DOCTORS}?per_page=2&page=2", **bearer(token_for(["appointments:read"], branches=[mum])))

    assert names(response) == ["Dr. C"]
    assert response["X-Total-Count"] == "3"


# --- The detail -----------------------------------------------------------------------------------


def test_detail_returns_the_doctor(client, reader):
    blr = BranchFactory(code="BLR")
    mum = BranchFactory(code="MUM", state="Maharashtra")
    paediatrics = DepartmentFactory(name="Paediatrics")
    doctor = DoctorFactory(name="Dr. Meera Nair", department=paediatrics, branches=[mum, blr], default_slot_minutes=30)

    response = client.get(f"{DOCTORS}/{doctor.id}", **bearer(reader))

    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    assert response.json() == {
        "id": str(doctor.id),
        "name": "Dr. Meera Nair",
        "department": {"id": str(paediatrics.id), "name": "Paediatrics"},
        "branch_ids": sorted([str(blr.id), str(mum.id)]),
        "default_slot_minutes": 30,
    }


def test_detail_shows_a_restricted_client_only_the_branches_it_may_see(client, token_for):
    blr = BranchFactory(code="BLR")
    mum = BranchFactory(code="MUM", state="Maharashtra")
    doctor = DoctorFactory(branches=[blr, mum])

    response = client.get(f"{DOCTORS}/{doctor.id}", **bearer(token_for(["appointments:read"], branches=[blr])))

    assert response.status_code == 200
    assert response.json()["branch_ids"] == [str(blr.id)]


@pytest.mark.parametrize("ref", [str(uuid.uuid4()), "abc", "12345", "PAT-000001"])
def test_detail_of_an_unknown_or_malformed_id_is_404(client, reader, ref):
    DoctorFactory(branches=[BranchFactory(code="BLR")])

    response = client.get(f"{DOCTORS}/{ref}", **bearer(reader))

    body = assert_problem(response, 404, "not_found")
    assert body["detail"] == f"No doctor {ref!r}."


def test_detail_of_a_doctor_only_at_a_branch_the_client_cannot_see_is_404(client, token_for):
    blr = BranchFactory(code="BLR")
    mum = BranchFactory(code="MUM", state="Maharashtra")
    hidden = DoctorFactory(name="Dr. Hidden", branches=[mum])

    response = client.get(f"{DOCTORS}/{hidden.id}", **bearer(token_for(["appointments:read"], branches=[blr])))

    body = assert_problem(response, 404, "not_found")
    assert body["detail"] == f"No doctor {str(hidden.id)!r}."
    assert b"Dr. Hidden" not in response.content
    assert str(mum.id).encode() not in response.content


# --- Scopes and tokens ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "scopes", [["patients:read"], ["appointments:write"], ["billing:read", "patients:write"]], ids=" ".join
)
@pytest.mark.parametrize("detail", [False, True], ids=["list", "detail"])
def test_a_token_without_appointments_read_is_403_and_shows_no_doctor(client, token_for, scopes, detail):
    doctor = DoctorFactory(name="Dr. Secret", branches=[BranchFactory(code="BLR")])

    url = f"{DOCTORS}/{doctor.id}" if detail else DOCTORS
    response = client.get(url, **bearer(token_for(scopes)))

    body = assert_problem(response, 403, "insufficient_scope")
    assert body["detail"] == "This operation requires the scope appointments:read."
    assert (
        response["WWW-Authenticate"]
        == 'Bearer realm="clinic-api", error="insufficient_scope", scope="appointments:read"'
    )
    assert b"Dr. Secret" not in response.content
    assert not response.has_header("X-Total-Count")


@pytest.mark.parametrize("detail", [False, True], ids=["list", "detail"])
def test_without_a_token_doctors_are_401(client, detail):
    doctor = DoctorFactory(name="Dr. Secret", branches=[BranchFactory(code="BLR")])

    response = client.get(f"{DOCTORS}/{doctor.id}" if detail else DOCTORS)

    assert_problem(response, 401, "not_authenticated")
    assert response["WWW-Authenticate"].startswith('Bearer realm="clinic-api"')
    assert b"Dr. Secret" not in response.content


# --- Query counts ---------------------------------------------------------------------------------


def test_the_number_of_list_queries_does_not_grow_with_doctors_or_branches(client, token_for):
    branches = [BranchFactory(code=f"Q{n}") for n in range(4)]
    token = token_for(["appointments:read"], branches=branches[:3])
    DoctorFactory(branches=branches[:1])
    client.get(DOCTORS, **bearer(token))  # warm caches of the first request

    def count() -> int:
        with CaptureQueriesContext(connection) as queries:
            assert client.get(DOCTORS, **bearer(token)).status_code == 200
        return len(queries)

    few = count()
    for n in range(6):
        DoctorFactory(department=DepartmentFactory(name=f"Dept {n}"), branches=branches)
    assert client.get(DOCTORS, **bearer(token))["X-Total-Count"] == "7"
    assert count() == few


def test_the_number_of_detail_queries_does_not_grow_with_branches(client, token_for):
    branches = [BranchFactory(code=f"Q{n}") for n in range(6)]
    token = token_for(["appointments:read"])
    one = DoctorFactory(branches=branches[:1])
    many = DoctorFactory(branches=branches)
    client.get(f"{DOCTORS}/{one.id}", **bearer(token))

    def count(doctor: Any) -> int:
        with CaptureQueriesContext(connection) as queries:
            assert client.get(f"{DOCTORS}/{doctor.id}", **bearer(token)).status_code == 200
        return len(queries)

    assert count(many) == count(one)
