"""An Observation of a result a laboratory reported with a comparator, as a range, or with its own reference
range (docs/operations.md §6): valueQuantity.comparator, valueRange and referenceRange.text; every resource
emitted is validated with fhir.resources (conftest)."""

from __future__ import annotations

from typing import Any

from django.utils import timezone

from integrations.fhir import r4
from lab.models import LabResult
from lab.results import ResultInput, lab_results_record
from tests.emr.world import RecordWorld
from tests.integrations.fhir.helpers import fhir_get

QUANTITY = {"system": "http://unitsofmeasure.org", "code": "g/dL", "unit": "g/dL"}


def _amend(world: RecordWorld, **reported: Any) -> LabResult:
    lab_results_record(
        order=world.order,
        results=[ResultInput(test="CBC", analyte="HGB", unit="g/dL", **reported)],
        performed_at=timezone.now(),
        performer="Lab tech",
        status="amended",
        reason="Re-run",
    )
    return LabResult.objects.get(item__order=world.order, analyte__code="HGB", current=True)


def test_a_comparator_value_and_the_laboratorys_range_are_in_the_observation(
    world: RecordWorld, token_for: Any
) -> None:
    result = _amend(world, value="16", comparator=">", reported_range="11.5-16.0 g/dL", reported_flag="H")
    body = fhir_get(token_for(["lab:read"]), f"Observation/{result.id}").json()
    assert body["valueQuantity"] == {"value": 16, "comparator": ">", **QUANTITY}
    assert body["interpretation"][0]["coding"][0]["code"] == "H"  # every value above 16 is above 15.5
    assert body["referenceRange"] == [
        {"low": {"value": 12, **QUANTITY}, "high": {"value": 15.5, **QUANTITY}, "text": "11.5-16.0 g/dL"}
    ]
    assert r4.model_class("Observation").parse_obj(body).valueQuantity.comparator == ">"


def test_a_range_value_is_a_value_range(world: RecordWorld, token_for: Any) -> None:
    result = _amend(world, value="10", value_high="20")
    body = fhir_get(token_for(["lab:read"]), f"Observation/{result.id}").json()
    assert "valueQuantity" not in body
    assert body["valueRange"] == {"low": {"value": 10, **QUANTITY}, "high": {"value": 20, **QUANTITY}}
    assert "interpretation" not in body  # low at one end, high at the other
