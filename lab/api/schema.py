"""Examples of the lab operations' requests, responses and problems, for the OpenAPI document only (the
shapes are the TypedDicts of lab.representations)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from drf_spectacular.utils import OpenApiExample

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
