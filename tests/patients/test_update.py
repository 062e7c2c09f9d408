"""PATCH /api/v1/patients/{id}: partial updates, validation, the duplicate rule, branch visibility."""

from __future__ import annotations

from datetime import date
from typing import Any

import pytest
from django.forms.models import model_to_dict

from integrations.models import AuditLogEntry
from patients.models import Insurance, Patient
from tests.factories import BranchFactory
from tests.patients.factories import InsuranceFactory, PatientFactory, aadhaar, get_patient, patch_patient

pytestmark = pytest.mark.django_db


@pytest.fixture
def branch():
    return BranchFactory(code="BLR")


@pytest.fixture
def token(branch, token_for):
    return token_for(["patients:write", "patients:read"], branches=[branch])


@pytest.fixture
def patient(branch):
    patient = PatientFactory(
        first_name="Suresh",
        last_name="Iyer",
        date_of_birth=date(1970, 2, 3),
        gender="male",
        phone="+919845000111",
        email="suresh@example.com",
        address_line1="4 Temple Street",
        address_city="Mysuru",
        address_state="Karnataka",
        address_pincode="570001",
        blood_group="B+",
        national_health_id="12345678901234",
        registration_branch=branch,
        national_id=aadhaar("52739184630"),
    )
    InsuranceFactory(patient=patient, provider="Niva Bupa", policy_number="NB-1", valid_until=date(2026, 12, 31))
    return patient


def snapshot(patient: Patient) -> dict[str, Any]:
    """Every stored column of the patient and its insurance rows."""
    fresh = Patient.objects.get(pk=patient.pk)
    row = model_to_dict(fresh, exclude=[])
    row.update(
        {
            field: getattr(fresh, field)
            for field in (
                "patient_id",
                "search_name",
                "phone_digits_reversed",
                "national_id_encrypted",
                "national_id_hash",
                "national_id_last4",
                "registered_at",
                "updated_at",
            )
        }
    )
    row["insurance"] = list(fresh.insurance.values_list("provider", "policy_number", "valid_until"))
    return row


def test_a_partial_update_changes_only_the_fields_sent(client, token, patient):
    before = snapshot(patient)

    response = patch_patient(client, token, str(patient.id), {"first_name": "Sureshkumar", "blood_group": "AB-"})

    assert response.status_code == 200, response.content
    after = snapshot(patient)
    assert (after["first_name"], after["blood_group"], after["search_name"]) == (
        "Sureshkumar",
        "AB-",
        "sureshkumar iyer",
    )
    unchanged = {k: v for k, v in before.items() if k not in {"first_name", "blood_group", "search_name", "updated_at"}}
    assert {k: after[k] for k in unchanged} == unchanged
    assert after["updated_at"] > before["updated_at"]


def test_sending_only_address_city_keeps_the_other_address_keys(client, token, patient):
    response = patch_patient(client, token, str(patient.id), {"address": {"city": "Bengaluru"}})

    assert response.status_code == 200, response.content
    assert response.json()["demographics"]["address"] == {
        "line1": "4 Temple Street",
        "city": "Bengaluru",
        "state": "Karnataka",
        "pincode": "570001",
    }
    fresh = Patient.objects.get(pk=patient.pk)
    assert (fresh.address_line1, fresh.address_city, fresh.address_state, fresh.address_pincode) == (
        "4 Temple Street",
        "Bengaluru",
        "Karnataka",
        "570001",
    )


def test_insurance_when_sent_replaces_the_list(client, token, patient):
    new = [
        {"provider": "Star Health", "policy_number": "SH-9", "valid_until": "2028-01-31"},
        {"provider": "HDFC Ergo", "policy_number": "HE-2"},
    ]

    response = patch_patient(client, token, str(patient.id), {"insurance": new})

    assert response.status_code == 200, response.content
    assert response.json()["identifiers"]["insurance"] == [
        {"provider": "HDFC Ergo", "policy_number": "HE-2", "valid_until": None},
        {"provider": "Star Health", "policy_number": "SH-9", "valid_until": "2028-01-31"},
    ]
    assert sorted(
        Insurance.objects.filter(patient=patient).values_list("provider", "policy_number", "valid_until")
    ) == [
        ("HDFC Ergo", "HE-2", None),
        ("Star Health", "SH-9", date(2028, 1, 31)),
    ]


def test_an_empty_insurance_list_removes_all_policies(client, token, patient):
    response = patch_patient(client, token, str(patient.id), {"insurance": []})

    assert response.status_code == 200
    assert response.json()["identifiers"]["insurance"] == []
    assert Insurance.objects.count() == 0


def test_insurance_not_sent_stays(client, token, patient):
    patch_patient(client, token, str(patient.id), {"last_name": "Iyengar"})

    assert list(Insurance.objects.values_list("provider", "policy_number")) == [("Niva Bupa", "NB-1")]


