"""Examples of the pharmacy operations' requests, responses and problems, for the OpenAPI document only (the
shapes are the TypedDicts of pharmacy.representations)."""

from __future__ import annotations

from copy import deepcopy
from decimal import Decimal
from typing import Any

from clinic.api.schema import example, problem_body, request_example

BRANCH_ID = "58d9b34e-ba12-4ecf-ae69-0f0b0bf7a591"
PATIENT = {"id": "3f1c9b0e-8f4a-4c55-9a36-1f3c6d2e7b10", "patient_id": "PAT-000123", "name": "Priya Sharma"}


# --- Catalogue and stock

PARA500: dict[str, Any] = {
    "id": "6b1d2c3e-4f50-4a61-8b72-9c8d7e6f5a41",
    "code": "PARA500",
    "generic_name": "Paracetamol",
    "brand_name": "Crocin",
    "form": "tablet",
    "strength": "500 mg",
    "hsn_code": "30049099",
    "gst_rate": Decimal("12.00"),
    "schedule": "OTC",
    "unit": "tablet",
    "mrp": Decimal("2.00"),
}
AMOX: dict[str, Any] = {
    "id": "7c2e3d4f-5061-4b72-9c83-0d9e8f7a6b52",
    "code": "AMOX500",
    "generic_name": "Amoxicillin",
    "brand_name": "Mox",
    "form": "capsule",
    "strength": "500 mg",
    "hsn_code": "30041010",
    "gst_rate": Decimal("12.00"),
    "schedule": "H",
    "unit": "capsule",
    "mrp": Decimal("8.50"),
}
DRUGS_EXAMPLE = example("Drugs", [AMOX, PARA500])

PARA_REF = {
    "code": "PARA500",
    "name": "Paracetamol 500 mg tablet",
    "brand_name": "Crocin",
    "schedule": "OTC",
    "unit": "tablet",
}
AMOX_REF = {
    "code": "AMOX500",
    "name": "Amoxicillin 500 mg capsule",
    "brand_name": "Mox",
    "schedule": "H",
    "unit": "capsule",
}
BATCH = {
    "id": "8d3f4e50-6172-4c83-8d94-1e0f9a8b7c63",
    "batch_id": "8d3f4e50-6172-4c83-8d94-1e0f9a8b7c63",
    "batch_number": "CR2611A",
    "expiry_date": "2028-03-31",
    "quantity_on_hand": 480,
    "unit_cost": Decimal("1.20"),
    "mrp": Decimal("2.00"),
    "expired": False,
}
STOCK: dict[str, Any] = {
    "drug": PARA_REF,
    "branch_id": BRANCH_ID,
    "on_hand": 480,
    "expired_on_hand": 20,
    "reorder_level": 200,
    "below_reorder": False,
    "batches": [
        {
            **BATCH,
            "id": "9e405f61-7283-4d94-9ea5-2f1a0b9c8d74",
            "batch_id": "9e405f61-7283-4d94-9ea5-2f1a0b9c8d74",
            "batch_number": "CR2509X",
            "expiry_date": "2026-10-31",
            "quantity_on_hand": 20,
            "expired": True,
        },
        BATCH,
    ],
}
STOCK_EXAMPLE = example("Stock", [STOCK])

