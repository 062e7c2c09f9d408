"""Response shapes and examples of the patient operations, for the OpenAPI document only."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiExample, inline_serializer
from rest_framework import serializers

PatientSummaryListSchema = inline_serializer(
    "PatientSummary",
    many=True,
    fields={
        "id": serializers.UUIDField(),
        "patient_id": serializers.CharField(),
        "name": serializers.CharField(),
        "phone": serializers.CharField(help_text="E.164"),
        "age": serializers.IntegerField(help_text="Whole years"),
        "gender": serializers.ChoiceField(choices=["male", "female", "other", "unknown"]),
        "last_visit_date": serializers.DateField(allow_null=True),
    },
)

_address = inline_serializer(
    "PatientAddress",
    {n: serializers.CharField() for n in ("line1", "city", "state", "pincode")},
)
PatientProfileSchema = inline_serializer(
    "PatientProfile",
    {
        "id": serializers.UUIDField(),
        "patient_id": serializers.CharField(),
        "branch_id": serializers.UUIDField(),
        "registered_at": serializers.DateTimeField(),
        "demographics": inline_serializer(
            "PatientDemographics",
            {
                "first_name": serializers.CharField(),
                "last_name": serializers.CharField(),
                "name": serializers.CharField(),
                "date_of_birth": serializers.DateField(),
                "age": serializers.IntegerField(),
                "gender": serializers.CharField(),
                "blood_group": serializers.CharField(allow_null=True),
                "address": _address,
                "contact": inline_serializer(
                    "PatientContact",
                    {"phone": serializers.CharField(), "email": serializers.EmailField(allow_null=True)},
                ),
            },
        ),
        "identifiers": inline_serializer(
            "PatientIdentifiers",
            {
                "patient_id": serializers.CharField(),
                "national_health_id": serializers.CharField(allow_null=True, help_text="14-digit ABHA number"),
                "national_id_masked": serializers.CharField(allow_null=True, help_text="XXXX-XXXX-1234"),
                "insurance": inline_serializer(
                    "PatientInsurance",
                    {
                        "provider": serializers.CharField(),
                        "policy_number": serializers.CharField(),
                        "valid_until": serializers.DateField(allow_null=True),
                    },
                    many=True,
                ),
            },
        ),
        "medical_summary": inline_serializer(
            "PatientMedicalSummary",
            {
                "diagnoses": inline_serializer(
                    "PatientDiagnosis",
                    {
                        "code": serializers.CharField(),
                        "system": serializers.CharField(),
                        "description": serializers.CharField(),
                        "onset_date": serializers.DateField(allow_null=True),
                        "status": serializers.CharField(),
                    },
                    many=True,
                ),
                "allergies": inline_serializer(
                    "PatientAllergy",
                    {
                        "substance": serializers.CharField(),
                        "reaction": serializers.CharField(),
                        "severity": serializers.ChoiceField(choices=["mild", "moderate", "severe"]),
                    },
                    many=True,
                ),
                "medications": inline_serializer(
                    "PatientMedication",
                    {
                        "name": serializers.CharField(),
                        "dosage": serializers.CharField(),
                        "frequency": serializers.CharField(),
                        "start_date": serializers.DateField(allow_null=True),
                    },
                    many=True,
                ),
            },
        ),
        "visit_history": inline_serializer(
            "PatientVisit",
            {
                "id": serializers.UUIDField(),
                "type": serializers.ChoiceField(choices=["outpatient", "inpatient"]),
                "start": serializers.DateTimeField(),
                "end": serializers.DateTimeField(allow_null=True),
                "doctor": inline_serializer(
                    "PatientVisitDoctor",
                    {"id": serializers.UUIDField(), "name": serializers.CharField()},
                    allow_null=True,
                ),
                "department": serializers.CharField(allow_null=True),
                "branch_id": serializers.UUIDField(),
                "reason": serializers.CharField(),
            },
            many=True,
        ),
    },
)

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