def test_phone_is_normalised_and_the_national_id_replaced_encrypted(client, token, patient):
    new_id = aadhaar("86420975319")
    before = snapshot(patient)

    response = patch_patient(client, token, str(patient.id), {"phone": "98450 22233", "national_id": new_id})

    assert response.status_code == 200, response.content
    assert response.json()["demographics"]["contact"]["phone"] == "+919845022233"
    assert response.json()["identifiers"]["national_id_masked"] == f"XXXX-XXXX-{new_id[-4:]}"
    after = snapshot(patient)
    assert (after["phone"], after["phone_digits_reversed"]) == ("+919845022233", "332220548919")
    assert after["national_id_hash"] != before["national_id_hash"]
    assert new_id not in after["national_id_encrypted"]
    assert new_id.encode() not in response.content


def test_national_id_null_clears_it(client, token, patient):
    response = patch_patient(client, token, str(patient.id), {"national_id": None})

    assert response.status_code == 200
    assert response.json()["identifiers"]["national_id_masked"] is None
    fresh = Patient.objects.get(pk=patient.pk)
    assert (fresh.national_id_encrypted, fresh.national_id_hash, fresh.national_id_last4) == ("", "", "")


@pytest.mark.parametrize(
    "ref", ["uuid", "patient_id", "lower", "no-hyphen"], ids=["uuid", "patient_id", "lower-case", "without-hyphen"]
)
def test_the_patient_is_addressed_by_uuid_or_patient_id_in_any_case(client, token, patient, ref):
    refs = {
        "uuid": str(patient.id),
        "patient_id": patient.patient_id,
        "lower": patient.patient_id.lower(),
        "no-hyphen": patient.patient_id.replace("-", "").lower(),
    }

    response = patch_patient(client, token, refs[ref], {"gender": "other"})

    assert response.status_code == 200, response.content
    assert response.json()["id"] == str(patient.id)
    assert Patient.objects.get(pk=patient.pk).gender == "other"


def test_lower_case_pat_000001_finds_that_patient(client, token, branch):
    target = PatientFactory(patient_id="PAT-000001", registration_branch=branch)

    response = patch_patient(client, token, "pat-000001", {"email": "new@example.com"})

    assert response.status_code == 200, response.content
    assert response.json()["patient_id"] == "PAT-000001"
    assert Patient.objects.get(pk=target.pk).email == "new@example.com"


def test_the_200_body_is_what_a_following_get_returns(client, token, patient):
    patched = patch_patient(
        client, token, patient.patient_id, {"last_name": "Subramanian", "address": {"pincode": "560034"}}
    )
    fetched = get_patient(client, token, str(patient.id))

    assert patched.status_code == 200
    assert patched.json() == fetched.json()
    assert patched.json()["demographics"]["name"] == "Suresh Subramanian"


INVALID = [
    ("first_name", {"first_name": ""}),
    ("first_name", {"first_name": "x" * 101}),
    ("last_name", {"last_name": None}),
    ("date_of_birth", {"date_of_birth": "2999-01-01"}),
    ("date_of_birth", {"date_of_birth": "1899-12-31"}),
    ("date_of_birth", {"date_of_birth": "01-01-2000"}),
    ("gender", {"gender": "x"}),
    ("phone", {"phone": "12"}),
    ("email", {"email": "nope"}),
    ("address.pincode", {"address": {"pincode": "12345"}}),
    ("address.town", {"address": {"town": "Hassan"}}),
    ("blood_group", {"blood_group": "C+"}),
    ("national_health_id", {"national_health_id": "1234567890123"}),
    ("national_id", {"national_id": "527391846302"}),
    ("insurance.0.provider", {"insurance": [{"policy_number": "X"}]}),
    ("branch_id", {"branch_id": "not-a-uuid"}),
    ("patient_id", {"patient_id": "PAT-999999"}),
]


@pytest.mark.parametrize(("field", "change"), INVALID, ids=[f"{f}-{i}" for i, (f, _) in enumerate(INVALID)])
def test_an_invalid_field_is_a_400_naming_it_and_changes_nothing(client, token, patient, field, change):
    before = snapshot(patient)

    response = patch_patient(client, token, str(patient.id), {"first_name": "Changed", **change})

    assert response.status_code == 400, response.content
    assert [e["field"] for e in response.json()["errors"]] == [field]
    assert snapshot(patient) == before


def test_an_incomplete_insurance_entry_is_a_400_even_in_a_patch(client, token, patient):
    """A sent list replaces the stored one, so each entry needs provider and policy_number (was a 500)."""
    before = snapshot(patient)

    response = patch_patient(client, token, str(patient.id), {"insurance": [{"valid_until": "2030-01-01"}]})

    assert response.status_code == 400, response.content
    assert [(e["field"], e["code"]) for e in response.json()["errors"]] == [
        ("insurance.0.provider", "required"),
        ("insurance.0.policy_number", "required"),
    ]
    assert snapshot(patient) == before


def test_a_branch_the_client_may_not_use_is_a_400_and_changes_nothing(client, token, patient):
    before = snapshot(patient)
    other = BranchFactory(code="MUM", state="Maharashtra")

    response = patch_patient(client, token, str(patient.id), {"branch_id": str(other.id)})

    assert response.status_code == 400
    assert [e["field"] for e in response.json()["errors"]] == ["branch_id"]
    assert snapshot(patient) == before


