"""Examples of the patient operations, for the OpenAPI document (the shapes are patients.representations)."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiExample

PROFILE_EXAMPLE = OpenApiExample(
    "Profile",
    response_only=True,
    value={
        "id": "3f1c9b0e-8f4a-4c55-9a36-1f3c6d2e7b10",
        "patient_id": "PAT-000123",
        "branch_id": "0b6f4c1e-3d1a-4a57-9a57-0d0c6f0f8a11",
        "registered_at": "2026-03-02T10:15:00+05:30",
        "demographics": {
            "first_name": "Priya",
            "last_name": "Sharma",
            "name": "Priya Sharma",
            "date_of_birth": "1984-06-11",
            "age": 42,
            "gender": "female",
            "blood_group": "O+",
            "address": {"line1": "12 MG Road", "city": "Bengaluru", "state": "Karnataka", "pincode": "560001"},
            "contact": {"phone": "+919876543210", "email": "priya@example.com"},
        },
        "identifiers": {
            "patient_id": "PAT-000123",
            "national_health_id": "91123456789012",
            "national_id_masked": "XXXX-XXXX-1234",
            "insurance": [{"provider": "Star Health", "policy_number": "SH-77812", "valid_until": "2027-03-31"}],
        },
        "medical_summary": {
            "diagnoses": [
                {
                    "code": "E11.9",
                    "system": "ICD-10",
                    "description": "Type 2 diabetes",
                    "onset_date": "2019-05-01",
                    "status": "active",
                }
            ],
            "allergies": [{"substance": "Penicillin", "reaction": "Rash", "severity": "moderate"}],
            "medications": [
                {"name": "Metformin", "dosage": "500 mg", "frequency": "twice daily", "start_date": "2019-05-02"}
            ],
        },
        "visit_history": [
            {
                "id": "9a0b1c2d-3e4f-4a5b-8c6d-7e8f9a0b1c2d",
                "type": "outpatient",
                "start": "2026-10-04T09:30:00+05:30",
                "end": "2026-10-04T09:45:00+05:30",
                "doctor": {"id": "7599fc20-8d9b-4406-96d0-16a9a77dff32", "name": "Dr. Ananya Rao"},
                "department": "General Medicine",
                "branch_id": "0b6f4c1e-3d1a-4a57-9a57-0d0c6f0f8a11",
                "reason": "Follow-up",
            }
        ],
    },
)

CREATE_EXAMPLE = OpenApiExample(
    "Register a patient",
    request_only=True,
    value={
        "first_name": "Priya",
        "last_name": "Sharma",
        "date_of_birth": "1984-06-11",
        "gender": "female",
        "phone": "+919876543210",
        "email": "priya@example.com",
        "address": {"line1": "12 MG Road", "city": "Bengaluru", "state": "Karnataka", "pincode": "560001"},
        "blood_group": "O+",
        "branch_id": "0b6f4c1e-3d1a-4a57-9a57-0d0c6f0f8a11",
        "national_health_id": "91-1234-5678-9012",
        "national_id": "234123412346",
        "insurance": [{"provider": "Star Health", "policy_number": "SH-77812", "valid_until": "2027-03-31"}],
    },
)

DUPLICATE_EXAMPLE = OpenApiExample(
    "Duplicate patient",
    response_only=True,
    status_codes=["409"],
    value={
        "type": "/api/v1/problems/duplicate_patient",
        "title": "Duplicate patient",
        "status": 409,
        "detail": "Patient PAT-000123 already has this phone number and date of birth.",
        "code": "duplicate_patient",
        "request_id": "5f0c2a4e9b7d4c1e8a3f6b2d1c0e9f8a",
        "existing_patient_id": "PAT-000123",
        "existing_id": "3f1c9b0e-8f4a-4c55-9a36-1f3c6d2e7b10",
    },
)

SUMMARY_EXAMPLE = OpenApiExample(
    "Patients",
    response_only=True,
    value=[
        {
            "id": "3f1c9b0e-8f4a-4c55-9a36-1f3c6d2e7b10",
            "patient_id": "PAT-000123",
            "name": "Priya Sharma",
            "phone": "+919876543210",
            "age": 42,
            "gender": "female",
            "last_visit_date": "2026-10-04",
        }
    ],
)
