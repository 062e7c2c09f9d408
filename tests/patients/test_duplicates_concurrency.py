"""Duplicate patients (same phone and date of birth as an active patient): 409, also under concurrency."""

from __future__ import annotations

import threading
from datetime import date
from typing import Any

import pytest
from django.db import connection
from django.test import Client

from patients.models import Patient
from tests.factories import BranchFactory
from tests.patients.factories import PatientFactory, post_patient

PERSON: dict[str, Any] = {
    "first_name": "Anjali",
    "last_name": "Nair",
    "date_of_birth": "1992-07-19",
    "gender": "female",
    "phone": "+919845012345",
}


@pytest.fixture
def branch():
    return BranchFactory(code="BLR")


@pytest.fixture
def writer(branch, token_for):
    return token_for(["patients:write"], branches=[branch])


@pytest.mark.django_db
@pytest.mark.parametrize("phone", ["+919845012345", "98450 12345", "+91-98450-12345"])
def test_same_phone_and_birth_date_as_an_active_patient_is_409_with_the_existing_ids(client, branch, writer, phone):
    existing = PatientFactory(
        phone="+919845012345", date_of_birth=date(1992, 7, 19), registration_branch=branch, first_name="A."
    )

    response = post_patient(client, writer, {**PERSON, "phone": phone})

    assert response.status_code == 409
    assert response["Content-Type"] == "application/problem+json"
    assert response.json() == {
        "type": "/api/v1/problems/duplicate_patient",
        "title": "Duplicate patient",
        "status": 409,
        "detail": f"Patient {existing.patient_id} already has this phone number and date of birth.",
        "code": "duplicate_patient",
        "request_id": response["X-Request-ID"],
        "existing_patient_id": existing.patient_id,
        "existing_id": str(existing.id),
    }
    assert list(Patient.objects.values_list("id", flat=True)) == [existing.id]
    existing_after = Patient.objects.get()
    assert existing_after.first_name == "A."


@pytest.mark.django_db
def test_an_inactive_patient_with_the_same_phone_and_birth_date_does_not_block(client, branch, writer):
    merged = PatientFactory(
        phone="+919845012345", date_of_birth=date(1992, 7, 19), registration_branch=branch, is_active=False
    )

    response = post_patient(client, writer, PERSON)

    assert response.status_code == 201, response.content
    assert Patient.objects.count() == 2
    assert response.json()["id"] != str(merged.id)


@pytest.mark.django_db
@pytest.mark.parametrize(
    "change", [{"date_of_birth": "1992-07-20"}, {"phone": "+919845012346"}], ids=["other-birth-date", "other-phone"]
)
def test_same_phone_or_same_birth_date_alone_is_no_duplicate(client, branch, writer, change):
    PatientFactory(phone="+919845012345", date_of_birth=date(1992, 7, 19), registration_branch=branch)

    response = post_patient(client, writer, {**PERSON, **change})

    assert response.status_code == 201, response.content
    assert Patient.objects.count() == 2


@pytest.mark.django_db
def test_the_duplicate_rule_spans_branches(client, branch, writer):
    """A person is one person across branches: a client that cannot see the other branch still gets the
    409, but without that record's ids (docs/api-rules.md §7: no cross-branch existence oracle)."""
    PatientFactory(
        phone="+919845012345", date_of_birth=date(1992, 7, 19), registration_branch=BranchFactory(code="MUM")
    )

    response = post_patient(client, writer, PERSON)

    assert response.status_code == 409
    body = response.json()
    assert body["code"] == "duplicate_patient"
    assert "existing_patient_id" not in body
    assert "existing_id" not in body
    assert Patient.objects.count() == 1


def _post_all_at_once(token: str, threads: int) -> list[int]:
    """POST the same person from `threads` threads released together by a barrier; the status codes."""
    barrier = threading.Barrier(threads)
    statuses: list[int] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def register() -> None:
        try:
            http = Client()
            barrier.wait(timeout=10)
            response = post_patient(http, token, PERSON)
            with lock:
                statuses.append(response.status_code)
        except BaseException as exc:
            errors.append(exc)
        finally:
            connection.close()

    workers = [threading.Thread(target=register) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=60)
    assert not errors, errors
    return sorted(statuses)


@pytest.mark.django_db(transaction=True)
def test_two_concurrent_creates_of_the_same_person_give_one_201_and_one_409(branch, writer):
    assert _post_all_at_once(writer, 2) == [201, 409]

    patient = Patient.objects.get()
    assert (patient.phone, patient.date_of_birth) == ("+919845012345", date(1992, 7, 19))


@pytest.mark.django_db(transaction=True)
def test_ten_concurrent_creates_of_the_same_person_give_one_201_and_nine_409(branch, writer):
    assert _post_all_at_once(writer, 10) == [201] + [409] * 9

    assert Patient.objects.count() == 1


@pytest.mark.django_db(transaction=True)
def test_concurrent_creates_of_different_people_all_succeed(branch, writer):
    barrier = threading.Barrier(5)
    statuses: list[int] = []

    def register(number: int) -> None:
        try:
            http = Client()
            barrier.wait(timeout=10)
            statuses.append(post_patient(http, writer, {**PERSON, "phone": f"+91984501234{number}"}).status_code)
        finally:
            connection.close()

    workers = [threading.Thread(target=register, args=(n,)) for n in range(5)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=60)

    assert statuses == [201] * 5
    assert Patient.objects.count() == 5
    assert len(set(Patient.objects.values_list("patient_id", flat=True))) == 5


@pytest.mark.django_db(transaction=True)
def test_a_concurrent_create_and_patch_to_the_same_identity_do_not_both_succeed(branch, writer, token_for):
    """PATCH moving a patient onto the phone+birth date being registered takes the same lock."""
    other = PatientFactory(phone="+919800000777", date_of_birth=date(1992, 7, 19), registration_branch=branch)
    editor = token_for(["patients:write"], branches=[branch])
    barrier = threading.Barrier(2)
    statuses: dict[str, int] = {}

    def create() -> None:
        try:
            http = Client()
            barrier.wait(timeout=10)
            statuses["create"] = post_patient(http, writer, PERSON).status_code
        finally:
            connection.close()

    def patch() -> None:
        try:
            http = Client()
            barrier.wait(timeout=10)
            statuses["patch"] = http.patch(
                f"/api/v1/patients/{other.id}",
                {"phone": PERSON["phone"]},
                content_type="application/json",
                HTTP_AUTHORIZATION=f"Bearer {editor}",
            ).status_code
        finally:
            connection.close()

    workers = [threading.Thread(target=create), threading.Thread(target=patch)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=60)

    assert sorted(statuses.values()) == [200, 409] or sorted(statuses.values()) == [201, 409]
    assert Patient.objects.filter(phone=PERSON["phone"], date_of_birth=date(1992, 7, 19)).count() == 1
