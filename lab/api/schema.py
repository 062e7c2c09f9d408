"""Examples of the lab operations' requests, responses and problems, for the OpenAPI document only (the
shapes are the TypedDicts of lab.representations)."""

from __future__ import annotations

from copy import deepcopy
from decimal import Decimal
from typing import Any

from drf_spectacular.utils import OpenApiExample

from clinic.api.schema import example, problem_body

# --- Catalogue ---------------------------------------------------------------------------------------------

CBC: dict[str, Any] = {
    "id": "5c0e8f7a-1b2c-4d3e-9f40-5a6b7c8d9e01",
    "code": "CBC",
    "name": "Complete blood count",
    "loinc_code": "58410-2",
    "kind": "lab",
    "specimen_type": "Whole blood (EDTA)",
    "modality": None,
    "billing_service_code": "LAB-CBC",
    "analytes": [
        {
            "code": "HGB",
            "loinc_code": "718-7",
            "name": "Hemoglobin",
            "unit": "g/dL",
            "value_type": "quantity",
            "coded_values": [],
            "critical_low": 7,
            "critical_high": 20,
            "reference_ranges": [
                {
                    "sex": "any",
                    "age_min_days": 365,
                    "age_max_days": 6570,
                    "low": Decimal("11.5"),
                    "high": Decimal("15.5"),
                },
                {"sex": "female", "age_min_days": 6570, "age_max_days": None, "low": 12, "high": Decimal("15.5")},
                {
                    "sex": "male",
                    "age_min_days": 6570,
                    "age_max_days": None,
                    "low": Decimal("13.5"),
                    "high": Decimal("17.5"),
                },
            ],
        }
    ],
}
BLOOD_GROUP: dict[str, Any] = {
    "id": "8d2f4a6b-3c5e-4f70-8a91-b2c3d4e5f607",
    "code": "BLOOD-GROUP",
    "name": "ABO and Rh blood group",
    "loinc_code": "882-1",
    "kind": "lab",
    "specimen_type": "Whole blood (EDTA)",
    "modality": None,
    "billing_service_code": None,
    "analytes": [
        {
            "code": "ABO",
            "loinc_code": "883-9",
            "name": "ABO group",
            "unit": None,
            "value_type": "coded",
            "coded_values": ["A", "B", "AB", "O"],
            "critical_low": None,
            "critical_high": None,
            "reference_ranges": [],
        }
    ],
}
CHEST_XRAY: dict[str, Any] = {
    "id": "a7b8c9d0-e1f2-4a3b-8c4d-5e6f7a8b9c0d",
    "code": "XR-CHEST",
    "name": "XR Chest 2 views",
    "loinc_code": "36643-5",
    "kind": "imaging",
    "specimen_type": None,
    "modality": "XR",
    "billing_service_code": "RAD-XR-CHEST",
    "analytes": [],
}
LAB_TESTS_EXAMPLE = OpenApiExample("Lab and imaging tests", response_only=True, value=[BLOOD_GROUP, CBC, CHEST_XRAY])


# --- Orders

ORDER_ID = "7c0e4b1a-3d2f-4e5a-9b6c-1d2e3f4a5b6c"
BRANCH_ID = "58d9b34e-ba12-4ecf-ae69-0f0b0bf7a591"
ORDER: dict[str, Any] = {
    "id": ORDER_ID,
    "order_id": ORDER_ID,
    "order_number": "BLR-LAB-2026-000123",
    "status": "ordered",
    "priority": "urgent",
    "patient": {"id": "3f1c9b0e-8f4a-4c55-9a36-1f3c6d2e7b10", "patient_id": "PAT-000123", "name": "Priya Sharma"},
    "doctor": {"id": "5a6b7c8d-9e0f-4a1b-8c2d-3e4f5a6b7c8d", "name": "Dr. Anil Rao"},
    "branch_id": BRANCH_ID,
    "appointment_id": "c1d2e3f4-a5b6-4c7d-8e9f-0a1b2c3d4e5f",
    "clinical_notes": "Fever for five days; rule out dengue.",
    "invoice_id": "0f4b6c1e-2a7d-4c1b-9e55-3d8a1b2c4d5e",
    "items": [
        {
            "id": "1a2b3c4d-5e6f-4a7b-8c9d-0e1f2a3b4c5d",
            "item_id": "1a2b3c4d-5e6f-4a7b-8c9d-0e1f2a3b4c5d",
            "test": {"code": "CBC", "name": "Complete blood count", "loinc_code": "58410-2", "kind": "lab"},
            "accession_number": "BLR-26-0000457",
            "status": "ordered",
            "modality": None,
            "study_instance_uid": None,
            "specimen_type": "Whole blood",
            "results": [],
        },
        {
            "id": "2b3c4d5e-6f7a-4b8c-9d0e-1f2a3b4c5d6e",
            "item_id": "2b3c4d5e-6f7a-4b8c-9d0e-1f2a3b4c5d6e",
            "test": {"code": "XR-CHEST", "name": "Chest X-ray PA view", "loinc_code": "36643-5", "kind": "imaging"},
            "accession_number": "BLR-26-0000458",
            "status": "scheduled",
            "modality": "XR",
            "study_instance_uid": "2.25.57469910857750911523555601213654064494",
            "specimen_type": None,
            "results": [],
        },
    ],
    "created_at": "2026-11-21T10:15:00+05:30",
    "collected_at": None,
    "cancelled_at": None,
    "cancellation_reason": None,
}


