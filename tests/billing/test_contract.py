"""The API contract of every billing operation, tested once: 401 without or with a bad token, 403 with the
wrong scope (naming the scope needed), nothing changed by a refused write; and the OpenAPI document
describes each operation with its scope, bodies, errors and examples."""

from __future__ import annotations

import json
from datetime import date
from typing import Any

import pytest
from django.test import Client

from billing.models import Invoice, Payment
from tests.billing.factories import make_invoice, snapshot

pytestmark = pytest.mark.django_db

# method, path (with {id} for an invoice), required scope, a valid body
OPERATIONS: list[tuple[str, str, str, dict[str, Any] | None]] = [
    ("get", "/api/v1/billing/invoices", "billing:read", None),
    ("post", "/api/v1/billing/invoices", "billing:write", {"patient_id": "PAT-000001", "line_items": []}),
    ("get", "/api/v1/billing/invoices/{id}", "billing:read", None),
    ("patch", "/api/v1/billing/invoices/{id}", "billing:write", {"date": "2026-11-02"}),
    ("post", "/api/v1/billing/invoices/{id}/finalize", "billing:write", {}),
    ("post", "/api/v1/billing/invoices/{id}/cancel", "billing:write", {"reason": "x"}),
    ("post", "/api/v1/billing/invoices/{id}/payments", "billing:write", {"amount": 10, "payment_mode": "cash"}),
    ("get", "/api/v1/billing/summary", "billing:read", None),
]
IDS = [f"{method} {path}" for method, path, _, _ in OPERATIONS]


@pytest.fixture
def draft(blr, patient, medicine):
    return make_invoice(branch=blr, patient=patient, department=medicine, finalize=False, on=date(2026, 11, 2))


def call(client: Client, method: str, path: str, payload: Any, draft: Invoice, **headers: Any) -> Any:
    url = path.replace("{id}", str(draft.id))
    if method == "get":
        return client.get(url, {"date_from": "2026-11-01", "date_to": "2026-11-30"}, **headers)
    return getattr(client, method)(url, json.dumps(payload), content_type="application/json", **headers)


@pytest.mark.parametrize(("method", "path", "scope", "payload"), OPERATIONS, ids=IDS)
def test_without_a_token_every_operation_is_401_and_changes_nothing(client, draft, method, path, scope, payload):
    before = snapshot(draft)

    response = call(client, method, path, payload, draft)

    assert response.status_code == 401
    assert response["Content-Type"] == "application/problem+json"
    assert response.json()["code"] == "not_authenticated"
    assert response["WWW-Authenticate"].startswith("Bearer")
    assert snapshot(draft) == before


@pytest.mark.parametrize(("method", "path", "scope", "payload"), OPERATIONS, ids=IDS)
def test_with_an_invalid_token_every_operation_is_401_invalid_token(client, draft, method, path, scope, payload):
    response = call(client, method, path, payload, draft, HTTP_AUTHORIZATION="Bearer forged")

    assert response.status_code == 401
    assert response.json()["code"] == "invalid_token"
    assert 'error="invalid_token"' in response["WWW-Authenticate"]


@pytest.mark.parametrize(("method", "path", "scope", "payload"), OPERATIONS, ids=IDS)
def test_with_the_wrong_scope_every_operation_is_403_naming_the_scope(
    client, token_for, blr, draft, method, path, scope, payload
):
    other = "billing:read" if scope == "billing:write" else "billing:write"
    token = token_for([other, "patients:read", "patients:write"], branches=[blr])
    before = snapshot(draft)

    response = call(client, method, path, payload, draft, HTTP_AUTHORIZATION=f"Bearer {token}")

    assert response.status_code == 403, response.content
    assert response.json()["code"] == "insufficient_scope"
    assert f'error="insufficient_scope", scope="{scope}"' in response["WWW-Authenticate"]
    assert snapshot(draft) == before
    assert Invoice.objects.count() == 1
    assert Payment.objects.count() == 0


# --- The OpenAPI document ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def schema(django_db_setup: None, django_db_blocker: Any) -> dict[str, Any]:
    with django_db_blocker.unblock():
        response = Client().get("/api/v1/schema", {"format": "json"})
    assert response.status_code == 200
    return json.loads(response.content)


@pytest.mark.parametrize(("method", "path", "scope", "payload"), OPERATIONS, ids=IDS)
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
    assert {example["value"]["code"] for example in examples.values()} == {"invalid_state", "duplicate_payment"}


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
        "line_items",
        "totals",
        "payments",
        "paid",
        "balance",
    }
