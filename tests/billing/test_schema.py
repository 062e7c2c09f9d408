"""The OpenAPI document describes each billing operation with its scope, bodies, errors and examples, lists
billing's problem codes, and shows money as numbers."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client

from tests.billing.factories import OPERATION_IDS, OPERATIONS


@pytest.fixture(scope="module")
def schema(django_db_setup: None, django_db_blocker: Any) -> dict[str, Any]:
    with django_db_blocker.unblock():
        response = Client().get("/api/v1/schema", {"format": "json"})
    assert response.status_code == 200
    return json.loads(response.content)


@pytest.mark.parametrize(("method", "path", "scope", "payload"), OPERATIONS, ids=OPERATION_IDS)
def test_every_billing_operation_is_documented_with_its_scope_errors_and_examples(schema, method, path, scope, payload):
    operation = schema["paths"][path][method]

    assert operation["summary"]
    assert f"Scope: `{scope}`." in operation["description"]
    assert operation["security"] == [{"oauth2": [scope]}]
    assert operation["x-required-scope"] == scope
    assert {"400", "401", "403", "429", "500"} <= set(operation["responses"])
    success = next(code for code in operation["responses"] if code.startswith("2"))
    content = operation["responses"][success]["content"]["application/json"]
    assert content["schema"]
    assert content["examples"], (method, path)
    if "{id}" in path:
        assert "404" in operation["responses"]
    if method in ("post", "patch") and payload:
        assert operation["requestBody"]["content"]["application/json"]["examples"], (method, path)


def test_the_problem_codes_of_billing_are_documented(schema):
    # The problem-code table of the document's description lists every registered kind.
    assert "| `duplicate_payment` | 409 |" in schema["info"]["description"]
    assert "| `invalid_state` | 409 |" in schema["info"]["description"]
    payments = schema["paths"]["/api/v1/billing/invoices/{id}/payments"]["post"]
    assert "duplicate_payment" in payments["responses"]["409"]["description"]
    examples = payments["responses"]["409"]["content"]["application/problem+json"]["examples"]
    # and the idempotency refusal every POST can give (a retry while the first request is still running)
    assert {example["value"]["code"] for example in examples.values()} == {
        "invalid_state",
        "duplicate_payment",
        "idempotency_key_in_use",
    }


def test_the_document_shows_money_as_numbers(schema):
    detail = schema["components"]["schemas"]["InvoiceDetail"]
    totals = schema["components"]["schemas"]["InvoiceTotals"]

    assert totals["properties"]["grand_total"]["type"] == "number"
    assert set(detail["properties"]) == {
        "id",
        "invoice_number",
        "date",
        "status",
        "branch",
        "patient",
        "place_of_supply",
        "place_of_supply_code",
        "line_items",
        "totals",
        "hsn_summary",
        "payments",
        "credit_notes",
        "refunds",
        "paid",
        "credited",
        "net_total",
        "refunded",
        "balance",
        "refund_due",
    }