def test_moving_onto_another_active_patients_phone_and_birth_date_is_409_and_changes_nothing(
    client, token, patient, branch
):
    other = PatientFactory(phone="+919845999888", date_of_birth=date(1970, 2, 3), registration_branch=branch)
    before = snapshot(patient)

    response = patch_patient(client, token, str(patient.id), {"phone": "+91 98459 99888", "first_name": "X"})

    assert response.status_code == 409
    body = response.json()
    assert (body["code"], body["existing_patient_id"], body["existing_id"]) == (
        "duplicate_patient",
        other.patient_id,
        str(other.id),
    )
    assert snapshot(patient) == before


def test_changing_the_birth_date_onto_another_patients_pair_is_409(client, token, patient, branch):
    other = PatientFactory(phone="+919845000111", date_of_birth=date(1971, 1, 1), registration_branch=branch)
    before = snapshot(patient)

    response = patch_patient(client, token, str(patient.id), {"date_of_birth": "1971-01-01"})

    assert response.status_code == 409
    assert response.json()["existing_id"] == str(other.id)
    assert snapshot(patient) == before


def test_resending_the_patients_own_phone_and_birth_date_is_no_duplicate(client, token, patient):
    response = patch_patient(client, token, str(patient.id), {"phone": "+919845000111", "date_of_birth": "1970-02-03"})

    assert response.status_code == 200, response.content


def test_an_inactive_patient_with_the_new_pair_does_not_block(client, token, patient, branch):
    PatientFactory(phone="+919845999888", date_of_birth=date(1970, 2, 3), registration_branch=branch, is_active=False)

    response = patch_patient(client, token, str(patient.id), {"phone": "+919845999888"})

    assert response.status_code == 200, response.content
    assert Patient.objects.get(pk=patient.pk).phone == "+919845999888"


def test_an_abha_number_of_another_patient_is_a_400_and_changes_nothing(client, token, patient, branch):
    PatientFactory(national_health_id="99999999999999", registration_branch=branch)
    before = snapshot(patient)

    response = patch_patient(client, token, str(patient.id), {"national_health_id": "9999-9999-9999-99"})

    assert response.status_code == 400, response.content
    assert [e["field"] for e in response.json()["errors"]] == ["national_health_id"]
    assert snapshot(patient) == before


@pytest.mark.parametrize("ref", ["PAT-999999", "3f1f0c3e-8a1b-4c55-9d8e-0a6f2b7c9d10", "nothing"])
def test_an_unknown_patient_is_404(client, token, patient, ref):
    response = patch_patient(client, token, ref, {"first_name": "Ghost"})

    assert response.status_code == 404
    assert response["Content-Type"] == "application/problem+json"
    assert response.json() == {
        "type": "/api/v1/problems/not_found",
        "title": "Not found",
        "status": 404,
        "detail": f"No patient {ref!r}.",
        "code": "not_found",
        "request_id": response["X-Request-ID"],
    }
    assert Patient.objects.filter(first_name="Ghost").count() == 0


def test_a_patient_of_another_branch_is_404_for_a_restricted_client_and_unchanged(client, token):
    elsewhere = PatientFactory(registration_branch=BranchFactory(code="MUM"), first_name="Meera")
    before = snapshot(elsewhere)

    by_uuid = patch_patient(client, token, str(elsewhere.id), {"first_name": "Hacked"})
    by_business_id = patch_patient(client, token, elsewhere.patient_id, {"first_name": "Hacked"})

    assert (by_uuid.status_code, by_business_id.status_code) == (404, 404)
    assert by_uuid.json()["detail"] == f"No patient {str(elsewhere.id)!r}."
    assert snapshot(elsewhere) == before


def test_without_patients_write_patch_is_403_and_changes_nothing(client, branch, patient, token_for):
    before = snapshot(patient)

    response = patch_patient(
        client, token_for(["patients:read"], branches=[branch]), str(patient.id), {"first_name": "X"}
    )

    assert response.status_code == 403
    assert response.json()["code"] == "insufficient_scope"
    assert snapshot(patient) == before


def test_patch_records_the_patient_in_the_audit_row(client, token, patient):
    response = patch_patient(client, token, str(patient.id), {"first_name": "Audited"})

    row = AuditLogEntry.objects.get(request_id=response["X-Request-ID"])
    assert (row.method, row.status, row.patient_ids) == ("PATCH", 200, [patient.id])


def test_a_replayed_patch_returns_the_same_body_and_applies_once(client, token, patient):
    first = patch_patient(client, token, str(patient.id), {"last_name": "Rao"}, key="rename-1")
    Patient.objects.filter(pk=patient.pk).update(last_name="Changed meanwhile")
    second = patch_patient(client, token, str(patient.id), {"last_name": "Rao"}, key="rename-1")

    assert (first.status_code, second.status_code) == (200, 200)
    assert second["Idempotent-Replayed"] == "true"
    assert second.json() == first.json()
    assert Patient.objects.get(pk=patient.pk).last_name == "Changed meanwhile"
