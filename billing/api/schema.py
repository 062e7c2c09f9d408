"""Examples of the billing operations' requests, responses and problems, for the OpenAPI document only (the
shapes are the TypedDicts of billing.representations)."""

from __future__ import annotations

from copy import deepcopy
from decimal import Decimal
from typing import Any

from drf_spectacular.utils import OpenApiExample

from clinic.api.schema import example, problem_body

BRANCH = {
    "id": "58d9b34e-ba12-4ecf-ae69-0f0b0bf7a591",
    "name": "Bengaluru Central Clinic",
    "gstin": "29AABCC1234D1Z7",
    "state": "Karnataka",
}
INVOICE_ID = "0f4b6c1e-2a7d-4c1b-9e55-3d8a1b2c4d5e"
FINALIZED: dict[str, Any] = {
    "id": INVOICE_ID,
    "invoice_number": "BLR/2026-27/00042",
    "date": "2026-11-21",
    "status": "finalized",
    "branch": BRANCH,
    "patient": {
        "id": "3f1c9b0e-8f4a-4c55-9a36-1f3c6d2e7b10",
        "patient_id": "PAT-000123",
        "name": "Priya Sharma",
    },
    "line_items": [
        {
            "id": "9a1d3f2e-4b5c-4d6e-8f70-1a2b3c4d5e6f",
            "service_name": "General consultation",
            "department": "General Medicine",
            "quantity": 1,
            "rate": Decimal("500.00"),
            "discount": Decimal("0.00"),
            "tax_rate": Decimal("0.00"),
            "tax_category": "exempt",
            "hsn_sac": "999312",
            "taxable_amount": Decimal("500.00"),
            "cgst": Decimal("0.00"),
            "sgst": Decimal("0.00"),
            "igst": Decimal("0.00"),
            "amount": Decimal("500.00"),
        },
        {
            "id": "b2c3d4e5-f607-4182-93a4-b5c6d7e8f901",
            "service_name": "Cosmetic laser session (per hour)",
            "department": "Dermatology",
            "quantity": Decimal("1.5"),
            "rate": Decimal("700.00"),
            "discount": Decimal("50.00"),
            "tax_rate": Decimal("18.00"),
            "tax_category": "taxable",
            "hsn_sac": "999722",
            "taxable_amount": Decimal("1000.00"),
            "cgst": Decimal("90.00"),
            "sgst": Decimal("90.00"),
            "igst": Decimal("0.00"),
            "amount": Decimal("1180.00"),
        },
    ],
    "totals": {
        "sub_total": Decimal("1550.00"),
        "discount": Decimal("50.00"),
        "taxable": Decimal("1500.00"),
        "cgst": Decimal("90.00"),
        "sgst": Decimal("90.00"),
        "igst": Decimal("0.00"),
        "tax": Decimal("180.00"),
        "grand_total": Decimal("1680.00"),
    },
    "hsn_summary": [
        {
            "hsn_sac": "999312",
            "tax_category": "exempt",
            "tax_rate": Decimal("0.00"),
            "taxable_value": Decimal("500.00"),
            "cgst": Decimal("0.00"),
            "sgst": Decimal("0.00"),
            "igst": Decimal("0.00"),
            "total_tax": Decimal("0.00"),
        },
        {
            "hsn_sac": "999722",
            "tax_category": "taxable",
            "tax_rate": Decimal("18.00"),
            "taxable_value": Decimal("1000.00"),
            "cgst": Decimal("90.00"),
            "sgst": Decimal("90.00"),
            "igst": Decimal("0.00"),
            "total_tax": Decimal("180.00"),
        },
    ],
    "payments": [],
    "credit_notes": [],
    "refunds": [],
    "paid": Decimal("0.00"),
    "credited": Decimal("0.00"),
    "net_total": Decimal("1680.00"),
    "refunded": Decimal("0.00"),
    "balance": Decimal("1680.00"),
    "refund_due": Decimal("0.00"),
}
FINALIZED["place_of_supply"] = "Karnataka"
FINALIZED["place_of_supply_code"] = "29"
PAYMENT = {
    "id": "c4d5e6f7-0819-4a2b-8c3d-4e5f60718293",
    "amount": Decimal("1000.00"),
    "payment_mode": "upi",
    "reference": "UPI-412345678901",
    "payment_date": "2026-11-21",
    "recorded_at": "2026-11-21T17:42:10+05:30",
}


