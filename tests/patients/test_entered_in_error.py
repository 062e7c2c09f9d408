"""A clinical record entered in error is marked, never deleted (docs/api-rules.md §7): who, when and why,
all or nothing (a database constraint); it leaves the API profile and the list's last visit, and staff
still read it in the admin, read-only, with its history. Changes staff make in the admin are history rows
with old and new values, the national ID masked."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.db import IntegrityError, transaction

from clinic.errors import Conflict, FieldError
from clinic.models import RecordChange
from clinic.records import clinical_record_mark_entered_in_error, record_history
from patients.models import Diagnosis, Visit
from tests.patients.factories import (
    PATIENTS,
    AllergyFactory,
    DiagnosisFactory,
    MedicationFactory,
    PatientFactory,
    VisitFactory,
    get_patient,
)
from tests.patients.test_admin import form as patient_form
from tests.patients.test_admin import management

pytestmark = pytest.mark.django_db


@pytest.fixture
def patient(branch):
    return PatientFactory(registration_branch=branch)


def test_a_diagnosis_marked_entered_in_error_leaves_the_api_profile(client, reader, patient):
    kept = DiagnosisFactory(patient=patient, code="E11.9", description="Type 2 diabetes mellitus")
    wrong = DiagnosisFactory(patient=patient, code="I10", description="Essential hypertension")
    before = get_patient(client, reader, patient.patient_id).json()["medical_summary"]["diagnoses"]
    assert sorted(d["code"] for d in before) == ["E11.9", "I10"]

    marked = clinical_record_mark_entered_in_error(record=wrong, by="staff:asha", reason="Wrong patient")

    body = get_patient(client, reader, patient.patient_id).json()
    assert body["medical_summary"]["diagnoses"] == [
        {
            "code": kept.code,
            "system": "ICD-10",
            "description": kept.description,
            "onset_date": None,
            "status": "active",
        }
    ]
    assert marked.entered_in_error
    assert marked.entered_in_error_by == "staff:asha"
    assert marked.entered_in_error_reason == "Wrong patient"
    assert marked.entered_in_error_at is not None
    history = list(record_history(wrong).values_list("action", "actor", "reason", "changes"))
    assert history == [("entered_in_error", "staff:asha", "Wrong patient", {"entered_in_error": [False, True]})]


def test_allergies_medications_and_visits_entered_in_error_leave_the_profile_and_the_last_visit(
    client, reader, patient
):
    AllergyFactory(patient=patient, substance="Penicillin")
    MedicationFactory(patient=patient, name="Metformin")
    early = VisitFactory(patient=patient, start=datetime(2025, 1, 10, 5, 0, tzinfo=UTC))
    late = VisitFactory(patient=patient, start=datetime(2025, 3, 10, 5, 0, tzinfo=UTC))
    for record in (patient.allergies.get(), patient.medications.get(), late):
        clinical_record_mark_entered_in_error(record=record, by="staff:asha", reason="Duplicate entry")

    body = get_patient(client, reader, patient.patient_id).json()
    listed = client.get(PATIENTS, HTTP_AUTHORIZATION=f"Bearer {reader}").json()

    assert body["medical_summary"]["allergies"] == []
    assert body["medical_summary"]["medications"] == []
    assert [visit["id"] for visit in body["visit_history"]] == [str(early.id)]
    assert [row["last_visit_date"] for row in listed] == ["2025-01-10"]


def test_marking_needs_a_reason_and_happens_once(patient):
    diagnosis = DiagnosisFactory(patient=patient)

    with pytest.raises(FieldError):
        clinical_record_mark_entered_in_error(record=diagnosis, by="staff:asha", reason="   ")
    diagnosis.refresh_from_db()
    assert not diagnosis.entered_in_error

    clinical_record_mark_entered_in_error(record=diagnosis, by="staff:asha", reason="Typo")
    with pytest.raises(Conflict):
        clinical_record_mark_entered_in_error(record=diagnosis, by="staff:ravi", reason="Again")

    diagnosis.refresh_from_db()
    assert (diagnosis.entered_in_error_by, diagnosis.entered_in_error_reason) == ("staff:asha", "Typo")
    assert record_history(diagnosis).count() == 1


@pytest.mark.parametrize(
    "fields",
    [
        {"entered_in_error": True},  # without who, when and why
        {"entered_in_error": True, "entered_in_error_by": "staff:asha", "entered_in_error_reason": " "},
        {"entered_in_error_reason": "a reason on an unmarked row"},
    ],
)
def test_the_database_refuses_an_incomplete_marker(patient, fields):
    diagnosis = DiagnosisFactory(patient=patient)
    if fields.get("entered_in_error"):
        fields = {"entered_in_error_at": datetime(2025, 1, 1, tzinfo=UTC), **fields}

    with pytest.raises(IntegrityError), transaction.atomic():
        Diagnosis.objects.filter(pk=diagnosis.pk).update(**fields)

    assert Diagnosis.objects.filter(pk=diagnosis.pk, entered_in_error=False, entered_in_error_reason="").exists()


# --- the admin ---------------------------------------------------------------------------------------


def test_the_admin_action_asks_for_a_reason_then_marks(admin_client, patient):
    diagnosis = DiagnosisFactory(patient=patient)
    url = "/admin/patients/diagnosis/"
    chosen = {"action": "mark_entered_in_error", "_selected_action": [str(diagnosis.pk)]}

    asked = admin_client.post(url, chosen)
    assert asked.status_code == 200
    assert 'name="reason"' in asked.content.decode()
    diagnosis.refresh_from_db()
    assert not diagnosis.entered_in_error

    done = admin_client.post(url, {**chosen, "confirm": "yes", "reason": "Entered on the wrong patient"})

    assert done.status_code == 302
    diagnosis.refresh_from_db()
    assert diagnosis.entered_in_error
    assert (diagnosis.entered_in_error_by, diagnosis.entered_in_error_reason) == (
        "staff:admin",
        "Entered on the wrong patient",
    )


def test_staff_still_see_a_marked_record_read_only_with_its_marker(admin_client, patient):
    diagnosis = DiagnosisFactory(patient=patient, description="Essential hypertension")
    clinical_record_mark_entered_in_error(record=diagnosis, by="staff:asha", reason="Wrong patient")

    patient_page = admin_client.get(f"/admin/patients/patient/{patient.pk}/change/").content.decode()
    own_page = admin_client.get(f"/admin/patients/diagnosis/{diagnosis.pk}/change/").content.decode()
    listed = admin_client.get("/admin/patients/diagnosis/?entered_in_error__exact=1").content.decode()

    assert "ENTERED IN ERROR (staff:asha" in patient_page
    assert "Wrong patient" in patient_page
    assert 'name="diagnoses-0-description"' in patient_page
    assert "disabled" in patient_page
    assert "Essential hypertension" in own_page
    assert 'name="description"' not in own_page
    assert "Wrong patient" in own_page
    assert str(diagnosis.pk) in listed


def test_editing_a_diagnosis_in_the_admin_records_old_and_new_values_and_the_user(admin_client, patient):
    diagnosis = DiagnosisFactory(patient=patient, code="E11.9", description="Type 2 diabetes mellitus")

    response = admin_client.post(
        f"/admin/patients/diagnosis/{diagnosis.pk}/change/",
        {
            "patient": str(patient.pk),
            "code": "E11.65",
            "system": "ICD-10",
            "description": "Type 2 diabetes mellitus with hyperglycaemia",
            "onset_date": "",
            "status": "active",
        },
    )

    assert response.status_code == 302, response.content
    (change,) = record_history(diagnosis)
    assert (change.actor, change.action, change.patient_id) == ("staff:admin", "changed", patient.pk)
    assert change.changes == {
        "code": ["E11.9", "E11.65"],
        "description": ["Type 2 diabetes mellitus", "Type 2 diabetes mellitus with hyperglycaemia"],
    }


def test_editing_a_diagnosis_inline_on_the_patient_page_is_recorded(admin_client, branch):
    patient = PatientFactory(
        registration_branch=branch, first_name="Priya", last_name="Sharma", phone="+919876543210", email=""
    )
    diagnosis = DiagnosisFactory(patient=patient, code="E11.9")
    data = patient_form(branch, email="priya@example.com", **management())
    data.update(
        {
            "diagnoses-TOTAL_FORMS": "1",
            "diagnoses-INITIAL_FORMS": "1",
            "diagnoses-0-id": str(diagnosis.pk),
            "diagnoses-0-patient": str(patient.pk),
            "diagnoses-0-code": "E10.9",
            "diagnoses-0-system": "ICD-10",
            "diagnoses-0-description": diagnosis.description,
            "diagnoses-0-onset_date": "",
            "diagnoses-0-status": "active",
            "national_id": "234567890124",
        }
    )

    response = admin_client.post(f"/admin/patients/patient/{patient.pk}/change/", data)

    assert response.status_code == 302, response.content
    (diagnosis_change,) = record_history(diagnosis)
    assert diagnosis_change.changes == {"code": ["E11.9", "E10.9"]}
    (patient_change,) = record_history(patient)
    assert patient_change.actor == "staff:admin"
    assert patient_change.changes["national_id"] == [None, "XXXX-XXXX-0124"]
    assert "234567890124" not in str(RecordChange.objects.values_list("changes", flat=True))
    assert Visit.objects.count() == 0
