"""POST /api/v1/patients: registration, validation, branch resolution, scope and Idempotency-Key."""

from __future__ import annotations

import copy
from datetime import date, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from django.db import connection
from django.utils import timezone

from integrations.models import AuditLogEntry
from patients.models import Insurance, Patient
from patients.services import PATIENT_NUMBER_SEQUENCE
from tests.factories import BranchFactory
from tests.helpers import age_today, assert_problem, error_fields
from tests.patients.factories import PATIENTS, aadhaar, post_patient

pytestmark = pytest.mark.django_db

AADHAAR = aadhaar("52739184630")  # 527391846301
VALID: dict[str, Any] = {
    "first_name": "Priya",
    "last_name": "Sharma",
    "date_of_birth": "1990-04-12",
    "gender": "female",
    "phone": "+91 98765 43210",
    "email": "priya.sharma@example.com",
    "address": {"line1": "12 MG Road", "city": "Bengaluru", "state": "Karnataka", "pincode": "560001"},
    "blood_group": "O+",
    "national_health_id": "91-1234-5678-9012",
    "national_id": AADHAAR,
    "insurance": [{"provider": "Star Health", "policy_number": "SH-0042", "valid_until": "2027-03-31"}],
}
MINIMAL: dict[str, Any] = {
    "first_name": "Rahul",
    "last_name": "Verma",
    "date_of_birth": "1985-11-30",
    "gender": "male",
    "phone": "+919812345678",
}


def body(**changes: Any) -> dict[str, Any]:
    data = copy.deepcopy(VALID)
    data.update(changes)
    return data


def last_patient_number() -> int:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT last_value FROM {PATIENT_NUMBER_SEQUENCE}")  # noqa: S608 - our constant
        return cursor.fetchone()[0]


@pytest.fixture
def branch():
    return BranchFactory(code="BLR", name="Bengaluru", time_zone="Asia/Kolkata")


@pytest.fixture
def writer(branch, token_for):
    """A token of a client restricted to BLR only, so branch_id may be omitted."""
    return token_for(["patients:write", "patients:read"], branches=[branch])


# --- Success ----------------------------------------------------------------------------------------


def test_create_returns_201_with_the_full_profile_and_location(client, branch, writer):
    response = post_patient(client, writer, VALID)

    assert response.status_code == 201, response.content
    assert response["Content-Type"] == "application/json"
    patient = Patient.objects.get()
    assert response["Location"] == f"/api/v1/patients/{patient.id}"
    assert patient.patient_id == f"PAT-{last_patient_number():06d}"
    registered_at = response.json()["registered_at"]
    assert registered_at.endswith("+05:30")
    assert registered_at == patient.registered_at.astimezone(ZoneInfo("Asia/Kolkata")).isoformat()
    assert response.json() == {
        "id": str(patient.id),
        "patient_id": patient.patient_id,
        "branch_id": str(branch.id),
        "registered_at": registered_at,
        "demographics": {
            "first_name": "Priya",
            "last_name": "Sharma",
            "name": "Priya Sharma",
            "date_of_birth": "1990-04-12",
            "age": age_today(date(1990, 4, 12)),
            "gender": "female",
            "blood_group": "O+",
            "address": {"line1": "12 MG Road", "city": "Bengaluru", "state": "Karnataka", "pincode": "560001"},
            "contact": {"phone": "+919876543210", "email": "priya.sharma@example.com"},
        },
        "identifiers": {
            "patient_id": patient.patient_id,
            "national_health_id": "91123456789012",
            "national_id_masked": "XXXX-XXXX-6301",
            "insurance": [{"provider": "Star Health", "policy_number": "SH-0042", "valid_until": "2027-03-31"}],
        },
        "medical_summary": {"diagnoses": [], "allergies": [], "medications": []},
        "visit_history": [],
    }


