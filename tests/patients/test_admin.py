"""Registering and editing patients in the admin goes through the patient services: the business id
comes from the sequence, the duplicate rule refuses a second registration (a form error, nothing saved),
the Aadhaar number is stored encrypted and kept when the field is left empty, and inlines attach."""

from __future__ import annotations

import re

import pytest

from patients.models import Insurance, Patient
from tests.factories import BranchFactory
from tests.patients.factories import PatientFactory

pytestmark = pytest.mark.django_db
ADD = "/admin/patients/patient/add/"
INLINES = ("insurance", "diagnoses", "allergies", "medications", "visits")


def management(prefix_counts: dict[str, int] | None = None) -> dict[str, str]:
    data = {}
    for prefix in INLINES:
        data[f"{prefix}-TOTAL_FORMS"] = str((prefix_counts or {}).get(prefix, 0))
        data[f"{prefix}-INITIAL_FORMS"] = "0"
    return data


def form(branch, **overrides) -> dict[str, str]:
    data = {
        "first_name": "Priya",
        "last_name": "Sharma",
        "date_of_birth": "1990-04-12",
        "gender": "female",
        "blood_group": "",
        "is_active": "on",
        "phone": "98765 43210",
        "email": "priya@example.com",
        "address_line1": "12 MG Road",
        "address_city": "Bengaluru",
        "address_state": "Karnataka",
        "address_pincode": "560001",
        "registration_branch": str(branch.pk),
        "national_health_id": "",
        "national_id": "",
        **management(),
    }
    data.update(overrides)
    return data


def inline_prefixes(admin_client) -> set[str]:
    page = admin_client.get(ADD).content.decode()
    return set(re.findall(r'name="([a-z_]+)-TOTAL_FORMS"', page))


def test_the_inline_prefixes_are_the_ones_this_test_posts(admin_client):
    assert inline_prefixes(admin_client) == set(INLINES)


def test_registering_in_the_admin_assigns_the_next_patient_id_and_encrypts_the_aadhaar(admin_client):
    branch = BranchFactory()
    response = admin_client.post(ADD, form(branch, national_id="2345 6789 0124"))

    assert response.status_code == 302, response.content[:2000]
    patient = Patient.objects.get()
    assert re.fullmatch(r"PAT-\d{6}", patient.patient_id)
    assert (patient.phone, patient.address_city, patient.registration_branch) == ("+919876543210", "Bengaluru", branch)
    assert patient.national_id_last4 == "0124"
    assert "234567890124" not in patient.national_id_encrypted


def test_a_second_registration_of_the_same_person_is_a_form_error_and_saves_nothing(admin_client):
    branch = BranchFactory()
    existing = PatientFactory(phone="+919876543210", date_of_birth="1990-04-12", registration_branch=branch)

    response = admin_client.post(ADD, form(branch))

    assert response.status_code == 200
    assert f"{existing.patient_id} already has this phone number and date of birth." in response.content.decode()
    assert Patient.objects.count() == 1


def test_editing_keeps_the_patient_id_and_the_stored_aadhaar_and_saves_inlines(admin_client):
    branch = BranchFactory()
    admin_client.post(ADD, form(branch, national_id="2345 6789 0124"))
    patient = Patient.objects.get()
    encrypted = patient.national_id_encrypted

    data = form(
        branch,
        first_name="Priyanka",
        **{
            **management({"insurance": 1}),
            "insurance-0-provider": "Star Health",
            "insurance-0-policy_number": "SH-1",
            "insurance-0-valid_until": "",
        },
    )
    response = admin_client.post(f"/admin/patients/patient/{patient.pk}/change/", data)

    assert response.status_code == 302, response.content[:2000]
    patient.refresh_from_db()
    assert (patient.first_name, patient.national_id_encrypted) == ("Priyanka", encrypted)
    assert list(Insurance.objects.filter(patient=patient).values_list("provider", "policy_number")) == [
        ("Star Health", "SH-1")
    ]


def test_a_legacy_state_is_shown_as_stored_and_must_be_replaced_before_saving(admin_client):
    branch = BranchFactory()
    admin_client.post(ADD, form(branch))
    patient = Patient.objects.get()
    Patient.objects.filter(pk=patient.pk).update(address_state="Karnatka")  # from before the closed list
    change = f"/admin/patients/patient/{patient.pk}/change/"

    page = admin_client.get(change).content.decode()
    kept = admin_client.post(change, form(branch, first_name="Priyanka", address_state="Karnatka"))
    fixed = admin_client.post(change, form(branch, first_name="Priyanka", address_state="Karnataka"))

    assert '<option value="Karnatka" selected>Karnatka (not a known state: choose one)</option>' in page
    assert kept.status_code == 200  # the form again, with its error: nothing saved
    assert "address_state" in kept.context["adminform"].form.errors
    assert fixed.status_code == 302
    patient.refresh_from_db()
    assert (patient.first_name, patient.address_state) == ("Priyanka", "Karnataka")
