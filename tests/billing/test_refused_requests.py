"""Refused billing requests against a real draft invoice, each with a valid body, leave it exactly as it was:
without a token (401) and with the other billing scope (403). The access contract itself is tested for every
operation by tests/clinic/test_operation_contract.py, on ids that do not exist; only a real invoice shows
that no column, line, payment or number counter of it changed."""

from __future__ import annotations

import json
from datetime import date
from typing import Any

import pytest
from django.test import Client

from billing.models import Invoice, Payment
from tests.billing.factories import OPERATION_IDS, OPERATIONS, make_invoice, snapshot

pytestmark = pytest.mark.django_db


@pytest.fixture
def draft(blr, patient, medicine):
    return make_invoice(branch=blr, patient=patient, department=medicine, finalize=False, on=date(2026, 11, 2))


def call(client: Client, method: str, path: str, payload: Any, draft: Invoice, **headers: Any) -> Any:
    url = path.replace("{id}", str(draft.id))
    if method == "get":
        return client.get(url, {"date_from": "2026-11-01", "date_to": "2026-11-30"}, **headers)
    return getattr(client, method)(url, json.dumps(payload), content_type="application/json", **headers)


@pytest.mark.parametrize(("method", "path", "scope", "payload"), OPERATIONS, ids=OPERATION_IDS)
def test_without_a_token_every_operation_on_a_draft_is_401_and_changes_nothing(
    client, draft, method, path, scope, payload
):
    before = snapshot(draft)

    response = call(client, method, path, payload, draft)

    assert response.status_code == 401
    assert response["Content-Type"] == "application/problem+json"
    assert response.json()["code"] == "not_authenticated"
    assert response["WWW-Authenticate"].startswith("Bearer")
    assert snapshot(draft) == before


@pytest.mark.parametrize(("method", "path", "scope", "payload"), OPERATIONS, ids=OPERATION_IDS)
def test_with_the_other_billing_scope_every_operation_on_a_draft_is_403_naming_the_scope_and_changes_nothing(
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