def test_create_stores_normalised_identifiers_and_the_national_id_encrypted(client, branch, writer):
    post_patient(client, writer, VALID)

    patient = Patient.objects.get()
    assert patient.phone == "+919876543210"
    assert patient.national_health_id == "91123456789012"
    assert patient.registration_branch == branch
    assert (patient.address_line1, patient.address_city, patient.address_state, patient.address_pincode) == (
        "12 MG Road",
        "Bengaluru",
        "Karnataka",
        "560001",
    )
    assert AADHAAR not in patient.national_id_encrypted
    assert patient.national_id_encrypted != AADHAAR
    assert len(patient.national_id_hash) == 64
    assert AADHAAR not in patient.national_id_hash
    assert patient.national_id_last4 == "6301"
    assert list(Insurance.objects.values_list("patient_id", "provider", "policy_number", "valid_until")) == [
        (patient.id, "Star Health", "SH-0042", date(2027, 3, 31))
    ]


def test_the_national_id_never_appears_in_a_response_or_audit_row(client, branch, writer):
    created = post_patient(client, writer, VALID)
    patient_id = created.json()["id"]
    fetched = client.get(f"{PATIENTS}/{patient_id}", HTTP_AUTHORIZATION=f"Bearer {writer}")
    listed = client.get(f"{PATIENTS}?search=Priya", HTTP_AUTHORIZATION=f"Bearer {writer}")
    patched = client.patch(
        f"{PATIENTS}/{patient_id}",
        {"national_id": aadhaar("86420975319")},
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {writer}",
    )

    assert [r.status_code for r in (created, fetched, listed, patched)] == [201, 200, 200, 200]
    for response in (created, fetched, listed, patched):
        for secret in (AADHAAR, AADHAAR[:8], "864209753194", "86420975"):
            assert secret.encode() not in response.content
    assert patched.json()["identifiers"]["national_id_masked"] == "XXXX-XXXX-3194"
    rows = list(AuditLogEntry.objects.values())
    assert len(rows) == 5  # token exchange + four patient requests
    for row in rows:
        assert AADHAAR not in repr(row)
        assert "864209753194" not in repr(row)


@pytest.mark.parametrize("phone", ["+91 98765 43210", "9876543210", "+919876543210", "098765-43210"])
def test_phone_is_stored_and_returned_in_e164(client, writer, phone):
    response = post_patient(client, writer, body(phone=phone))

    assert response.status_code == 201, response.content
    assert response.json()["demographics"]["contact"]["phone"] == "+919876543210"
    assert Patient.objects.get().phone == "+919876543210"


def test_minimal_create_has_empty_optional_fields(client, branch, writer):
    response = post_patient(client, writer, MINIMAL)

    assert response.status_code == 201, response.content
    profile = response.json()
    assert profile["demographics"] == {
        "first_name": "Rahul",
        "last_name": "Verma",
        "name": "Rahul Verma",
        "date_of_birth": "1985-11-30",
        "age": age_today(date(1985, 11, 30)),
        "gender": "male",
        "blood_group": None,
        "address": {"line1": "", "city": "", "state": "", "pincode": ""},
        "contact": {"phone": "+919812345678", "email": None},
    }
    assert profile["identifiers"] == {
        "patient_id": profile["patient_id"],
        "national_health_id": None,
        "national_id_masked": None,
        "insurance": [],
    }
    patient = Patient.objects.get()
    assert (patient.national_id_encrypted, patient.national_id_hash, patient.national_id_last4) == ("", "", "")


def test_patient_ids_are_consecutive_from_the_sequence_and_never_reused(client, writer):
    first = post_patient(client, writer, MINIMAL).json()["patient_id"]
    # Patients are never deleted (docs/api-rules.md §7); even rows gone by TRUNCATE (a rebuilt database)
    # do not give their numbers back.
    with connection.cursor() as cursor:
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
        cursor.execute("TRUNCATE patients_patient CASCADE")
    second = post_patient(client, writer, MINIMAL).json()["patient_id"]

    number = last_patient_number()
    assert (first, second) == (f"PAT-{number - 1:06d}", f"PAT-{number:06d}")


