"""The access contract, once for every operation in the OpenAPI schema (so a new endpoint is covered the
moment it is documented): no token is 401 with `WWW-Authenticate: Bearer error="invalid_token"`-style
challenge, a token with every scope but the one the operation names is 403 insufficient_scope naming
it, and neither request changes anything. Then branch visibility and the audit trail, for every operation
the document lists (see the section below)."""

from __future__ import annotations

import json
import re
import uuid
from typing import Any

import pytest
from django.apps import apps
from django.db import connection
from django.test import Client

from integrations.clients.scopes import SCOPES
from integrations.models import AuditLogEntry
from tests.clinic import operation_cases as cases
from tests.clinic.documented_operations import OPERATIONS as DOCUMENTED
from tests.clinic.documented_operations import references
from tests.helpers import bearer
from tests.pdf_tools import pdf_text

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


# --- Branch visibility and the audit trail, for every operation of the document --------------------------
#
# Driven by the one table of tests/clinic/operation_cases.py on the world of two_branches.py (home, which
# the calling client is limited to, and other): per operation, a request that succeeds from home, the
# patients its audit row names, and what the client gets when one reference of the request (a path id, or a
# query or body `<entity>_id`, read from the document) names the other branch's object instead. The world is
# seeded once for the module (the `world` fixture of tests/clinic/conftest.py); each test's transaction rolls
# back to it, so a refused request is still checked against the whole database as seeded.

CONTRACT_OPERATIONS = [op for op in DOCUMENTED if op.path not in UNPROTECTED]
REFERENCES = [(op, name) for op in CONTRACT_OPERATIONS for name in references(op)]
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
# Written by every request whatever it does: the audit row itself.
NOT_STATE = {AuditLogEntry._meta.db_table}


def _table_checksums() -> dict[str, str]:
    """Every table's whole content as one digest per table, so "nothing changed" covers updates too."""
    with connection.cursor() as cursor:
        tables = sorted(set(connection.introspection.table_names(cursor)) - NOT_STATE)
        digest = "SELECT %s, md5(coalesce(string_agg(md5(t::text), '' ORDER BY md5(t::text)), '')) FROM {} t"
        cursor.execute(" UNION ALL ".join(digest.format(connection.ops.quote_name(table)) for table in tables), tables)
        return dict(cursor.fetchall())


def _audited(response: Any) -> set[str]:
    row = AuditLogEntry.objects.get(request_id=response["X-Request-ID"])
    return {str(patient_id) for patient_id in row.patient_ids}


def _shown(response: Any) -> tuple[Any, str]:
    """The response's JSON body (None for a file or no content) and the text it shows (a PDF's, extracted with
    pdftotext)."""
    if response.status_code == 204:
        return None, response.content.decode()
    if response["Content-Type"] == "application/pdf":
        return None, pdf_text(response.content)
    return response.json(), response.content.decode()


def _ids(items: list[Any]) -> set[str]:
    return {str(getattr(item, "pk", item)) for item in items}


def test_the_case_table_has_exactly_the_documented_operations():
    documented = {op.operation_id for op in DOCUMENTED}

    assert sorted(documented - set(cases.CASES)) == [], "documented operations without a case in operation_cases"
    assert sorted(set(cases.CASES) - documented) == [], "cases of operations the document does not list"


@pytest.mark.parametrize("operation", CONTRACT_OPERATIONS, ids=str)
def test_every_reference_the_document_lists_has_its_refusal_in_the_table(operation):
    assert sorted(cases.CASES[operation.operation_id].refused) == references(operation)


def test_the_references_are_read_from_the_document():
    found = {op.operation_id: references(op) for op in CONTRACT_OPERATIONS}

    assert found["patients_partial_update"] == ["branch_id", "id"]
    assert found["appointments_create"] == ["branch_id", "doctor_id", "patient_id"]
    assert found["patients_create"] == ["branch_id"]  # not national_id, national_health_id
    assert found["branches_list"] == []
    assert len(REFERENCES) >= 30


@pytest.mark.parametrize("operation", CONTRACT_OPERATIONS, ids=str)
def test_a_call_on_the_clients_branch_succeeds_shows_nothing_of_another_and_its_audit_row_names_the_patients(
    client, world, operation
):
    case = cases.CASES[operation.operation_id]
    call = case.request(lambda reference: world.home, world)

    response = call.send(client, world.token)

    assert response.status_code == case.status, response.content
    body, text = _shown(response)
    shown = set(UUID.findall(text))
    assert _audited(response) == _ids(case.audited(world.home, body))
    assert shown & _ids([world.home.patient, world.home.plain]) <= _audited(response), "a patient shown, not audited"
    assert shown & world.other.ids() == set()
    if isinstance(body, list) and "X-Total-Count" in response:
        assert body, "a list case must find something, or it shows nothing"
        assert response["X-Total-Count"] == str(len(body))


@pytest.mark.parametrize(("operation", "reference"), REFERENCES, ids=[f"{op} {name}" for op, name in REFERENCES])
def test_a_reference_to_another_branchs_object_is_refused_and_changes_nothing(client, world, operation, reference):
    case = cases.CASES[operation.operation_id]
    call = case.request(lambda name: world.other if name == reference else world.home, world)
    before = _table_checksums()

    response = call.send(client, world.token)

    refusal = case.refused[reference]
    if refusal == cases.Refusal.NOT_FOUND:
        assert response.status_code == 404, response.content
        assert response.json()["code"] == "not_found"
    elif refusal == cases.Refusal.FIELD:
        assert response.status_code == 400, response.content
        assert response.json()["code"] == "validation_error"
        assert [error["field"] for error in response.json()["errors"]] == [reference]
    else:
        assert refusal == cases.Refusal.EMPTY
        assert response.status_code == 200, response.content
        assert (response.json(), response["X-Total-Count"]) == ([], "0")
    assert _table_checksums() == before
    assert _audited(response) & _ids([world.other.patient, world.other.plain]) == set()
