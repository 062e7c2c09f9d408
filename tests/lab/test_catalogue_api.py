"""GET /api/v1/lab/tests (docs/api-rules.md §13): the active catalogue by code with analytes and their
reference ranges, the kind and modality filters, pagination in headers, the scope, and a query count that
does not grow with the catalogue."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from lab.models import Analyte, LabTest, ReferenceRange
from tests.helpers import bearer
from tests.lab.catalogue import seed_catalogue

pytestmark = pytest.mark.django_db

URL = "/api/v1/lab/tests"


@pytest.fixture
def token(token_for):
    return token_for(["lab:read"])


@pytest.fixture
def catalogue():
    return seed_catalogue()


def test_the_list_is_the_active_catalogue_by_code_with_analytes_and_ranges(client, token, catalogue):
    response = client.get(URL, **bearer(token))

    assert response.status_code == 200, response.content
    assert response["X-Total-Count"] == "3"
    assert response.json() == [
        {
            "id": str(catalogue["BLOOD-GROUP"].id),
            "code": "BLOOD-GROUP",
            "name": "Blood group",
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
        },
        {
            "id": str(catalogue["CBC"].id),
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
                    "critical_high": 20.5,
                    "reference_ranges": [
                        {"sex": "any", "age_min_days": 365, "age_max_days": 6570, "low": 11.5, "high": 15.5},
                        {"sex": "female", "age_min_days": 6570, "age_max_days": None, "low": 12, "high": None},
                        {"sex": "male", "age_min_days": 6570, "age_max_days": None, "low": 13.5, "high": 17.5},
                    ],
                }
            ],
        },
        {
            "id": str(catalogue["XR-CHEST"].id),
            "code": "XR-CHEST",
            "name": "XR Chest 2 views",
            "loinc_code": "36643-5",
            "kind": "imaging",
            "specimen_type": None,
            "modality": "XR",
            "billing_service_code": "RAD-XR-CHEST",
            "analytes": [],
        },
    ]
    # Exact numbers on the wire, no trailing zeros, never strings.
    assert b'"critical_high":20.5,' in response.content
    assert b'"low":12,' in response.content


@pytest.mark.parametrize(
    ("query", "codes"),
    [
        ({"kind": "lab"}, ["BLOOD-GROUP", "CBC"]),
        ({"kind": "imaging"}, ["XR-CHEST"]),
        ({"modality": "XR"}, ["XR-CHEST"]),
        ({"modality": "CT"}, []),
        ({"kind": "lab", "modality": "XR"}, []),
    ],
)
def test_kind_and_modality_filter_the_list(client, token, catalogue, query, codes):
    response = client.get(URL, query, **bearer(token))

    assert response.status_code == 200, response.content
    assert [test["code"] for test in response.json()] == codes
    assert response["X-Total-Count"] == str(len(codes))


def test_the_list_is_paginated_in_headers(client, token, catalogue):
    response = client.get(URL, {"per_page": 2, "page": 2}, **bearer(token))

    assert response.status_code == 200
    assert [test["code"] for test in response.json()] == ["XR-CHEST"]
    assert response["X-Total-Count"] == "3"
    assert 'rel="prev"' in response["Link"]
    assert 'rel="next"' not in response["Link"]


@pytest.mark.parametrize(
    ("query", "field"), [({"kind": "blood"}, "kind"), ({"modality": "XX"}, "modality"), ({"per_page": 0}, "per_page")]
)
def test_a_bad_filter_is_a_400_naming_it(client, token, catalogue, query, field):
    response = client.get(URL, query, **bearer(token))

    assert response.status_code == 400, response.content
    assert response.json()["code"] == "validation_error"
    assert [error["field"] for error in response.json()["errors"]] == [field]


def test_an_unknown_parameter_is_a_400(client, token, catalogue):
    response = client.get(URL, {"search": "blood"}, **bearer(token))

    assert response.status_code == 400, response.content
    body = response.json()
    assert body["code"] == "unknown_parameter"
    assert [error["field"] for error in body["errors"]] == ["search"]


def test_without_a_token_it_is_a_401(client, catalogue):
    response = client.get(URL)

    assert response.status_code == 401
    assert response.json()["code"] == "not_authenticated"


def test_another_scope_is_a_403(client, token_for, catalogue):
    response = client.get(URL, **bearer(token_for(["lab:write", "billing:read"])))

    assert response.status_code == 403
    assert response.json()["code"] == "insufficient_scope"
    assert 'scope="lab:read"' in response["WWW-Authenticate"]


def _queries(client, token) -> int:
    with CaptureQueriesContext(connection) as captured:
        response = client.get(URL, **bearer(token))
    assert response.status_code == 200
    return len(captured)


def test_the_query_count_does_not_grow_with_the_catalogue(client, token, catalogue):
    client.get(URL, **bearer(token))  # the token's client is cached after its first request
    small = _queries(client, token)
    for n in range(5):
        test = LabTest.objects.create(
            code=f"T{n}", name=f"Test {n}", loinc_code="2093-3", kind="lab", specimen_type="Serum"
        )
        for k in range(3):
            analyte = Analyte.objects.create(test=test, code=f"A{k}", loinc_code="718-7", name="A", unit="g/dL")
            ReferenceRange.objects.create(analyte=analyte, sex="any", low=Decimal(1), high=Decimal(2))

    large = _queries(client, token)

    assert small == large == QUERIES


# Authentication (one statement) and the audit row, then the count, the page of tests (billing item joined),
# their analytes and the analytes' ranges.
QUERIES = 5