# --- Validation ---------------------------------------------------------------------------------------

ALL_BAD: dict[str, Any] = {
    "first_name": "",
    "date_of_birth": "2020-13-01",
    "gender": "x",
    "phone": "12",
    "email": "nope",
    "address": {"line1": "1 Road", "pincode": "0123", "floor": "2"},
    "blood_group": "C+",
    "national_health_id": "9112345678901",
    "national_id": "234567890125",
    "insurance": [{"policy_number": "SH-1"}],
    "nickname": "Pri",
}


def test_every_bad_field_is_named_in_one_response_and_nothing_is_created(client, writer):
    response = post_patient(client, writer, ALL_BAD)

    problem = assert_problem(response, 400, "validation_error")
    assert problem["detail"] == "The request has invalid fields."
    assert sorted(error_fields(response)) == sorted(
        [
            "first_name",
            "last_name",
            "date_of_birth",
            "gender",
            "phone",
            "email",
            "address.pincode",
            "address.floor",
            "blood_group",
            "national_health_id",
            "national_id",
            "insurance.0.provider",
            "nickname",
        ]
    )
    codes = {error["field"]: error["code"] for error in problem["errors"]}
    assert codes["last_name"] == "required"
    assert codes["first_name"] == "blank"
    assert codes["address.floor"] == codes["nickname"] == "unknown_field"
    assert codes["insurance.0.provider"] == "required"
    assert Patient.objects.count() == 0
    assert Insurance.objects.count() == 0


TOMORROW = (date.today() + timedelta(days=2)).isoformat()
INVALID_CASES = [
    ("first_name", {"first_name": ""}, "blank"),
    ("first_name", {"first_name": "a" * 101}, "max_length"),
    ("first_name", {"first_name": None}, "null"),
    ("last_name", {"last_name": "b" * 101}, "max_length"),
    ("date_of_birth", {"date_of_birth": TOMORROW}, "invalid"),
    ("date_of_birth", {"date_of_birth": "1899-12-31"}, "invalid"),
    ("date_of_birth", {"date_of_birth": "2020-13-01"}, "invalid"),
    ("date_of_birth", {"date_of_birth": "01-01-2000"}, "invalid"),
    ("gender", {"gender": "x"}, "invalid_choice"),
    ("gender", {"gender": "Female"}, "invalid_choice"),
    ("phone", {"phone": "12"}, "invalid"),
    ("phone", {"phone": "abc"}, "invalid"),
    ("email", {"email": "nope"}, "invalid"),
    ("address.pincode", {"address": {"pincode": "0123"}}, "invalid"),
    ("address.pincode", {"address": {"pincode": "12345"}}, "invalid"),
    ("address.pincode", {"address": {"pincode": "0123456"}}, "invalid"),
    ("address.pin", {"address": {"city": "Pune", "pin": "411001"}}, "unknown_field"),
    ("blood_group", {"blood_group": "C+"}, "invalid_choice"),
    ("national_health_id", {"national_health_id": "9112345678901"}, "invalid"),
    ("national_health_id", {"national_health_id": "91-1234-5678-901a"}, "invalid"),
    ("national_id", {"national_id": "234567890125"}, "invalid"),
    ("national_id", {"national_id": "23456789012"}, "invalid"),
    ("national_id", {"national_id": "134567890124"}, "invalid"),
    ("insurance.0.provider", {"insurance": [{"policy_number": "SH-1"}]}, "required"),
    (
        "insurance.1.policy_number",
        {"insurance": [{"provider": "A", "policy_number": "1"}, {"provider": "B"}]},
        "required",
    ),
    ("favourite_colour", {"favourite_colour": "blue"}, "unknown_field"),
]