def _invoice(**changes: Any) -> dict[str, Any]:
    value = deepcopy(FINALIZED)
    value.update(changes)
    return value


DRAFT_EXAMPLE = example("Draft", _invoice(invoice_number=None, status="draft"), "201")
EDITED_EXAMPLE = example("Edited draft", _invoice(invoice_number=None, status="draft"))
CREATED_FINALIZED_EXAMPLE = example("Created and finalized", FINALIZED, "201")
FINALIZED_EXAMPLE = example("Finalized", FINALIZED)
PARTIALLY_PAID_EXAMPLE = example(
    "Partially paid",
    _invoice(status="partially_paid", payments=[PAYMENT], paid=Decimal("1000.00"), balance=Decimal("680.00")),
)
CANCELLED_EXAMPLE = example("Cancelled", _invoice(status="cancelled"))
INTERSTATE_EXAMPLE = example(
    "Inter-state (IGST)",
    _invoice(
        line_items=[
            {
                **FINALIZED["line_items"][1],
                "cgst": Decimal("0.00"),
                "sgst": Decimal("0.00"),
                "igst": Decimal("180.00"),
            }
        ],
        totals={
            "sub_total": Decimal("1050.00"),
            "discount": Decimal("50.00"),
            "taxable": Decimal("1000.00"),
            "cgst": Decimal("0.00"),
            "sgst": Decimal("0.00"),
            "igst": Decimal("180.00"),
            "tax": Decimal("180.00"),
            "grand_total": Decimal("1180.00"),
        },
        hsn_summary=[
            {
                **FINALIZED["hsn_summary"][1],
                "cgst": Decimal("0.00"),
                "sgst": Decimal("0.00"),
                "igst": Decimal("180.00"),
            }
        ],
        place_of_supply="Tamil Nadu",
        place_of_supply_code="33",
        net_total=Decimal("1180.00"),
        balance=Decimal("1180.00"),
    ),
)
LIST_EXAMPLE = example(
    "Invoices",
    [
        {
            "id": INVOICE_ID,
            "invoice_number": "BLR/2026-27/00042",
            "patient_name": "Priya Sharma",
            "total": Decimal("1680.00"),
            "paid": Decimal("1000.00"),
            "balance": Decimal("680.00"),
            "status": "partially_paid",
            "date": "2026-11-21",
        },
        {
            "id": "6e5d4c3b-2a19-4807-b6a5-948372615049",
            "invoice_number": None,
            "patient_name": "Suresh Iyer",
            "total": Decimal("354.00"),
            "paid": Decimal("0.00"),
            "balance": Decimal("354.00"),
            "status": "draft",
            "date": "2026-11-20",
        },
    ],
)
CREATE_REQUEST = OpenApiExample(
    "Create and finalize",
    request_only=True,
    value={
        "patient_id": "PAT-000123",
        "branch_id": BRANCH["id"],
        "date": "2026-11-21",
        "line_items": [
            {"service_code": "CONS-GEN", "quantity": 1},
            {
                "service_name": "Cosmetic laser session (per hour)",
                "department": "Dermatology",
                "quantity": Decimal("1.5"),
                "rate": Decimal("700.00"),
                "discount": Decimal("50.00"),
                "tax_category": "taxable",
                "tax_rate": Decimal("18"),
                "hsn_sac": "999722",
            },
        ],
        "finalize": True,
    },
)
UPDATE_REQUEST = OpenApiExample(
    "Replace the lines",
    request_only=True,
    value={"line_items": [{"service_code": "ECG", "quantity": 1, "discount": Decimal("100.00")}]},
)
CANCEL_REQUEST = OpenApiExample("Cancel", request_only=True, value={"reason": "Raised against the wrong patient"})
PAYMENT_REQUEST = OpenApiExample(
    "UPI payment",
    request_only=True,
    value={
        "amount": Decimal("1000.00"),
        "payment_mode": "upi",
        "reference": "UPI-412345678901",
        "payment_date": "2026-11-21",
    },
)
PAYMENT_EXAMPLE = example(
    "Payment recorded",
    {
        "payment": PAYMENT,
        "invoice": {
            "id": INVOICE_ID,
            "status": "partially_paid",
            "paid": Decimal("1000.00"),
            "credited": Decimal("0.00"),
            "net_total": Decimal("1680.00"),
            "refunded": Decimal("0.00"),
            "balance": Decimal("680.00"),
            "refund_due": Decimal("0.00"),
        },
    },
    "201",
)
CREDIT_NOTE: dict[str, Any] = {
    "id": "e7f80912-3a4b-4c5d-9e6f-708192a3b4c5",
    "credit_note_number": "BLR/CN/2026-27/00007",
    "date": "2026-11-23",
    "invoice_id": INVOICE_ID,
    "invoice_number": "BLR/2026-27/00042",
    "reason": "Half an hour of the laser session not given",
    "lines": [
        {
            "id": "f8091a2b-3c4d-4e5f-8a7b-8c9d0e1f2a3b",
            "line_id": "b2c3d4e5-f607-4182-93a4-b5c6d7e8f901",
            "service_name": "Cosmetic laser session (per hour)",
            "hsn_sac": "999722",
            "tax_category": "taxable",
            "tax_rate": Decimal("18.00"),
            "quantity": Decimal("0.5"),
            "taxable_amount": Decimal("333.33"),
            "cgst": Decimal("30.00"),
            "sgst": Decimal("30.00"),
            "igst": Decimal("0.00"),
            "amount": Decimal("393.33"),
        }
    ],
    "totals": {
        "taxable": Decimal("333.33"),
        "cgst": Decimal("30.00"),
        "sgst": Decimal("30.00"),
        "igst": Decimal("0.00"),
        "tax": Decimal("60.00"),
        "total": Decimal("393.33"),
    },
    "created_at": "2026-11-23T11:05:40+05:30",
}
CREDIT_NOTE_EXAMPLE = example("Credit note", CREDIT_NOTE)
CREDIT_NOTE_LIST_EXAMPLE = example("Credit notes", [CREDIT_NOTE])
CREDIT_NOTE_REQUEST = OpenApiExample(
    "Credit half an hour",
    request_only=True,
    value={
        "reason": "Half an hour of the laser session not given",
        "lines": [{"line_id": "b2c3d4e5-f607-4182-93a4-b5c6d7e8f901", "quantity": Decimal("0.5")}],
    },
)
CREDIT_NOTE_ISSUED_EXAMPLE = example(
    "Credit note issued on a paid invoice",
    {
        "credit_note": CREDIT_NOTE,
        "invoice": {
            "id": INVOICE_ID,
            "status": "paid",
            "paid": Decimal("1680.00"),
            "credited": Decimal("393.33"),
            "net_total": Decimal("1286.67"),
            "refunded": Decimal("0.00"),
            "balance": Decimal("0.00"),
            "refund_due": Decimal("393.33"),
        },
    },
    "201",
)
REFUND_REQUEST = OpenApiExample(
    "Refund by UPI",
    request_only=True,
    value={"amount": Decimal("393.33"), "payment_mode": "upi", "reference": "UPI-RFND-512345678901"},
)
REFUND_EXAMPLE = example(
    "Refund recorded",
    {
        "refund": {
            "id": "0a1b2c3d-4e5f-4607-8819-2a3b4c5d6e7f",
            "amount": Decimal("393.33"),
            "payment_mode": "upi",
            "reference": "UPI-RFND-512345678901",
            "refund_date": "2026-11-23",
            "recorded_at": "2026-11-23T11:20:02+05:30",
        },
        "invoice": {
            "id": INVOICE_ID,
            "status": "paid",
            "paid": Decimal("1680.00"),
            "credited": Decimal("393.33"),
            "net_total": Decimal("1286.67"),
            "refunded": Decimal("393.33"),
            "balance": Decimal("0.00"),
            "refund_due": Decimal("0.00"),
        },
    },
    "201",
)
SUMMARY_EXAMPLE = example(
    "November at one branch",
    {
        "total_billed": Decimal("184250.00"),
        "total_collected": Decimal("151320.50"),
        "total_outstanding": Decimal("36410.00"),
        "total_credited": Decimal("2150.00"),
        "total_refunded": Decimal("1800.00"),
        "collection_by_mode": {
            "cash": Decimal("40210.00"),
            "card": Decimal("38000.50"),
            "upi": Decimal("61110.00"),
            "neft": Decimal("0.00"),
            "cheque": Decimal("0.00"),
            "online": Decimal("12000.00"),
            "insurance": Decimal("0.00"),
        },
        "revenue_by_department": {
            "Cardiology": Decimal("61200.00"),
            "General Medicine": Decimal("73500.00"),
            "Orthopaedics": Decimal("29400.00"),
        },
    },
)


