"""GET /api/v1/patients/{id}: the profile, its medical summary and visit history, visibility, audit."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from integrations.models import AuditLogEntry
from patients.models import Diagnosis, Visit
from tests.factories import BranchFactory, DepartmentFactory, DoctorFactory
from tests.helpers import age_today
from tests.patients.factories import (
    AllergyFactory,
    DiagnosisFactory,
    InsuranceFactory,
    MedicationFactory,
    PatientFactory,
    VisitFactory,
    aadhaar,
    get_patient,
    patch_patient,
    post_patient,
)

pytestmark = pytest.mark.django_db

# GET of a profile: token lookup with the client's branches, the visible patient with its branch and its
# small sections (insurance, diagnoses, allergies, medications), its visits joined with doctor,
# department and branch, and the audit row. Independent of the number of rows shown.
PROFILE_QUERIES = 4


@pytest.fixture
def patient(branch):
    return PatientFactory(
        first_name="Kavya",
        last_name="Menon",
        date_of_birth=date(1988, 5, 14),
        gender="female",
        phone="+919845123456",
        email="kavya@example.com",
        address_line1="22 Church Street",
        address_city="Bengaluru",
        address_state="Karnataka",
        address_pincode="560001",
        blood_group="A-",
        national_health_id="91000000000042",
        registration_branch=branch,
        national_id=aadhaar("52739184630"),
    )


def not_found(response, ref: str) -> None:
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


def test_the_profile_by_uuid_shows_every_group(client, reader, patient, branch):
    InsuranceFactory(patient=patient, provider="Star Health", policy_number="SH-7", valid_until=date(2027, 3, 31))
    cardiology = DepartmentFactory(name="Cardiology")
    doctor = DoctorFactory(name="Dr. Rao", department=cardiology, branches=[branch])
    visit = VisitFactory(
        patient=patient,
        doctor=doctor,
        department=cardiology,
        start=datetime(2026, 1, 10, 4, 30, tzinfo=UTC),
        end=datetime(2026, 1, 10, 4, 45, tzinfo=UTC),
        reason="Chest pain",
    )

    response = get_patient(client, reader, str(patient.id))

    assert response.status_code == 200, response.content
    assert response.json() == {
        "id": str(patient.id),
        "patient_id": patient.patient_id,
        "branch_id": str(branch.id),
        "registered_at": patient.registered_at.astimezone(branch.zone).isoformat(),
        "demographics": {
            "first_name": "Kavya",
            "last_name": "Menon",
            "name": "Kavya Menon",
            "date_of_birth": "1988-05-14",
            "age": age_today(date(1988, 5, 14)),
            "gender": "female",
            "blood_group": "A-",
            "address": {"line1": "22 Church Street", "city": "Bengaluru", "state": "Karnataka", "pincode": "560001"},
            "contact": {"phone": "+919845123456", "email": "kavya@example.com"},
        },
        "identifiers": {
            "patient_id": patient.patient_id,
            "national_health_id": "91000000000042",
            "national_id_masked": "XXXX-XXXX-6301",
            "insurance": [{"provider": "Star Health", "policy_number": "SH-7", "valid_until": "2027-03-31"}],
        },
        "medical_summary": {"diagnoses": [], "allergies": [], "medications": []},
        "visit_history": [
            {
                "id": str(visit.id),
                "type": "outpatient",
                "start": "2026-01-10T10:00:00+05:30",
                "end": "2026-01-10T10:15:00+05:30",
                "doctor": {"id": str(doctor.id), "name": "Dr. Rao"},
                "department": "Cardiology",
                "branch_id": str(branch.id),
                "reason": "Chest pain",
            }
        ],
    }
    assert response.json()["registered_at"].endswith("+05:30")
    assert b"527391846301" not in response.content


@pytest.mark.parametrize("form", ["upper", "lower", "no-hyphen"])
def test_the_profile_by_patient_id_is_the_same_as_by_uuid(client, reader, patient, form):
    ref = {
        "upper": patient.patient_id,
        "lower": patient.patient_id.lower(),
        "no-hyphen": patient.patient_id.replace("-", ""),
    }[form]

    by_ref = get_patient(client, reader, ref)
    by_uuid = get_patient(client, reader, str(patient.id))

    assert by_ref.status_code == 200
    assert by_ref.json() == by_uuid.json()


def test_the_medical_summary_shows_active_diagnoses_current_medications_and_allergies(client, reader, patient):
    today = timezone.localdate()
    DiagnosisFactory(patient=patient, code="E11.9", description="Type 2 diabetes", onset_date=date(2019, 3, 1))
    DiagnosisFactory(patient=patient, code="I10", description="Hypertension", onset_date=date(2021, 6, 5))
    DiagnosisFactory(patient=patient, code="J02.9", description="Pharyngitis", status=Diagnosis.Status.RESOLVED)
    DiagnosisFactory(patient=patient, code="K29.7", description="Gastritis", status=Diagnosis.Status.INACTIVE)
    AllergyFactory(patient=patient, substance="Peanuts", reaction="Anaphylaxis", severity="severe")
    AllergyFactory(patient=patient, substance="Dust", reaction="", severity="mild")
    MedicationFactory(patient=patient, name="Metformin", start_date=date(2019, 3, 2), end_date=None)
    MedicationFactory(
        patient=patient,
        name="Amoxicillin",
        dosage="250 mg",
        frequency="thrice daily",
        start_date=today - timedelta(days=2),
        end_date=today + timedelta(days=3),
    )
    MedicationFactory(
        patient=patient, name="Ibuprofen", start_date=date(2020, 1, 1), end_date=today - timedelta(days=1)
    )

    summary = get_patient(client, reader, str(patient.id)).json()["medical_summary"]

    assert summary == {
        "diagnoses": [
            {
                "code": "I10",
                "system": "ICD-10",
                "description": "Hypertension",
                "onset_date": "2021-06-05",
                "status": "active",
            },
            {
                "code": "E11.9",
                "system": "ICD-10",
                "description": "Type 2 diabetes",
                "onset_date": "2019-03-01",
                "status": "active",
            },
        ],
        "allergies": [
            {"substance": "Dust", "reaction": "", "severity": "mild"},
            {"substance": "Peanuts", "reaction": "Anaphylaxis", "severity": "severe"},
        ],
        "medications": [
            {
                "name": "Amoxicillin",
                "dosage": "250 mg",
                "frequency": "thrice daily",
                "start_date": (today - timedelta(days=2)).isoformat(),
            },
            {"name": "Metformin", "dosage": "500 mg", "frequency": "twice daily", "start_date": "2019-03-02"},
        ],
    }


def test_visit_history_is_newest_first_in_the_visits_branch_time_zone(client, reader, patient, branch):
    dubai = BranchFactory(code="DXB", time_zone="Asia/Dubai")
    oldest = VisitFactory(patient=patient, start=datetime(2025, 3, 1, 5, 0, tzinfo=UTC), end=None)
    stay = VisitFactory(
        patient=patient,
        type=Visit.Type.INPATIENT,
        start=datetime(2025, 8, 1, 18, 45, tzinfo=UTC),
        end=datetime(2025, 8, 4, 6, 0, tzinfo=UTC),
        reason="Dengue",
    )
    abroad = VisitFactory(patient=patient, branch=dubai, start=datetime(2025, 12, 1, 6, 0, tzinfo=UTC))
    no_doctor = VisitFactory(
        patient=patient, doctor=None, department=None, start=datetime(2026, 2, 1, 3, 0, tzinfo=UTC), reason=""
    )

    history = get_patient(client, reader, str(patient.id)).json()["visit_history"]

    assert [v["id"] for v in history] == [str(no_doctor.id), str(abroad.id), str(stay.id), str(oldest.id)]
    assert history[0] == {
        "id": str(no_doctor.id),
        "type": "outpatient",
        "start": "2026-02-01T08:30:00+05:30",
        "end": None,
        "doctor": None,
        "department": None,
        "branch_id": str(branch.id),
        "reason": "",
    }
    assert (history[1]["start"], history[1]["branch_id"]) == ("2025-12-01T10:00:00+04:00", str(dubai.id))
    assert history[2] == {
        "id": str(stay.id),
        "type": "inpatient",
        "start": "2025-08-02T00:15:00+05:30",
        "end": "2025-08-04T11:30:00+05:30",
        "doctor": {"id": str(stay.doctor.id), "name": stay.doctor.name},
        "department": stay.department.name,
        "branch_id": str(branch.id),
        "reason": "Dengue",
    }


def _count_profile_queries(client, token: str, ref: str) -> int:
    with CaptureQueriesContext(connection) as queries:
        response = get_patient(client, token, ref)
    assert response.status_code == 200
    return len(queries)


def test_the_profile_takes_4_queries_with_1_visit_and_with_50_visits(client, reader, patient, branch):
    """PROFILE_QUERIES (4) whatever the number of visits, diagnoses, allergies and medications."""
    few = PatientFactory(registration_branch=branch)
    VisitFactory(patient=few)
    DiagnosisFactory(patient=few)
    AllergyFactory(patient=few)
    MedicationFactory(patient=few)
    InsuranceFactory(patient=few)
    get_patient(client, reader, str(few.id))  # warm caches of the first request

    departments = [DepartmentFactory(name=f"Dept {n}") for n in range(5)]
    doctors = [DoctorFactory(department=departments[n % 5], branches=[branch]) for n in range(10)]
    other_branch = BranchFactory(code="MYS")
    for n in range(50):
        VisitFactory(
            patient=patient,
            doctor=doctors[n % 10],
            department=departments[n % 5],
            branch=other_branch if n % 2 else branch,
            start=timezone.now() - timedelta(days=n),
        )
    for n in range(10):
        DiagnosisFactory(patient=patient, code=f"X{n}")
        AllergyFactory(patient=patient, substance=f"Substance {n}")
        MedicationFactory(patient=patient, name=f"Drug {n}")
        InsuranceFactory(patient=patient)

    with_one = _count_profile_queries(client, reader, str(few.id))
    with_fifty = _count_profile_queries(client, reader, str(patient.id))

    assert len(get_patient(client, reader, str(patient.id)).json()["visit_history"]) == 50
    assert with_one == with_fifty == PROFILE_QUERIES


def test_a_patient_of_another_branch_is_404_like_an_unknown_id(client, reader):
    elsewhere = PatientFactory(registration_branch=BranchFactory(code="MUM"))

    not_found(get_patient(client, reader, str(elsewhere.id)), str(elsewhere.id))
    not_found(get_patient(client, reader, elsewhere.patient_id), elsewhere.patient_id)
    unknown = "3f1f0c3e-8a1b-4c55-9d8e-0a6f2b7c9d10"
    not_found(get_patient(client, reader, unknown), unknown)


def test_an_unrestricted_client_sees_every_branch(client, token_for):
    elsewhere = PatientFactory(registration_branch=BranchFactory(code="MUM"))

    response = get_patient(client, token_for(["patients:read"]), str(elsewhere.id))

    assert response.status_code == 200
    assert response.json()["id"] == str(elsewhere.id)


@pytest.mark.parametrize("ref", ["PAT-999999", "pat999999", "nothing-here", "00000000-0000-0000-0000-000000000000"])
def test_an_unknown_id_is_404(client, reader, patient, ref):
    not_found(get_patient(client, reader, ref), ref)


@pytest.mark.parametrize("scopes", [["patients:write"], ["appointments:read"]], ids=" ".join)
def test_a_token_without_patients_read_is_403_and_shows_nothing(client, branch, patient, token_for, scopes):
    response = get_patient(client, token_for(scopes, branches=[branch]), str(patient.id))

    assert response.status_code == 403
    assert response.json()["code"] == "insufficient_scope"
    assert b"Kavya" not in response.content


def test_without_a_token_the_profile_is_401(client, patient):
    response = client.get(f"/api/v1/patients/{patient.id}")

    assert response.status_code == 401
    assert b"Kavya" not in response.content


def test_the_audit_row_names_the_patient_for_get_post_and_patch(client, branch, token_for):
    token = token_for(["patients:read", "patients:write"], branches=[branch])
    created = post_patient(
        client,
        token,
        {
            "first_name": "Audit",
            "last_name": "Trail",
            "date_of_birth": "1990-01-01",
            "gender": "other",
            "phone": "+919811111111",
            "national_id": aadhaar("52739184630"),
        },
    )
    patient_id = created.json()["id"]
    fetched = get_patient(client, token, created.json()["patient_id"])
    patched = patch_patient(client, token, patient_id, {"first_name": "Audited"})
    missing = get_patient(client, token, "PAT-999999")

    def row(response):
        return AuditLogEntry.objects.get(request_id=response["X-Request-ID"])

    assert [
        (row(r).method, row(r).status, [str(p) for p in row(r).patient_ids]) for r in (created, fetched, patched)
    ] == [
        ("POST", 201, [patient_id]),
        ("GET", 200, [patient_id]),
        ("PATCH", 200, [patient_id]),
    ]
    assert (row(missing).status, row(missing).patient_ids) == (404, [])
    for entry in AuditLogEntry.objects.all():
        assert "527391846301" not in repr(entry.__dict__)