@pytest.mark.parametrize(
    ("field", "change", "code"), INVALID_CASES, ids=[f"{f}-{i}" for i, (f, _, _) in enumerate(INVALID_CASES)]
)
def test_an_invalid_field_is_a_400_naming_it_and_creates_nothing(client, writer, field, change, code):
    response = post_patient(client, writer, body(**change))

    problem = assert_problem(response, 400, "validation_error")
    assert [(e["field"], e["code"]) for e in problem["errors"]] == [(field, code)]
    assert problem["errors"][0]["message"]
    assert Patient.objects.count() == 0
    assert Insurance.objects.count() == 0


@pytest.mark.parametrize("missing", ["first_name", "last_name", "date_of_birth", "gender", "phone"])
def test_a_missing_required_field_is_named(client, writer, missing):
    data = {k: v for k, v in MINIMAL.items() if k != missing}

    response = post_patient(client, writer, data)

    assert [(e["field"], e["code"]) for e in assert_problem(response, 400, "validation_error")["errors"]] == [
        (missing, "required")
    ]
    assert Patient.objects.count() == 0


def test_date_of_birth_messages_say_what_is_wrong(client, writer):
    future = post_patient(client, writer, body(date_of_birth=TOMORROW)).json()["errors"][0]["message"]
    early = post_patient(client, writer, body(date_of_birth="1899-12-31")).json()["errors"][0]["message"]

    assert future == "The date of birth cannot be in the future."
    assert early == "The date of birth cannot be before 1900-01-01."


@pytest.mark.parametrize("born", ["1900-01-01", "today"])
def test_date_of_birth_bounds_are_inclusive(client, writer, born):
    value = timezone.localdate().isoformat() if born == "today" else born

    response = post_patient(client, writer, body(date_of_birth=value))

    assert response.status_code == 201, response.content
    assert Patient.objects.get().date_of_birth.isoformat() == value


def test_a_body_that_is_not_an_object_is_a_400(client, writer):
    response = post_patient(client, writer, [VALID])

    assert_problem(response, 400, "validation_error")
    assert Patient.objects.count() == 0


def test_an_abha_number_already_registered_is_a_400_on_national_health_id(client, writer):
    assert post_patient(client, writer, VALID).status_code == 201

    response = post_patient(client, writer, body(phone="+919800011122", first_name="Other"))

    problem = assert_problem(response, 400, "validation_error")
    assert [(e["field"], e["code"]) for e in problem["errors"]] == [("national_health_id", "invalid")]
    assert Patient.objects.count() == 1


# --- Registration branch ---------------------------------------------------------------------------


def test_branch_id_omitted_for_a_client_with_one_branch_registers_there(client, branch, writer):
    response = post_patient(client, writer, MINIMAL)

    assert response.status_code == 201
    assert response.json()["branch_id"] == str(branch.id)
    assert Patient.objects.get().registration_branch == branch


def test_branch_id_omitted_for_an_unrestricted_client_is_a_400(client, branch, token_for):
    response = post_patient(client, token_for(["patients:write"]), MINIMAL)

    problem = assert_problem(response, 400, "validation_error")
    assert [(e["field"], e["code"]) for e in problem["errors"]] == [("branch_id", "invalid")]
    assert Patient.objects.count() == 0


def test_branch_id_omitted_for_a_client_with_two_branches_is_a_400(client, branch, token_for):
    token = token_for(["patients:write"], branches=[branch, BranchFactory(code="MYS")])

    response = post_patient(client, token, MINIMAL)

    assert error_fields(response) == ["branch_id"]
    assert Patient.objects.count() == 0


def test_an_unrestricted_client_registers_at_the_branch_it_names(client, branch, token_for):
    other = BranchFactory(code="MUM", state="Maharashtra")

    response = post_patient(client, token_for(["patients:write"]), {**MINIMAL, "branch_id": str(other.id)})

    assert response.status_code == 201, response.content
    assert response.json()["branch_id"] == str(other.id)
    assert Patient.objects.get().registration_branch == other


