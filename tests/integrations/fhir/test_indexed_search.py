"""Searches are answered by indexes, not by scanning: each search's SQL, planned with sequential scans
and plain index scans disabled (the test tables are tiny, where a scan, or a walk down the sort order's index,
is cheapest), uses the index built for it. A filter that no
index serves would still plan a sequential scan here and fail."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection

from integrations.fhir import query
from integrations.fhir.registry import RESOURCE_TYPES
from tests.emr.world import RecordWorld
from tests.factories import ApiClientFactory

pytestmark = pytest.mark.django_db


def _plan(client: Any, resource_type: str, params: list[tuple[str, str]]) -> str:
    resource = RESOURCE_TYPES[resource_type]
    rows = query.rows(client, resource, query.parse(resource, params, lenient=False))
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        # Nor a walk down the sort order's index filtering every row (cheapest on a tiny table, depending on
        # what the other tests left in its statistics): only an index that answers the condition is left.
        cursor.execute("SET LOCAL enable_indexscan = off")
    return rows.explain()


@pytest.mark.parametrize(
    ("resource_type", "params", "index"),
    [
        ("Patient", [("birthdate", "ge1990-01-01"), ("birthdate", "lt1991")], "patient_birth_date"),
        ("Patient", [("identifier", "PAT-000123")], "patient_id_normalised"),
        # Through the name words' dictionary, then the patients by search_name: patient_name_page, or the trigram
        # index, which answers equality too (the planner's pick depends on what other tests left in the stats).
        ("Patient", [("name", "pri")], ("patient_name_page", "patient_name_trgm")),
        ("Patient", [("name", "priya sh")], "patient_name_trgm"),
        ("Patient", [("phone", "543210")], "patient_phone_tail"),
        ("Encounter", [("date", "ge2026-01-01")], "visit_start_order"),
        ("Appointment", [("date", "2026-03-02")], "appointment_start_order"),
    ],
)
def test_each_search_plans_its_index(
    world: RecordWorld, resource_type: str, params: list[tuple[str, str]], index: str | tuple[str, ...]
) -> None:
    plan = _plan(_client(), resource_type, params)

    assert any(name in plan for name in ((index,) if isinstance(index, str) else index)), plan
    assert "Seq Scan" not in plan, plan


@pytest.mark.parametrize(
    ("resource_type", "index"),
    [
        ("Encounter", "visit_patient_history"),
        ("Condition", "patients_diagnosis_patient_id"),
        ("Observation", "laborder_patient"),  # laborder_patient_created, or the foreign key's own index
        ("MedicationRequest", "prescription_patient_created"),
        # appointment_patient_start, or the foreign key's own index: both answer patient_id equality, and the
        # bitmap scan's pick between them depends on what the other tests left in the statistics.
        ("Appointment", ("appointment_patient_start", "appointments_appointment_patient_id")),
    ],
)
def test_a_patients_resources_are_found_by_the_patient_index(
    world: RecordWorld, resource_type: str, index: str | tuple[str, ...]
) -> None:
    plan = _plan(_client(), resource_type, [("patient", f"Patient/{world.patient.id}")])

    assert any(name in plan for name in ((index,) if isinstance(index, str) else index)), plan
    assert "Seq Scan" not in plan, plan


def _client() -> Any:
    return ApiClientFactory(allowed_scopes=["patients:read"])