RECEIPT_REQUEST = request_example(
    "Receive a batch",
    {
        "drug": "PARA500",
        "batch_number": "CR2611A",
        "expiry_date": "2028-03-31",
        "quantity": 500,
        "unit_cost": Decimal("1.20"),
        "mrp": Decimal("2.00"),
    },
)
RECEIPT_EXAMPLE = example(
    "Received",
    {
        "movement_id": 1041,
        "kind": "receipt",
        "quantity": 500,
        "reason": None,
        "actor": "api:Front desk",
        "at": "2026-11-21T09:30:00+05:30",
        "drug": PARA_REF,
        "branch_id": BRANCH_ID,
        "batch": {**BATCH, "quantity_on_hand": 500},
    },
    "201",
)
ADJUSTMENT_REQUEST = request_example(
    "Breakage", {"drug": "PARA500", "batch_number": "CR2611A", "quantity": -20, "reason": "Strip damaged"}
)
ADJUSTMENT_EXAMPLE = example(
    "Adjusted",
    {
        "movement_id": 1042,
        "kind": "adjustment",
        "quantity": -20,
        "reason": "Strip damaged",
        "actor": "api:Front desk",
        "at": "2026-11-21T11:00:00+05:30",
        "drug": PARA_REF,
        "branch_id": BRANCH_ID,
        "batch": BATCH,
    },
    "201",
)
BAD_QUANTITY = problem_body(
    400,
    "validation_error",
    "Invalid input",
    "The request has invalid fields.",
    errors=[{"field": "quantity", "code": "invalid", "message": "A whole number of units (a JSON integer)."}],
)
INSUFFICIENT_STOCK = problem_body(
    409,
    "insufficient_stock",
    "Insufficient stock",
    "12 units of AMOX500 are on hand (expired batches apart).",
    drug="AMOX500",
    available=12,
)

# --- Prescriptions

PRESCRIPTION: dict[str, Any] = {
    "id": "a1b2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c5d",
    "prescription_id": "a1b2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c5d",
    "prescription_number": "BLR-RX-2026-000123",
    "status": "active",
    "patient": PATIENT,
    "doctor": {"id": "5a6b7c8d-9e0f-4a1b-8c2d-3e4f5a6b7c8d", "name": "Dr. Anil Rao"},
    "branch_id": BRANCH_ID,
    "appointment_id": None,
    "items": [
        {
            "id": "b2c3d4e5-f6a7-4b8c-9d0e-1f2a3b4c5d6e",
            "item_id": "b2c3d4e5-f6a7-4b8c-9d0e-1f2a3b4c5d6e",
            "drug": AMOX_REF,
            "dose": "1 capsule",
            "frequency": "three times a day",
            "route": "oral",
            "duration_days": 5,
            "quantity": 15,
            "instructions": "After food",
            "dispensed": 0,
            "remaining": 15,
        }
    ],
    "created_by": "api:Front desk",
    "created_at": "2026-11-21T10:15:00+05:30",
    "cancelled_at": None,
    "cancellation_reason": None,
}
PRESCRIPTION_REQUEST = request_example(
    "Prescribe",
    {
        "patient_id": "PAT-000123",
        "doctor_id": "5a6b7c8d-9e0f-4a1b-8c2d-3e4f5a6b7c8d",
        "items": [
            {
                "drug": "AMOX500",
                "dose": "1 capsule",
                "frequency": "three times a day",
                "route": "oral",
                "duration_days": 5,
                "quantity": 15,
                "instructions": "After food",
            }
        ],
    },
)
PRESCRIPTION_CREATED_EXAMPLE = example("Prescribed", PRESCRIPTION, "201")
PRESCRIPTION_EXAMPLE = example("Prescription", PRESCRIPTION)
PRESCRIPTIONS_EXAMPLE = example("Prescriptions", [PRESCRIPTION])


def _cancelled() -> dict[str, Any]:
    cancelled = deepcopy(PRESCRIPTION)
    cancelled.update(status="cancelled", cancelled_at="2026-11-21T10:30:00+05:30", cancellation_reason="Wrong drug")
    cancelled["items"][0]["remaining"] = 0
    return cancelled


CANCEL_REQUEST = request_example("Cancel", {"reason": "Wrong drug"})
PRESCRIPTION_CANCELLED_EXAMPLE = example("Cancelled", _cancelled())
INVALID_STATE_CANCEL = problem_body(
    409,
    "invalid_state",
    "Invalid state",
    "Cannot cancel a prescription that is completed; it must be active.",
    current_status="completed",
)

# --- Dispenses

