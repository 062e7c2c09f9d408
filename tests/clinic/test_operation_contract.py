"""The access contract, once for every operation in the OpenAPI schema (so a new endpoint is covered the
moment it is documented): no token is 401 with `WWW-Authenticate: Bearer error="invalid_token"`-style
challenge, a token with every scope but the one the operation names is 403 insufficient_scope naming
it, and neither request changes anything."""

from __future__ import annotations

import json
import re
import uuid
from typing import Any

import pytest
from django.apps import apps
from django.test import Client

from integrations.clients.scopes import SCOPES
from tests.conftest import bearer

pytestmark = pytest.mark.django_db

UNPROTECTED = {"/api/v1/auth/token", "/api/v1/auth/revoke"}


def _operations() -> list[tuple[str, str, str]]:
    from drf_spectacular.generators import SchemaGenerator

    document = SchemaGenerator().get_schema(request=None, public=True)
    found = []
    for path, item in document["paths"].items():
        if path in UNPROTECTED:
            continue
        for method, operation in item.items():
            found.append((method.upper(), path, operation["x-required-scope"]))
    return sorted(found)


OPERATIONS = _operations()


def _url(path: str) -> str:
    return re.sub(r"\{[^}]+\}", str(uuid.uuid4()), path)


def _call(client: Client, method: str, path: str, **headers: Any) -> Any:
    body = json.dumps({}) if method in {"POST", "PATCH", "PUT"} else None
    return client.generic(method, _url(path), body or "", content_type="application/json", **headers)


def _row_counts() -> dict[str, int]:
    skip = {"integrations.AuditLogEntry", "oauth2_provider.AccessToken"}
    return {m._meta.label: m._default_manager.count() for m in apps.get_models() if m._meta.label not in skip}


def test_the_schema_documents_the_operations_this_suite_checks():
    methods = {(method, path) for method, path, _ in OPERATIONS}
    assert ("POST", "/api/v1/appointments/{id}/check-in") in methods
    assert ("GET", "/api/v1/patients") in methods
    assert len(OPERATIONS) >= 16


@pytest.mark.parametrize(("method", "path", "scope"), OPERATIONS, ids=[f"{m} {p}" for m, p, _ in OPERATIONS])
def test_without_a_token_every_operation_is_401_and_changes_nothing(client, method, path, scope):
    before = _row_counts()
    response = _call(client, method, path)

    assert response.status_code == 401, response.content
    assert response["Content-Type"] == "application/problem+json"
    assert response.json()["code"] == "not_authenticated"
    assert response["WWW-Authenticate"] == (
        'Bearer realm="clinic-api", error="invalid_token", error_description="A valid bearer token is required."'
    )
    assert _row_counts() == before


@pytest.mark.parametrize(("method", "path", "scope"), OPERATIONS, ids=[f"{m} {p}" for m, p, _ in OPERATIONS])
def test_a_token_without_the_operations_scope_is_403_naming_it_and_changes_nothing(
    client, token_for, method, path, scope
):
    token = token_for([s for s in SCOPES if s != scope])
    before = _row_counts()
    response = _call(client, method, path, **bearer(token))

    assert response.status_code == 403, response.content
    assert response.json()["code"] == "insufficient_scope"
    assert response["WWW-Authenticate"] == f'Bearer realm="clinic-api", error="insufficient_scope", scope="{scope}"'
    assert _row_counts() == before


@pytest.mark.parametrize(("method", "path", "scope"), OPERATIONS, ids=[f"{m} {p}" for m, p, _ in OPERATIONS])
def test_an_invalid_token_is_401_invalid_token(client, method, path, scope):
    response = _call(client, method, path, HTTP_AUTHORIZATION="Bearer not-a-real-token")

    assert response.status_code == 401, response.content
    assert response.json()["code"] == "invalid_token"
    assert response["WWW-Authenticate"] == (
        'Bearer realm="clinic-api", error="invalid_token", error_description="The access token is invalid."'
    )