def test_a_branch_the_client_may_not_use_is_a_400_on_branch_id(client, branch, writer):
    other = BranchFactory(code="MUM", state="Maharashtra")

    response = post_patient(client, writer, {**MINIMAL, "branch_id": str(other.id)})

    assert error_fields(response) == ["branch_id"]
    assert Patient.objects.count() == 0


@pytest.mark.parametrize("branch_id", ["3f1f0c3e-8a1b-4c55-9d8e-0a6f2b7c9d10", "not-a-uuid"])
def test_an_unknown_or_malformed_branch_id_is_a_400(client, branch, token_for, branch_id):
    response = post_patient(client, token_for(["patients:write"]), {**MINIMAL, "branch_id": branch_id})

    assert error_fields(response) == ["branch_id"]
    assert Patient.objects.count() == 0


def test_an_inactive_branch_is_a_400(client, token_for):
    closed = BranchFactory(code="OLD", is_active=False)

    response = post_patient(client, token_for(["patients:write"]), {**MINIMAL, "branch_id": str(closed.id)})

    assert error_fields(response) == ["branch_id"]
    assert Patient.objects.count() == 0


# --- Scope ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("scopes", [["patients:read"], ["appointments:write", "billing:write"]], ids=" ".join)
def test_a_token_without_patients_write_is_403_and_creates_nothing(client, branch, token_for, scopes):
    response = post_patient(client, token_for(scopes, branches=[branch]), VALID)

    problem = assert_problem(response, 403, "insufficient_scope")
    assert problem["detail"] == "This operation requires the scope patients:write."
    assert (
        response["WWW-Authenticate"] == 'Bearer realm="clinic-api", error="insufficient_scope", scope="patients:write"'
    )
    assert Patient.objects.count() == 0


def test_without_a_token_create_is_401_and_creates_nothing(client, branch):
    response = client.post(PATIENTS, VALID, content_type="application/json")

    assert response.status_code == 401
    assert response.json()["code"] == "not_authenticated"
    assert Patient.objects.count() == 0


# --- Idempotency-Key ------------------------------------------------------------------------------------


def test_a_replayed_create_returns_the_same_body_and_creates_one_patient(client, writer):
    first = post_patient(client, writer, VALID, key="register-priya-1")
    second = post_patient(client, writer, VALID, key="register-priya-1")

    assert (first.status_code, second.status_code) == (201, 201)
    assert not first.has_header("Idempotent-Replayed")
    assert second["Idempotent-Replayed"] == "true"
    assert second.json() == first.json()
    assert second["Location"] == first["Location"]
    assert Patient.objects.count() == 1
    assert Insurance.objects.count() == 1


def test_the_same_key_with_another_body_is_422_and_creates_nothing_more(client, writer):
    assert post_patient(client, writer, VALID, key="k-1").status_code == 201

    response = post_patient(client, writer, body(first_name="Priyanka"), key="k-1")

    assert_problem(response, 422, "idempotency_key_reused")
    assert list(Patient.objects.values_list("first_name", flat=True)) == ["Priya"]


def test_a_duplicate_outcome_is_replayed_too(client, writer):
    original = post_patient(client, writer, VALID).json()
    first = post_patient(client, writer, body(first_name="Priyaa"), key="dup-1")
    Patient.objects.filter(id=original["id"]).update(is_active=False)  # would no longer block a new request
    second = post_patient(client, writer, body(first_name="Priyaa"), key="dup-1")

    assert (first.status_code, second.status_code) == (409, 409)
    assert first.json()["code"] == "duplicate_patient"
    assert second["Idempotent-Replayed"] == "true"
    assert second.json() == first.json()
    assert Patient.objects.count() == 1


def test_a_validation_failure_is_replayed_and_never_creates(client, writer):
    first = post_patient(client, writer, body(gender="x"), key="bad-1")
    second = post_patient(client, writer, body(gender="x"), key="bad-1")

    assert (first.status_code, second.status_code) == (400, 400)
    assert second["Idempotent-Replayed"] == "true"
    assert second.json() == first.json()
    assert Patient.objects.count() == 0