DISPENSE: dict[str, Any] = {
    "id": "c3d4e5f6-a7b8-4c9d-8e0f-2a3b4c5d6e7f",
    "dispense_id": "c3d4e5f6-a7b8-4c9d-8e0f-2a3b4c5d6e7f",
    "dispense_number": "BLR-DSP-2026-000456",
    "branch_id": BRANCH_ID,
    "patient": PATIENT,
    "prescription_id": PRESCRIPTION["prescription_id"],
    "prescription_number": "BLR-RX-2026-000123",
    "invoice_id": "0f4b6c1e-2a7d-4c1b-9e55-3d8a1b2c4d5e",
    "lines": [
        {
            "id": "d4e5f6a7-b8c9-4d0e-9f1a-3b4c5d6e7f80",
            "line_id": "d4e5f6a7-b8c9-4d0e-9f1a-3b4c5d6e7f80",
            "drug": AMOX_REF,
            "batch_number": "MX2604B",
            "expiry_date": "2027-04-30",
            "quantity": 10,
            "returned_quantity": 0,
            "unit_price": Decimal("8.50"),
            "amount": Decimal("85.00"),
            "prescription_item_id": "b2c3d4e5-f6a7-4b8c-9d0e-1f2a3b4c5d6e",
        },
        {
            "id": "e5f6a7b8-c9d0-4e1f-8a2b-4c5d6e7f8091",
            "line_id": "e5f6a7b8-c9d0-4e1f-8a2b-4c5d6e7f8091",
            "drug": AMOX_REF,
            "batch_number": "MX2611C",
            "expiry_date": "2027-11-30",
            "quantity": 5,
            "returned_quantity": 0,
            "unit_price": Decimal("8.50"),
            "amount": Decimal("42.50"),
            "prescription_item_id": "b2c3d4e5-f6a7-4b8c-9d0e-1f2a3b4c5d6e",
        },
    ],
    "total": Decimal("127.50"),
    "returns": [],
    "dispensed_by": "api:Front desk",
    "created_at": "2026-11-21T10:40:00+05:30",
}
DISPENSE_REQUEST = request_example(
    "Dispense a prescription and bill it",
    {"prescription_id": PRESCRIPTION["prescription_id"], "items": [{"drug": "AMOX500", "quantity": 15}], "bill": True},
)
OTC_REQUEST = request_example("Over the counter", {"items": [{"drug": "PARA500", "quantity": 10, "batch": "CR2611A"}]})
DISPENSE_CREATED_EXAMPLE = example("Dispensed", DISPENSE, "201")
DISPENSE_EXAMPLE = example("Dispense", DISPENSE)
DISPENSES_EXAMPLE = example("Dispenses", [DISPENSE])


def _returned() -> dict[str, Any]:
    returned = deepcopy(DISPENSE)
    returned["lines"][1]["returned_quantity"] = 2
    returned["returns"] = [
        {
            "id": "f6a7b8c9-d0e1-4f2a-9b3c-5d6e7f8091a2",
            "return_id": "f6a7b8c9-d0e1-4f2a-9b3c-5d6e7f8091a2",
            "reason": "Course changed",
            "returned_by": "api:Front desk",
            "at": "2026-11-22T09:10:00+05:30",
            "lines": [{"line_id": returned["lines"][1]["line_id"], "quantity": 2}],
        }
    ]
    return returned


RETURN_REQUEST = request_example(
    "Return", {"reason": "Course changed", "lines": [{"line_id": DISPENSE["lines"][1]["line_id"], "quantity": 2}]}
)
RETURNED_EXAMPLE = example("Returned", _returned(), "201")
PRESCRIPTION_REQUIRED = problem_body(
    409,
    "prescription_required",
    "Prescription required",
    "AMOX500 is a Schedule H drug: dispensed against a prescription only.",
    drug="AMOX500",
)
EXCEEDS_PRESCRIPTION = problem_body(
    409,
    "exceeds_prescription",
    "Exceeds the prescription",
    "The prescription allows 5 more units of AMOX500.",
    drug="AMOX500",
    remaining=5,
)
BATCH_EXPIRED = problem_body(
    409,
    "batch_expired",
    "Batch expired",
    "The batch CR2509X of PARA500 expired on 2026-10-31.",
    drug="PARA500",
    batch="CR2509X",
)
EXCEEDS_DISPENSED = problem_body(
    409,
    "exceeds_dispensed",
    "Exceeds what was dispensed",
    "3 units of this line may still come back.",
    line_id=DISPENSE["lines"][1]["line_id"],
    returnable=3,
)
