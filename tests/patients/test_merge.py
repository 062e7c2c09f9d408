"""Patients are deactivated or merged, never deleted (docs/api-rules.md §7). A merge moves nothing: the
duplicate keeps its rows, is deactivated and points at the survivor; the survivor's profile includes
the duplicate's clinical records, and the API resolves the duplicate's ids to the survivor. Both are
admin actions asking for a reason, recorded in the history."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.db import IntegrityError, transaction

from clinic.errors import Conflict, FieldError
from clinic.records import record_history
from patients import services
from patients.models import Patient
from tests.factories import BranchFactory
from tests.patients.factories import (
    PATIENTS,
    DiagnosisFactory,
    PatientFactory,
    VisitFactory,
    get_patient,
    patch_patient,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def survivor(branch):
    return PatientFactory(registration_branch=branch, first_name="Kavya", last_name="Menon")


@pytest.fixture
def duplicate(branch):
    return PatientFactory(registration_branch=branch, first_name="Kavya", last_name="Menon")


def test_a_merged_patient_keeps_its_rows_and_points_at_the_survivor(survivor, duplicate):
    diagnosis = DiagnosisFactory(patient=duplicate, code="I10")

    result = services.patient_merge(source=duplicate, target=survivor, by="staff:asha", reason="Registered twice")

    duplicate.refresh_from_db()
    assert result.pk == survivor.pk
    assert (duplicate.merged_into_id, duplicate.is_active) == (survivor.pk, False)
    assert duplicate.merged_at is not None
    diagnosis.refresh_from_db()
    assert diagnosis.patient_id == duplicate.pk  # nothing moved
    (source_change,) = record_history(duplicate)
    assert (source_change.action, source_change.actor, source_change.reason) == (
        "merged",
        "staff:asha",
        "Registered twice",
    )
    assert source_change.changes == {"merged_into": [None, str(survivor.pk)], "is_active": [True, False]}
    (target_change,) = record_history(survivor)
    assert target_change.changes == {"merged_from": [None, str(duplicate.pk)]}


def test_the_api_resolves_a_merged_patient_to_the_survivor_with_both_records(client, reader, survivor, duplicate):
    DiagnosisFactory(patient=survivor, code="E11.9")
    DiagnosisFactory(patient=duplicate, code="I10")
    VisitFactory(patient=duplicate, start=datetime(2025, 2, 1, 5, 0, tzinfo=UTC))
    services.patient_merge(source=duplicate, target=survivor, by="staff:asha", reason="Registered twice")

    by_old_business_id = get_patient(client, reader, duplicate.patient_id)
    by_old_uuid = get_patient(client, reader, str(duplicate.pk))
    by_survivor = get_patient(client, reader, survivor.patient_id)

    assert by_old_business_id.status_code == by_old_uuid.status_code == 200
    assert by_old_business_id.json() == by_old_uuid.json() == by_survivor.json()
    body = by_survivor.json()
    assert (body["id"], body["patient_id"]) == (str(survivor.pk), survivor.patient_id)
    assert sorted(d["code"] for d in body["medical_summary"]["diagnoses"]) == ["E11.9", "I10"]
    assert len(body["visit_history"]) == 1
    listed = {
        row["patient_id"]: row["last_visit_date"]
        for row in client.get(PATIENTS, HTTP_AUTHORIZATION=f"Bearer {reader}").json()
    }
    assert listed[survivor.patient_id] == "2025-02-01"


def test_a_patch_through_a_merged_id_updates_the_survivor(client, branch, token_for, survivor, duplicate):
    writer = token_for(["patients:read", "patients:write"], branches=[branch])
    services.patient_merge(source=duplicate, target=survivor, by="staff:asha", reason="Registered twice")

    response = patch_patient(client, writer, duplicate.patient_id, {"email": "kavya@example.com"})

    assert response.status_code == 200, response.content
    assert response.json()["id"] == str(survivor.pk)
    survivor.refresh_from_db()
    duplicate.refresh_from_db()
    assert (survivor.email, duplicate.email) == ("kavya@example.com", "")


def test_a_merge_into_a_patient_the_client_cannot_see_is_a_404_for_that_client(client, token_for, duplicate):
    elsewhere = PatientFactory(registration_branch=BranchFactory(code="MUM"))
    reader = token_for(["patients:read"], branches=[duplicate.registration_branch])
    services.patient_merge(source=duplicate, target=elsewhere, by="staff:asha", reason="Registered twice")

    response = get_patient(client, reader, duplicate.patient_id)

    assert response.status_code == 404
    assert response.json()["code"] == "not_found"


def test_records_merged_earlier_follow_their_survivor_so_pointers_stay_one_step(branch, survivor, duplicate):
    third = PatientFactory(registration_branch=branch)
    services.patient_merge(source=third, target=duplicate, by="staff:asha", reason="Registered twice")

    services.patient_merge(source=duplicate, target=survivor, by="staff:asha", reason="Registered thrice")

    third.refresh_from_db()
    assert third.merged_into_id == survivor.pk
    assert set(Patient.objects.filter(merged_into=survivor).values_list("pk", flat=True)) == {duplicate.pk, third.pk}


def test_refused_merges_change_nothing(branch, survivor, duplicate):
    with pytest.raises(FieldError):
        services.patient_merge(source=survivor, target=survivor, by="staff:asha", reason="Oops")
    with pytest.raises(FieldError):
        services.patient_merge(source=duplicate, target=survivor, by="staff:asha", reason=" ")
    services.patient_merge(source=duplicate, target=survivor, by="staff:asha", reason="Registered twice")
    with pytest.raises(Conflict):
        services.patient_merge(source=duplicate, target=PatientFactory(), by="staff:asha", reason="Again")
    with pytest.raises(FieldError):  # into a merged record: merge into the survivor instead
        services.patient_merge(source=PatientFactory(), target=duplicate, by="staff:asha", reason="Chain")

    duplicate.refresh_from_db()
    assert duplicate.merged_into_id == survivor.pk
    assert survivor.merged_into_id is None
    assert survivor.is_active
    assert record_history(duplicate).count() == 1


def test_the_database_refuses_reactivating_a_merged_record(survivor, duplicate):
    services.patient_merge(source=duplicate, target=survivor, by="staff:asha", reason="Registered twice")

    with pytest.raises(IntegrityError), transaction.atomic():
        Patient.objects.filter(pk=duplicate.pk).update(is_active=True)

    assert not Patient.objects.get(pk=duplicate.pk).is_active


def test_deactivating_keeps_the_record_and_records_why(survivor):
    services.patient_deactivate(patient=survivor, by="staff:asha", reason="Deceased")

    survivor.refresh_from_db()
    assert not survivor.is_active
    (change,) = record_history(survivor)
    assert (change.action, change.changes, change.reason) == ("deactivated", {"is_active": [True, False]}, "Deceased")
    with pytest.raises(Conflict):
        services.patient_deactivate(patient=survivor, by="staff:asha", reason="Again")


# --- the admin actions ---------------------------------------------------------------------------


def test_the_admin_merge_action_asks_for_the_survivor_and_a_reason(admin_client, survivor, duplicate):
    chosen = {"action": "merge", "_selected_action": [str(duplicate.pk)]}

    asked = admin_client.post("/admin/patients/patient/", chosen)
    assert asked.status_code == 200
    assert 'name="target"' in asked.content.decode()
    unknown = admin_client.post(
        "/admin/patients/patient/", {**chosen, "confirm": "yes", "target": "PAT-9", "reason": "x"}
    )
    assert unknown.status_code == 200
    assert "No patient PAT-9" in unknown.content.decode()
    duplicate.refresh_from_db()
    assert duplicate.merged_into_id is None

    done = admin_client.post(
        "/admin/patients/patient/",
        {**chosen, "confirm": "yes", "target": survivor.patient_id.lower(), "reason": "Registered twice"},
    )

    assert done.status_code == 302
    duplicate.refresh_from_db()
    assert (duplicate.merged_into_id, duplicate.is_active) == (survivor.pk, False)
    assert record_history(duplicate).get().actor == "staff:admin"


def test_the_admin_deactivate_action_asks_for_a_reason(admin_client, survivor):
    chosen = {"action": "deactivate", "_selected_action": [str(survivor.pk)]}

    done = admin_client.post("/admin/patients/patient/", {**chosen, "confirm": "yes", "reason": "Moved abroad"})

    assert done.status_code == 302
    survivor.refresh_from_db()
    assert not survivor.is_active
    assert record_history(survivor).get().reason == "Moved abroad"
