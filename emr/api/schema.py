"""Examples of the clinical record, for the OpenAPI document only (the shape is emr.representations)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from clinic.api.schema import error_example, example, problem_body

_PATIENT = "3f2b8c1e-6a4d-4e5f-9b7a-1c2d3e4f5a6b"
_BLR = "0b9a8c7d-6e5f-4a3b-9c2d-1e0f9a8b7c6d"
_DOCTOR = {"id": "7a6b5c4d-3e2f-4a1b-8c9d-0e1f2a3b4c5d", "name": "Dr. Anil Rao"}
_NEXT = f"https://clinic.example.in/api/v1/patients/{_PATIENT}/record?section=encounters&page=2&per_page=1"


def _section(items: list[dict[str, Any]], total: int | None = None, next_url: str | None = None) -> dict[str, Any]:
    return {"total": len(items) if total is None else total, "page": 1, "per_page": 1, "next": next_url, "items": items}


RECORD: dict[str, Any] = {
    "patient": {
        "id": _PATIENT,
        "patient_id": "PAT-000123",
        "name": "Priya Sharma",
        "gender": "female",
        "date_of_birth": "1988-04-12",
    },
    "encounters": _section(
        [
            {
                "id": "9e8d7c6b-5a4f-4e3d-8c2b-1a0f9e8d7c6b",
                "encounter_id": "9e8d7c6b-5a4f-4e3d-8c2b-1a0f9e8d7c6b",
                "type": "outpatient",
                "start": "2026-03-02T10:30:00+05:30",
                "end": "2026-03-02T10:45:00+05:30",
                "doctor": _DOCTOR,
                "department": "General Medicine",
                "branch_id": _BLR,
                "reason": "Fever for five days",
            }
        ],
        total=14,
        next_url=_NEXT,
    ),
    "diagnoses": _section(
        [
            {
                "id": "1b2c3d4e-5f6a-4b7c-8d9e-0f1a2b3c4d5e",
                "diagnosis_id": "1b2c3d4e-5f6a-4b7c-8d9e-0f1a2b3c4d5e",
                "code": "E11.9",
                "system": "ICD-10",
                "description": "Type 2 diabetes mellitus without complications",
                "onset_date": "2021-06-01",
                "status": "active",
            }
        ]
    ),
    "allergies": _section(
        [
            {
                "id": "2c3d4e5f-6a7b-4c8d-9e0f-1a2b3c4d5e6f",
                "allergy_id": "2c3d4e5f-6a7b-4c8d-9e0f-1a2b3c4d5e6f",
                "substance": "Penicillin",
                "reaction": "Rash",
                "severity": "moderate",
            }
        ]
    ),
    "medications": _section(
        [
            {
                "id": "3d4e5f6a-7b8c-4d9e-8f0a-1b2c3d4e5f6a",
                "medication_id": "3d4e5f6a-7b8c-4d9e-8f0a-1b2c3d4e5f6a",
                "name": "Metformin",
                "dosage": "500 mg",
                "frequency": "twice a day",
                "start_date": "2021-06-01",
                "end_date": None,
            }
        ]
    ),
    "prescriptions": _section(
        [
            {
                "id": "4e5f6a7b-8c9d-4e0f-9a1b-2c3d4e5f6a7b",
                "prescription_id": "4e5f6a7b-8c9d-4e0f-9a1b-2c3d4e5f6a7b",
                "prescription_number": "BLR-RX-2026-000042",
                "status": "active",
                "branch_id": _BLR,
                "doctor": _DOCTOR,
                "created_at": "2026-03-02T10:44:00+05:30",
                "items": [
                    {
                        "drug": "PARA500",
                        "name": "Paracetamol 500 mg",
                        "dose": "1 tablet",
                        "frequency": "three times a day",
                        "route": "oral",
                        "duration_days": 5,
                        "quantity": 15,
                        "dispensed_quantity": 15,
                        "instructions": "After food",
                    }
                ],
            }
        ]
    ),
    "dispenses": _section(
        [
            {
                "id": "5f6a7b8c-9d0e-4f1a-8b2c-3d4e5f6a7b8c",
                "dispense_id": "5f6a7b8c-9d0e-4f1a-8b2c-3d4e5f6a7b8c",
                "dispense_number": "BLR-DSP-2026-000077",
                "branch_id": _BLR,
                "prescription_id": "4e5f6a7b-8c9d-4e0f-9a1b-2c3d4e5f6a7b",
                "created_at": "2026-03-02T11:02:00+05:30",
                "lines": [
                    {
                        "drug": "PARA500",
                        "name": "Paracetamol 500 mg",
                        "batch": "B2405",
                        "quantity": 15,
                        "returned_quantity": 0,
                    }
                ],
            }
        ]
    ),
    "results": _section(
        [
            {
                "id": "6a7b8c9d-0e1f-4a2b-9c3d-4e5f6a7b8c9d",
                "result_id": "6a7b8c9d-0e1f-4a2b-9c3d-4e5f6a7b8c9d",
                "order_id": "7b8c9d0e-1f2a-4b3c-8d4e-5f6a7b8c9d0e",
                "order_number": "BLR-LAB-2026-000123",
                "test": "CBC",
                "test_name": "Complete blood count",
                "analyte": "HGB",
                "analyte_name": "Hemoglobin",
                "loinc_code": "718-7",
                "status": "final",
                "value_quantity": Decimal("10.9"),
                "value_text": None,
                "unit": "g/dL",
                "flag": "L",
                "reference_low": 12,
                "reference_high": Decimal("15.5"),
                "performed_at": "2026-03-02T13:15:00+05:30",
                "version": 1,
            }
        ]
    ),
}

RECORD_EXAMPLE = example("A clinical record (one entry per section shown)", RECORD)
NOT_FOUND_EXAMPLE = error_example(
    "Unknown patient, or one at a branch the client may not see",
    problem_body(404, "not_found", "Not found", "No patient 'PAT-999999'."),
)
