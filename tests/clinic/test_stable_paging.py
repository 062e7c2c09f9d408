"""docs/api-rules.md §5.6: paging is stable. The `Link` URLs of a list carry the first page's instant (`as_of`); a record
added after it never shifts the later pages: the patients' newest-first list (a registration goes first) and
its search (both read from counters and SQL of their own), and a list read through the shared paginator (the
doctors, by name: "Dr. AA" goes first)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from patients.models import Patient
from tests.factories import BranchFactory, DoctorFactory
from tests.helpers import assert_problem, bearer, link_snapshot
from tests.patients.factories import PatientFactory

pytestmark = pytest.mark.django_db


def follow(client: Any, token: str, response: Any, rel: str) -> Any:
    url = re.search(rf'<([^>]+)>; rel="{rel}"', response["Link"]).group(1)
    return client.get(url, **bearer(token))


def ids(response: Any) -> list[str]:
    assert response.status_code == 200, response.content
    return [item["id"] for item in response.json()]


@pytest.fixture
def patients() -> list[Patient]:
    branch = BranchFactory(code="BLR")
    start = datetime(2026, 1, 1, tzinfo=UTC)
    made = []
    for n in range(5):
        patient = PatientFactory(registration_branch=branch, first_name="Manoj", last_name=f"Verma{'x' * n}")
        Patient.objects.filter(pk=patient.pk).update(registered_at=start + timedelta(hours=n))
        made.append(patient)
    return made


def test_a_patient_registered_between_pages_shifts_nothing(client, token_for, patients):
    reader = token_for(["patients:read"])
    first = client.get("/api/v1/patients?per_page=2", **bearer(reader))
    assert ids(first) == [str(patients[4].id), str(patients[3].id)]
    link_snapshot(first["Link"])

    newcomer = PatientFactory(registration_branch=patients[0].registration_branch)

    second = follow(client, reader, first, "next")
    third = follow(client, reader, second, "next")
    assert ids(second) == [str(patients[2].id), str(patients[1].id)]
    assert ids(third) == [str(patients[0].id)]
    assert [page["X-Total-Count"] for page in (first, second, third)] == ["5", "5", "5"]
    assert "next" not in third["Link"]
    # a fresh first page (no as_of) reads the list as it stands now
    fresh = client.get("/api/v1/patients?per_page=2", **bearer(reader))
    assert ids(fresh)[0] == str(newcomer.id)
    assert fresh["X-Total-Count"] == "6"


def test_a_search_pages_from_the_same_snapshot(client, token_for, patients):
    reader = token_for(["patients:read"])
    first = client.get("/api/v1/patients?search=Manoj&per_page=3", **bearer(reader))
    assert first["X-Total-Count"] == "5"
    PatientFactory(registration_branch=patients[0].registration_branch, first_name="Manoj", last_name="Verma")

    second = follow(client, reader, first, "next")

    assert second["X-Total-Count"] == "5"
    assert set(ids(first)) | set(ids(second)) == {str(patient.id) for patient in patients}
    assert not set(ids(first)) & set(ids(second))


def test_a_doctor_added_between_pages_shifts_nothing(client, token_for):
    reader = token_for(["appointments:read"])
    branch = BranchFactory(code="BLR")
    for letter in "BCDE":
        DoctorFactory(name=f"Dr. {letter}", branches=[branch])
    first = client.get("/api/v1/doctors?per_page=2", **bearer(reader))
    assert [doctor["name"] for doctor in first.json()] == ["Dr. B", "Dr. C"]

    DoctorFactory(name="Dr. AA", branches=[branch])

    second = follow(client, reader, first, "next")
    assert [doctor["name"] for doctor in second.json()] == ["Dr. D", "Dr. E"]
    assert second["X-Total-Count"] == "4"


@pytest.mark.parametrize(
    ("as_of", "message"),
    [
        ("2026-11-28T09:00:00", "Include the UTC offset, e.g. 2026-11-23T09:00:00+05:30."),
        ("yesterday", None),
    ],
)
def test_an_as_of_without_an_offset_or_not_a_time_is_a_400_naming_it(client, token_for, as_of, message):
    reader = token_for(["appointments:read"])
    response = client.get("/api/v1/doctors", {"as_of": as_of}, **bearer(reader))
    problem = assert_problem(response, 400, "validation_error")
    assert [error["field"] for error in problem["errors"]] == ["as_of"]
    if message is not None:
        assert problem["errors"][0]["message"] == message


def test_a_list_that_is_not_of_records_carries_no_snapshot(client, token_for):
    reader = token_for(["pharmacy:read"])
    response = client.get("/api/v1/pharmacy/stock", **bearer(reader))
    assert response.status_code == 200, response.content
    assert "as_of=" not in response["Link"]
