"""GET /api/v1/patients/{id}/record (docs/api-rules.md §15): the whole body, per-section paging, branch
restriction, scope, audit, bad input and a pinned number of queries."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from integrations.clients.models import AuditLogEntry
from lab.models import LabResult
from patients.models import Visit
from tests.emr.world import RecordWorld, make_record_world
from tests.helpers import IST, assert_problem, bearer, error_fields
from tests.patients.factories import PatientFactory, VisitFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(token_for: Any) -> RecordWorld:
    return make_record_world(token_for)


def _get(token: str, ref: str, query: str = "") -> Any:
    return Client().get(f"/api/v1/patients/{ref}/record{query}", **bearer(token))


def _local(value: Any) -> str:
    return value.astimezone(IST).isoformat()


def test_record_shows_every_section_of_the_visible_branches(world: RecordWorld, token_for: Any) -> None:
    token = token_for(["emr:read"], branches=[world.blr])
    ph = world.pharmacy

    response = _get(token, world.patient.patient_id)

    assert response.status_code == 200, response.content
    assert response["Cache-Control"] == "no-store"
    body = response.json()
    doctor = {"id": str(ph.doctor.id), "name": "Dr. Anil Rao"}
    hgb = LabResult.objects.get(item__order=world.order, analyte__code="HGB")
    report = LabResult.objects.get(item__order=world.order, analyte__isnull=True)
    item = world.order.items.get(test=world.cbc)
    assert item.status != ""
    medication = world.medication
    assert body == {
        "patient": {
            "id": str(world.patient.id),
            "patient_id": world.patient.patient_id,
            "name": "Priya Sharma",
            "gender": "female",
            "date_of_birth": world.patient.date_of_birth.isoformat(),
        },
        "encounters": {
            "total": 2,
            "page": 1,
            "per_page": 20,
            "next": None,
            "items": [
                {
                    "id": str(world.visit.id),
                    "encounter_id": str(world.visit.id),
                    "type": "outpatient",
                    "start": _local(world.visit.start),
                    "end": _local(world.visit.end),
                    "doctor": doctor,
                    "department": "General Medicine",
                    "branch_id": str(world.blr.id),
                    "reason": "Fever for five days",
                },
                {
                    "id": str(world.old_visit.id),
                    "encounter_id": str(world.old_visit.id),
                    "type": "outpatient",
                    "start": _local(world.old_visit.start),
                    "end": None,
                    "doctor": doctor,
                    "department": "General Medicine",
                    "branch_id": str(world.blr.id),
                    "reason": None,
                },
            ],
        },
        "diagnoses": {
            "total": 2,
            "page": 1,
            "per_page": 20,
            "next": None,
            "items": [
                {
                    "id": str(world.diagnosis.id),
                    "diagnosis_id": str(world.diagnosis.id),
                    "code": "E11.9",
                    "system": "ICD-10",
                    "description": "Type 2 diabetes mellitus",
                    "onset_date": "2021-06-01",
                    "status": "active",
                },
                {
                    "id": str(world.past_diagnosis.id),
                    "diagnosis_id": str(world.past_diagnosis.id),
                    "code": "J06.9",
                    "system": "ICD-10",
                    "description": "Acute upper respiratory infection",
                    "onset_date": "2020-01-10",
                    "status": "resolved",
                },
            ],
        },
        "allergies": {
            "total": 1,
            "page": 1,
            "per_page": 20,
            "next": None,
            "items": [
                {
                    "id": str(world.allergy.id),
                    "allergy_id": str(world.allergy.id),
                    "substance": "Penicillin",
                    "reaction": "Rash",
                    "severity": "moderate",
                }
            ],
        },
        "medications": {
            "total": 1,
            "page": 1,
            "per_page": 20,
            "next": None,
            "items": [
                {
                    "id": str(medication.id),
                    "medication_id": str(medication.id),
                    "name": medication.name,
                    "dosage": medication.dosage or None,
                    "frequency": medication.frequency or None,
                    "start_date": medication.start_date.isoformat() if medication.start_date else None,
                    "end_date": medication.end_date.isoformat() if medication.end_date else None,
                }
            ],
        },
        "prescriptions": {
            "total": 1,
            "page": 1,
            "per_page": 20,
            "next": None,
            "items": [
                {
                    "id": str(world.prescription.id),
                    "prescription_id": str(world.prescription.id),
                    "prescription_number": world.prescription.prescription_number,
                    "status": world.prescription.status,
                    "branch_id": str(world.blr.id),
                    "doctor": doctor,
                    "created_at": _local(world.prescription.created_at),
                    "items": [
                        {
                            "drug": "PARA500",
                            "name": "Paracetamol 500 mg",
                            "dose": "1 tablet",
                            "frequency": "twice a day",
                            "route": "oral",
                            "duration_days": 5,
                            "quantity": 10,
                            "dispensed_quantity": 10,
                            "instructions": None,
                        }
                    ],
                }
            ],
        },
        "dispenses": {
            "total": 1,
            "page": 1,
            "per_page": 20,
            "next": None,
            "items": [
                {
                    "id": str(world.dispense.id),
                    "dispense_id": str(world.dispense.id),
                    "dispense_number": world.dispense.dispense_number,
                    "branch_id": str(world.blr.id),
                    "prescription_id": str(world.prescription.id),
                    "created_at": _local(world.dispense.created_at),
                    "lines": [
                        {
                            "drug": "PARA500",
                            "name": "Paracetamol 500 mg",
                            "batch": "B2405",
                            "quantity": 10,
                            "returned_quantity": 0,
                        }
                    ],
                }
            ],
        },
        "results": {
            "total": 2,
            "page": 1,
            "per_page": 20,
            "next": None,
            "items": [
                {
                    "id": str(first.id),
                    "result_id": str(first.id),
                    "order_id": str(world.order.id),
                    "order_number": world.order.order_number,
                    "test": first.item.test.code,
                    "test_name": first.item.test.name,
                    "analyte": "HGB" if first.analyte else None,
                    "analyte_name": "Hemoglobin" if first.analyte else None,
                    "loinc_code": "718-7" if first.analyte else "36643-5",
                    "status": "final",
                    "value_quantity": 10.9 if first.analyte else None,
                    "value_text": None if first.analyte else "No active lung lesion.",
                    "unit": "g/dL" if first.analyte else None,
                    "flag": "L" if first.analyte else None,
                    "reference_low": 12 if first.analyte else None,
                    "reference_high": 15.5 if first.analyte else None,
                    "performed_at": _local(first.performed_at),
                    "version": 1,
                }
                for first in sorted([hgb, report], key=lambda result: (-result.performed_at.timestamp(), result.id))
            ],
        },
    }
    # The MUM visit and the MUM order's result exist, but this client sees BLR only.
    assert Visit.objects.filter(patient=world.patient).count() == 3
    assert LabResult.objects.filter(item__order__patient=world.patient).count() == 3


def test_an_unrestricted_client_sees_the_other_branch_too(world: RecordWorld, token_for: Any) -> None:
    body = _get(token_for(["emr:read"]), str(world.patient.id)).json()

    assert [row["encounter_id"] for row in body["encounters"]["items"]] == [
        str(world.visit.id),
        str(world.mum_visit.id),
        str(world.old_visit.id),
    ]
    assert body["results"]["total"] == 3
    assert sorted(row["flag"] or "-" for row in body["results"]["items"]) == ["-", "H", "L"]


def test_one_section_pages_with_absolute_next_links(world: RecordWorld, token_for: Any) -> None:
    token = token_for(["emr:read"], branches=[world.blr])
    ref = world.patient.patient_id

    first = _get(token, ref, "?section=encounters&per_page=1")
    second = _get(token, ref, "?section=encounters&page=2&per_page=1")
    past = _get(token, ref, "?section=encounters&page=3&per_page=1")

    assert first.status_code == second.status_code == past.status_code == 200
    assert list(first.json()) == ["patient", "encounters"]
    assert first.json()["encounters"]["next"] == (
        f"http://testserver/api/v1/patients/{ref}/record?section=encounters&page=2&per_page=1"
    )
    assert [row["encounter_id"] for row in first.json()["encounters"]["items"]] == [str(world.visit.id)]
    assert second.json()["encounters"]["next"] is None
    assert [row["encounter_id"] for row in second.json()["encounters"]["items"]] == [str(world.old_visit.id)]
    assert past.json()["encounters"] == {"total": 2, "page": 3, "per_page": 1, "next": None, "items": []}


def test_entered_in_error_entries_are_left_out(world: RecordWorld, token_for: Any) -> None:
    Visit.objects.filter(id=world.old_visit.id).update(
        entered_in_error=True,
        entered_in_error_by="staff:a",
        entered_in_error_at=world.visit.start,
        entered_in_error_reason="dup",
    )

    body = _get(token_for(["emr:read"], branches=[world.blr]), str(world.patient.id), "?section=encounters").json()

    assert [row["encounter_id"] for row in body["encounters"]["items"]] == [str(world.visit.id)]


def test_the_record_is_read_in_a_bounded_number_of_queries(world: RecordWorld, token_for: Any) -> None:
    token = token_for(["emr:read"], branches=[world.blr])
    _get(token, str(world.patient.id))  # warm the token and client caches
    with CaptureQueriesContext(connection) as small:
        assert _get(token, str(world.patient.id)).status_code == 200
    for days in range(40):
        VisitFactory(
            patient=world.patient,
            branch=world.blr,
            doctor=world.pharmacy.doctor,
            department=world.pharmacy.department,
            start=world.visit.start - timedelta(days=days + 3),
        )
    with CaptureQueriesContext(connection) as large:
        response = _get(token, str(world.patient.id))

    assert response.json()["encounters"]["total"] == 42
    assert len(large.captured_queries) == len(small.captured_queries)
    # The token with the client's branches, the patient, its merged records, a count and a page for each of the 7
    # sections, the prescription items, the dispense lines, and the audit row: 20 whatever the history.
    assert len(large.captured_queries) == 20, [query["sql"][:80] for query in large.captured_queries]


def test_other_branch_patient_unknown_and_malformed_refs_are_404(world: RecordWorld, token_for: Any) -> None:
    token = token_for(["emr:read"], branches=[world.mum])
    stranger = PatientFactory(registration_branch=world.blr)

    for ref in (world.patient.patient_id, str(stranger.id), "PAT-999999", "not-a-uuid"):
        assert_problem(_get(token, ref), 404, "not_found")
    # Non-ASCII digits are refused before routing (docs/api-rules.md §7), as on every path.
    assert_problem(_get(token, "PAT-\u0661\u0662"), 400, "invalid_request")


def test_scope_and_token_are_required(world: RecordWorld, token_for: Any) -> None:
    ref = str(world.patient.id)
    missing = Client().get(f"/api/v1/patients/{ref}/record")
    wrong = _get(token_for(["patients:read"]), ref)

    assert_problem(missing, 401, "not_authenticated")
    assert_problem(wrong, 403, "insufficient_scope")
    assert 'scope="emr:read"' in wrong["WWW-Authenticate"]


@pytest.mark.parametrize(
    ("query", "fields"),
    [
        ("?section=everything", ["section"]),
        ("?per_page=0&page=0", ["page", "per_page"]),
        ("?per_page=101", ["per_page"]),
    ],
)
def test_bad_parameters_are_400_naming_each(world: RecordWorld, token_for: Any, query: str, fields: list[str]) -> None:
    response = _get(token_for(["emr:read"]), str(world.patient.id), query)

    assert sorted(error_fields(response)) == fields


@pytest.mark.parametrize(
    ("query", "code"),
    [
        ("?serach=x", "unknown_parameter"),
        ("?page=\u0662", "validation_error"),
        ("?section=enc%00ounters", "validation_error"),
    ],
)
def test_unknown_and_unreadable_parameters_are_400(world: RecordWorld, token_for: Any, query: str, code: str) -> None:
    assert_problem(_get(token_for(["emr:read"]), str(world.patient.id), query), 400, code)


def test_the_request_is_audited_with_the_patient(world: RecordWorld, token_for: Any) -> None:
    response = _get(token_for(["emr:read"]), world.patient.patient_id)

    row = AuditLogEntry.objects.get(request_id=response["X-Request-ID"])
    assert (row.status, row.route) == (200, "api/v1/patients/<str:id>/record")
    assert row.patient_ids == [world.patient.id]
