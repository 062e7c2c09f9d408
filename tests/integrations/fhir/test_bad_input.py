"""No input makes the FHIR server answer 500: every declared search parameter of every type, and the result
parameters, with values built to break parsers (docs/api-rules.md §7). Each answer is 200 or a 4xx
OperationOutcome, and the server's own R4 check of the 200s holds."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import pytest

from integrations.fhir.registry import RESOURCE_TYPES
from tests.emr.world import RecordWorld
from tests.integrations.fhir.conftest import ALL_READ
from tests.integrations.fhir.helpers import fhir_get

pytestmark = pytest.mark.django_db

NASTY = [
    "",
    ",",
    "|",
    "||",
    "a|",
    "|a",
    "x" * 1001,
    "x" * 999,
    "Patient/",
    "Patient/" + "9" * 70,
    "http://e.org/Patient/00000000-0000-0000-0000-000000000000",
    "00000000-0000-0000-0000-000000000000",
    "-1",
    "99999999999999999999999",
    "1e309",
    "NaN",
    "0000-01-01",
    "9999-12-31",
    "ge9999-12-31T23:59:59+14:00",
    "lt0001-01-01T00:00:00-12:00",
    "2026-01-01T25:61:61Z",
    "ap2026",
    "zz2026",
    "2026-01-01T10:00:00+99:99",
    "(.*)+$",
    "[",
    "\\",
    "'; DROP TABLE patients_patient; --",
    "\u00e9\u00e8",
    "\U0001f600",
    "Ω|Ω",
]


@pytest.mark.parametrize("resource_type", sorted(RESOURCE_TYPES))
def test_no_search_value_makes_a_500(world: RecordWorld, token_for: Any, resource_type: str) -> None:
    token = token_for(ALL_READ)
    names = [*RESOURCE_TYPES[resource_type].params, "_count", "_offset", "_sort", "_include", "_format"]
    names += ["_summary", "_elements", "_total", "_lastUpdated"]
    for name in names:
        for value in NASTY:
            response = fhir_get(token, f"{resource_type}?{quote(name)}={quote(value, safe='')}")
            assert response.status_code in (200, 400, 403, 406), (name, value, response.content[:300])
            assert response.json()["resourceType"] in ("Bundle", "OperationOutcome")


@pytest.mark.parametrize(
    "path", ["Patient/" + "x" * 5000, "Slot/" + "9" * 200, "Slot/a-b-99999999999", "$export-status/x"]
)
def test_odd_ids_are_404(world: RecordWorld, token_for: Any, path: str) -> None:
    response = fhir_get(token_for(ALL_READ), path)

    assert response.status_code == 404
    assert response.json()["resourceType"] == "OperationOutcome"