def _order(**changes: Any) -> dict[str, Any]:
    order = deepcopy(ORDER)
    order.update(changes)
    return order


def _collected() -> dict[str, Any]:
    order = _order(status="collected", collected_at="2026-11-21T10:40:00+05:30")
    order["items"][0]["status"] = "collected"
    return order


def _cancelled() -> dict[str, Any]:
    order = _order(status="cancelled", cancelled_at="2026-11-21T10:30:00+05:30", cancellation_reason="Ordered twice")
    for item in order["items"]:
        item["status"] = "cancelled"
    return order


ORDER_CREATE_REQUEST = OpenApiExample(
    "Order a CBC and a chest X-ray, billed",
    request_only=True,
    value={
        "patient_id": "PAT-000123",
        "branch_id": BRANCH_ID,
        "doctor_id": "5a6b7c8d-9e0f-4a1b-8c2d-3e4f5a6b7c8d",
        "tests": ["CBC", "XR-CHEST"],
        "priority": "urgent",
        "clinical_notes": "Fever for five days; rule out dengue.",
        "appointment_id": "c1d2e3f4-a5b6-4c7d-8e9f-0a1b2c3d4e5f",
        "bill": True,
    },
)
ORDER_CANCEL_REQUEST = OpenApiExample("Cancel", request_only=True, value={"reason": "Ordered twice"})
ORDER_CREATED_EXAMPLE = example("Ordered", ORDER, "201")
ORDER_EXAMPLE = example("Ordered", ORDER)
ORDER_COLLECTED_EXAMPLE = example("Collected", _collected())
ORDER_CANCELLED_EXAMPLE = example("Cancelled", _cancelled())
ORDER_LIST_EXAMPLE = example("Orders", [ORDER])

BAD_TEST = problem_body(
    400,
    "validation_error",
    "Invalid input",
    "The request has invalid fields.",
    errors=[{"field": "tests.1", "code": "invalid", "message": "No test 'XR-KNEE' in the catalogue."}],
)
INVALID_STATE_COLLECT = problem_body(
    409,
    "invalid_state",
    "Invalid state",
    "Cannot collect an order that is collected; it must be ordered.",
    current_status="collected",
)
INVALID_STATE_CANCEL = problem_body(
    409,
    "invalid_state",
    "Invalid state",
    "Cannot cancel an order that is collected; it must be ordered.",
    current_status="collected",
)

RESULTS_REQUEST = OpenApiExample(
    "Final CBC results",
    request_only=True,
    value={
        "results": [
            {"test": "CBC", "analyte": "HGB", "value": Decimal("10.9"), "unit": "g/dL"},
            {"test": "CBC", "analyte": "WBC", "value": Decimal("7.2")},
            {"test": "CBC", "analyte": "PLT", "value": 18, "note": "Clumping excluded on smear"},
            {"test": "CBC", "analyte": "HCT", "value": Decimal("33.1")},
        ],
        "performed_at": "2026-11-21T12:05:00+05:30",
        "performer": "K. Menon, lab technologist",
        "status": "final",
    },
)
AMEND_REQUEST = OpenApiExample(
    "Amend a final result",
    request_only=True,
    value={
        "results": [{"test": "CBC", "analyte": "HGB", "value": Decimal("11.4"), "unit": "g/dL"}],
        "performed_at": "2026-11-21T14:30:00+05:30",
        "performer": "Dr. S. Iyer, pathologist",
        "status": "amended",
        "reason": "Re-run after a haemolysed first sample",
    },
)


def _resulted() -> dict[str, Any]:
    order = _collected()
    order["status"] = "resulted"
    item = order["items"][0]
    item["status"] = "final"
    version = {
        "id": "3c4d5e6f-7a8b-4c9d-8e0f-1a2b3c4d5e6f",
        "result_id": "3c4d5e6f-7a8b-4c9d-8e0f-1a2b3c4d5e6f",
        "version": 1,
        "status": "final",
        "value_quantity": Decimal("10.9"),
        "comparator": None,
        "value_quantity_high": None,
        "value_text": None,
        "unit": "g/dL",
        "flag": "L",
        "reference_low": Decimal("12"),
        "reference_high": Decimal("15.5"),
        "reported_range": "11.5-16.0",
        "reported_flag": "L",
        "note": None,
        "reason": None,
        "performed_at": "2026-11-21T12:05:00+05:30",
        "performer": "K. Menon, lab technologist",
        "recorded_at": "2026-11-21T12:06:10+05:30",
    }
    item["results"] = [{"analyte": {"code": "HGB", "name": "Haemoglobin"}, "current": version, "history": []}]
    return order


ORDER_RESULTED_EXAMPLE = example("Results recorded", _resulted(), "201")
BAD_UNIT = problem_body(
    400,
    "validation_error",
    "Invalid input",
    "The request has invalid fields.",
    errors=[{"field": "results.0.unit", "code": "invalid", "message": "Must be g/dL (UCUM), the unit of HGB."}],
)
INVALID_STATE_RESULT = problem_body(
    409,
    "invalid_state",
    "Invalid state",
    "results.0: the HGB result is final; correct it with status amended and a reason.",
    current_status="final",
)
