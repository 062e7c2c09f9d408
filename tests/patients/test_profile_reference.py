"""The profile read as rows and JSON (patients.selectors.patient_profile) is byte for byte the profile
built from model instances, over the cases that differ between the two: time zones with and without
daylight saving, microseconds, visits without doctor, department or end, NULL onset and start dates
(PostgreSQL orders NULLs first in DESC), ordering ties, non-ASCII text, medications that ended."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from typing import Any

import pytest
from django.utils import timezone

from clinic.api.renderers import dumps
from patients.models import Diagnosis, Patient
from tests.factories import BranchFactory, DepartmentFactory, DoctorFactory
from tests.patients.factories import (
    AllergyFactory,
    DiagnosisFactory,
    InsuranceFactory,
    MedicationFactory,
    PatientFactory,
    VisitFactory,
    aadhaar,
    get_patient,
)

pytestmark = pytest.mark.django_db


def _local(value: datetime | None, zone: Any) -> str | None:
    return value.astimezone(zone).isoformat() if value else None


def reference_profile(patient: Patient, today: date) -> dict[str, Any]:
    """The profile as the serializer built it from model instances before it read rows."""
    branch_zone = patient.registration_branch.zone
    current_medications = [m for m in patient.medications.all() if m.end_date is None or m.end_date >= today]
    return {
        "id": str(patient.id),
        "patient_id": patient.patient_id,
        "branch_id": str(patient.registration_branch_id),
        "registered_at": _local(patient.registered_at, branch_zone),
        "demographics": {
            "first_name": patient.first_name,
            "last_name": patient.last_name,
            "name": patient.name,
            "date_of_birth": patient.date_of_birth.isoformat(),
            "age": patient.age_on(today),
            "gender": patient.gender,
            "blood_group": patient.blood_group or None,
            "address": {
                "line1": patient.address_line1,
                "city": patient.address_city,
                "state": patient.address_state,
                "pincode": patient.address_pincode,
            },
            "contact": {"phone": patient.phone, "email": patient.email or None},
        },
        "identifiers": {
            "patient_id": patient.patient_id,
            "national_health_id": patient.national_health_id,
            "national_id_masked": patient.national_id_masked,
            "insurance": [
                {
                    "provider": e.provider,
                    "policy_number": e.policy_number,
                    "valid_until": e.valid_until.isoformat() if e.valid_until else None,
                }
                for e in patient.insurance.all()
            ],
        },
        "medical_summary": {
            "diagnoses": [
                {
                    "code": d.code,
                    "system": d.system,
                    "description": d.description,
                    "onset_date": d.onset_date.isoformat() if d.onset_date else None,
                    "status": d.status,
                }
                for d in patient.diagnoses.filter(status=Diagnosis.Status.ACTIVE)
            ],
            "allergies": [
                {"substance": a.substance, "reaction": a.reaction, "severity": a.severity}
                for a in patient.allergies.all()
            ],
            "medications": [
                {
                    "name": m.name,
                    "dosage": m.dosage,
                    "frequency": m.frequency,
                    "start_date": m.start_date.isoformat() if m.start_date else None,
                }
                for m in current_medications
            ],
        },
        "visit_history": [
            {
                "id": str(v.id),
                "type": v.type,
                "start": _local(v.start, v.branch.zone),
                "end": _local(v.end, v.branch.zone),
                "doctor": {"id": str(v.doctor.id), "name": v.doctor.name} if v.doctor else None,
                "department": v.department.name if v.department else None,
                "branch_id": str(v.branch_id),
                "reason": v.reason,
            }
            for v in patient.visits.select_related("doctor", "department", "branch")
        ],
    }


def test_the_profile_is_byte_for_byte_the_instance_built_profile(client, token_for):
    home = BranchFactory(code="BLR", time_zone="Asia/Kolkata")
    new_york = BranchFactory(code="NYC", time_zone="America/New_York")
    kathmandu = BranchFactory(code="KTM", time_zone="Asia/Kathmandu")
    patient = PatientFactory(
        first_name="Ånanya",
        last_name='Ré\'ddy "Jr"',
        email="",
        blood_group="",
        address_line1="12, MG Road — 2nd floor",
        registration_branch=home,
        national_health_id="91000000000077",
        national_id=aadhaar("52739184630"),
    )
    today = timezone.localdate()
    for provider, policy, valid in [("Star", "S-2", None), ("Star", "S-1", date(2027, 1, 31)), ("Ägis", "A", None)]:
        InsuranceFactory(patient=patient, provider=provider, policy_number=policy, valid_until=valid)
    for code, onset in [("E11", date(2020, 1, 1)), ("I10", None), ("J45", date(2020, 1, 1)), ("Z00", None)]:
        DiagnosisFactory(patient=patient, code=code, onset_date=onset, description=f"Ünïcode {code}")
    DiagnosisFactory(patient=patient, code="R51", status=Diagnosis.Status.RESOLVED)
    for substance, severity in [("Latex", "mild"), ("latex", "severe"), ("Penicillin", "moderate")]:
        AllergyFactory(patient=patient, substance=substance, reaction="", severity=severity)
    MedicationFactory(patient=patient, name="Ended", start_date=date(2020, 1, 1), end_date=today - timedelta(days=1))
    MedicationFactory(patient=patient, name="Ends today", start_date=None, end_date=today)
    MedicationFactory(patient=patient, name="Ongoing", start_date=date(2021, 5, 6), dosage="", frequency="")
    MedicationFactory(patient=patient, name="Undated", start_date=None)
    cardiology = DepartmentFactory(name="Cardiology")
    doctor = DoctorFactory(name="Dr. Øyvind Rao", department=cardiology, branches=[home])
    moments = [
        datetime(2026, 3, 8, 6, 59, 59, 999999, tzinfo=UTC),  # New York: 01:59:59.999999 EST
        datetime(2026, 3, 8, 7, 0, tzinfo=UTC),  # 03:00 EDT
        datetime(2025, 11, 2, 5, 30, tzinfo=UTC),  # 01:30 EDT, the first of two 01:30s
        datetime(2025, 11, 2, 6, 30, tzinfo=UTC),  # 01:30 EST
        datetime(2026, 1, 1, 0, 0, 0, 1, tzinfo=UTC),
        datetime(1999, 12, 31, 18, 29, 59, tzinfo=UTC),
    ]
    for n, start in enumerate(moments):
        for branch in (home, new_york, kathmandu):
            VisitFactory(
                patient=patient,
                branch=branch,
                doctor=doctor if n % 2 else None,
                department=cardiology if n % 3 else None,
                start=start,
                end=start + timedelta(hours=n, microseconds=n * 7) if n % 2 == 0 else None,
                reason=f"Visit {n} ✓",
            )

    response = get_patient(client, token_for(["patients:read"]), str(patient.id))

    assert response.status_code == 200
    patient.refresh_from_db()
    assert response.content == dumps(reference_profile(patient, today))


def test_an_empty_profile_is_the_instance_built_profile(client, token_for):
    patient = PatientFactory(registration_branch=BranchFactory(code="MYS"))

    response = get_patient(client, token_for(["patients:read"]), patient.patient_id)

    assert response.content == dumps(reference_profile(patient, timezone.localdate()))