INVALID_STATE_PAYMENT = problem_body(
    409,
    "invalid_state",
    "Invalid state",
    "Cannot pay an invoice that is draft; it must be finalized or partially_paid.",
    current_status="draft",
)
DUPLICATE_PAYMENT = problem_body(
    409,
    "duplicate_payment",
    "Duplicate payment",
    "This invoice already has a upi payment with reference 'UPI-412345678901'.",
    payment_mode="upi",
    reference="UPI-412345678901",
)
OVERPAYMENT = problem_body(
    400,
    "validation_error",
    "Invalid input",
    "The request has invalid fields.",
    errors=[{"field": "amount", "code": "invalid", "message": "Cannot exceed the balance of 680.00."}],
)
BAD_LINE = problem_body(
    400,
    "validation_error",
    "Invalid input",
    "The request has invalid fields.",
    errors=[
        {
            "field": "line_items.1.discount",
            "code": "invalid",
            "message": "The discount 1100.00 exceeds quantity x rate (1050.00).",
        }
    ],
)
INVALID_STATE_EDIT = problem_body(
    409,
    "invalid_state",
    "Invalid state",
    "Cannot edit an invoice that is finalized; it must be draft.",
    current_status="finalized",
)
INVALID_STATE_FINALIZE = problem_body(
    409,
    "invalid_state",
    "Invalid state",
    "Cannot finalize an invoice that is finalized; it must be draft.",
    current_status="finalized",
)
INVALID_STATE_CANCEL = problem_body(
    409,
    "invalid_state",
    "Invalid state",
    "Cannot cancel an invoice that is partially_paid; it must be draft or finalized.",
    current_status="partially_paid",
)

OVERCREDIT = problem_body(
    400,
    "validation_error",
    "Invalid input",
    "The request has invalid fields.",
    errors=[
        {
            "field": "lines.0.amount",
            "code": "invalid",
            "message": "At most 666.67 of taxable value is left on this line.",
        }
    ],
)
INVALID_STATE_CREDIT = problem_body(
    409,
    "invalid_state",
    "Invalid state",
    "Cannot credit an invoice that is draft; it must be finalized or partially_paid or paid.",
    current_status="draft",
)
OVERREFUND = problem_body(
    400,
    "validation_error",
    "Invalid input",
    "The request has invalid fields.",
    errors=[
        {
            "field": "amount",
            "code": "invalid",
            "message": "Cannot exceed what was paid and not yet refunded (393.33).",
        }
    ],
)
DUPLICATE_REFUND = problem_body(
    409,
    "duplicate_refund",
    "Duplicate refund",
    "This invoice already has a upi refund with reference 'UPI-RFND-512345678901'.",
    payment_mode="upi",
    reference="UPI-RFND-512345678901",
)
