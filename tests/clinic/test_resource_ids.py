"""docs/api-rules.md §1: every resource representation has `id`; the older self-references (`order_id`, `prescription_id`,
`dispense_id`, `batch_id`, `line_id`, `result_id`, ...) stay in v1 as deprecated aliases of it. The exact-body
tests of each resource (tests/lab/test_orders_api.py, tests/pharmacy/*, tests/emr/test_record_api.py,
tests/appointments/test_booking.py) prove that the alias carries the same value as `id`; these walk the
document, so a new resource without `id` or a new alias left undeclared fails here."""

from __future__ import annotations

import json
from typing import Any

import pytest

pytestmark = pytest.mark.django_db

# Answers that are not one resource: aggregates, a slot of the grid, and a wrapper of two resources (each of
# which has its `id`). A stock movement is a line of the ledger, numbered by its sequence (`movement_id`, an
# integer), not a resource with a URL of its own.
NOT_A_RESOURCE = {
    "ClinicalRecordBody",
    "CreditNoteIssued",
    "FinancialSummary",
    "PaymentRecorded",
    "RefundRecorded",
    "Slot",
    "StockLevel",
    "StockMovement",
}
SELF_REFERENCES = {
    "LabOrder": "order_id",
    "LabOrderItem": "item_id",
    "LabResultVersion": "result_id",
    "Prescription": "prescription_id",
    "PrescriptionItem": "item_id",
    "Dispense": "dispense_id",
    "DispenseLine": "line_id",
    "DispenseReturn": "return_id",
    "StockBatch": "batch_id",
    "Encounter": "encounter_id",
    "RecordDiagnosis": "diagnosis_id",
    "RecordAllergy": "allergy_id",
    "RecordMedication": "medication_id",
    "RecordPrescription": "prescription_id",
    "RecordDispense": "dispense_id",
    "RecordLabResult": "result_id",
}


@pytest.fixture(scope="module")
def schema(django_db_setup: None, django_db_blocker: Any) -> dict[str, Any]:
    from django.test import Client

    with django_db_blocker.unblock():
        response = Client().get("/api/v1/schema", {"format": "json"})
    assert response.status_code == 200
    return json.loads(response.content)


def _answered_components(schema: dict[str, Any]) -> set[str]:
    """The components a 2xx JSON answer of some operation is (or is a list of)."""
    names = set()
    for item in schema["paths"].values():
        for operation in item.values():
            if not isinstance(operation, dict):
                continue
            for status, response in operation.get("responses", {}).items():
                if not status.startswith("2"):
                    continue
                for content in (response.get("content") or {}).values():
                    body = content.get("schema", {})
                    ref = body.get("$ref") or body.get("items", {}).get("$ref")
                    if ref:
                        names.add(ref.rsplit("/", 1)[-1])
    return names


def test_every_resource_an_operation_answers_with_has_a_required_uuid_id(schema):
    components = schema["components"]["schemas"]
    answered = _answered_components(schema)
    assert answered >= {
        "PatientProfile",
        "Appointment",
        "InvoiceDetail",
        "LabOrder",
        "Prescription",
        "Dispense",
        "Drug",
    }
    without = sorted(
        name
        for name in answered - NOT_A_RESOURCE
        if components[name].get("properties", {}).get("id", {}).get("format") != "uuid"
        or "id" not in components[name].get("required", [])
    )
    assert without == []


def test_the_older_self_references_are_deprecated_aliases_beside_id(schema):
    components = schema["components"]["schemas"]
    for name, alias in SELF_REFERENCES.items():
        properties = components[name]["properties"]
        assert "id" in components[name]["required"], name
        assert properties[alias]["deprecated"] is True, name
        assert "`id`" in properties[alias]["description"], name
    deprecated = {
        (name, field)
        for name, component in components.items()
        for field, spec in component.get("properties", {}).items()
        if spec.get("deprecated")
    }
    assert deprecated == set(SELF_REFERENCES.items())


def test_the_appointment_keeps_the_specifications_appointment_id_undeprecated(schema):
    appointment = schema["components"]["schemas"]["Appointment"]
    assert {"id", "appointment_id"} <= set(appointment["required"])
    assert "deprecated" not in appointment["properties"]["appointment_id"]
