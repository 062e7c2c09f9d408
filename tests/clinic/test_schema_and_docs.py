"""GET /api/v1/schema (OpenAPI 3.1) and GET /api/v1/docs: served without a token or internet access."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
import yaml

pytestmark = pytest.mark.django_db

SCHEMA_URL = "/api/v1/schema"
ALL_SCOPES = {
    "patients:read",
    "patients:write",
    "appointments:read",
    "appointments:write",
    "billing:read",
    "billing:write",
    "lab:read",
    "lab:write",
    "pharmacy:read",
    "pharmacy:write",
    "emr:read",
}
# Contract section 3: the scope of each operation, for those the schema has (more arrive as apps grow).
CONTRACT_SCOPES = {
    ("get", "/api/v1/branches"): "appointments:read",
    ("get", "/api/v1/patients"): "patients:read",
    ("post", "/api/v1/patients"): "patients:write",
    ("get", "/api/v1/doctors"): "appointments:read",
    ("get", "/api/v1/appointments"): "appointments:read",
    ("post", "/api/v1/appointments"): "appointments:write",
    ("get", "/api/v1/invoices"): "billing:read",
    ("post", "/api/v1/invoices"): "billing:write",
}
HTTP_METHODS = {"get", "put", "post", "delete", "options", "head", "patch", "trace"}


@pytest.fixture(scope="module")
def schema(django_db_setup: None, django_db_blocker: Any) -> dict[str, Any]:
    from django.test import Client

    with django_db_blocker.unblock():
        response = Client().get(SCHEMA_URL, {"format": "json"})
    assert response.status_code == 200, response.content
    assert response["Content-Type"] == "application/vnd.oai.openapi+json"
    return json.loads(response.content)


def operations(schema: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (method, path, operation)
        for path, item in schema["paths"].items()
        for method, operation in item.items()
        if method in HTTP_METHODS
    ]


def test_the_schema_is_served_without_a_token_as_yaml_by_default(client):
    response = client.get(SCHEMA_URL)

    assert response.status_code == 200
    assert response["Content-Type"].startswith("application/vnd.oai.openapi")
    document = yaml.safe_load(response.content)
    assert str(document["openapi"]).startswith("3.1")
    assert "/api/v1/branches" in document["paths"]


def test_the_schema_is_served_as_json_on_request(client):
    response = client.get(SCHEMA_URL, HTTP_ACCEPT="application/vnd.oai.openapi+json")

    assert response.status_code == 200
    assert response["Content-Type"] == "application/vnd.oai.openapi+json"
    assert json.loads(response.content)["openapi"].startswith("3.1")


def test_the_document_is_openapi_3_1(schema):
    assert schema["openapi"].startswith("3.1")
    assert schema["info"]["title"] == "Clinic Management Integration API"


def test_the_oauth2_client_credentials_scheme_lists_every_scope(schema):
    scheme = schema["components"]["securitySchemes"]["oauth2"]

    assert scheme["type"] == "oauth2"
    assert list(scheme["flows"]) == ["clientCredentials"]
    flow = scheme["flows"]["clientCredentials"]
    assert flow["tokenUrl"] == "/api/v1/auth/token"
    assert set(flow["scopes"]) == ALL_SCOPES
    assert all(description for description in flow["scopes"].values())


def test_every_operation_outside_auth_requires_exactly_one_scope(schema):
    checked = 0
    for method, path, operation in operations(schema):
        if path.startswith("/api/v1/auth/"):
            continue
        security = operation.get("security")
        assert isinstance(security, list), (method, path)
        assert len(security) == 1, (method, path, security)
        assert list(security[0]) == ["oauth2"], (method, path, security)
        (scope,) = security[0]["oauth2"]
        assert scope in ALL_SCOPES, (method, path, scope)
        assert operation["x-required-scope"] == scope, (method, path)
        if (method, path) in CONTRACT_SCOPES:
            assert scope == CONTRACT_SCOPES[(method, path)], (method, path)
        checked += 1
    assert checked >= 1


def test_the_auth_endpoints_are_documented_and_need_no_token(schema):
    token = schema["paths"]["/api/v1/auth/token"]["post"]
    revoke = schema["paths"]["/api/v1/auth/revoke"]["post"]

    assert token["security"] == []
    assert revoke["security"] == []
    assert "x-required-scope" not in token
    token_form = token["requestBody"]["content"]["application/x-www-form-urlencoded"]["schema"]
    assert token_form["properties"]["grant_type"]["enum"] == ["client_credentials"]
    assert {"200", "400", "401"} <= set(token["responses"])
    assert set(revoke["requestBody"]["content"]["application/x-www-form-urlencoded"]["schema"]["required"]) == {"token"}


def test_the_branch_list_documents_its_errors_and_pagination_headers(schema):
    operation = schema["paths"]["/api/v1/branches"]["get"]

    assert operation["security"] == [{"oauth2": ["appointments:read"]}]
    assert operation["x-required-scope"] == "appointments:read"
    for status in ("400", "401", "403", "429"):
        content = operation["responses"][status]["content"]
        assert content == {"application/problem+json": {"schema": {"$ref": "#/components/schemas/Problem"}}}, status
    ok = operation["responses"]["200"]
    assert ok["content"]["application/json"]["schema"]["type"] == "array"
    assert {"X-Total-Count", "Link", "X-Request-ID"} <= set(ok["headers"])
    assert ok["headers"]["X-Total-Count"]["schema"]["type"] == "integer"
    parameters = {(p["in"], p["name"]) for p in operation["parameters"]}
    assert {("query", "page"), ("query", "per_page"), ("query", "state")} <= parameters


def test_every_operation_documents_the_standard_problem_responses(schema):
    for method, path, operation in operations(schema):
        if path.startswith("/api/v1/auth/"):
            continue
        for status in ("400", "401", "403", "429", "500"):
            assert status in operation["responses"], (method, path, status)


def test_every_post_and_patch_documents_the_idempotency_key_and_its_refusals(schema):
    writes = [
        (m, p, o) for m, p, o in operations(schema) if m in ("post", "patch") and not p.startswith("/api/v1/auth/")
    ]
    for method, path, operation in writes:
        headers = [p for p in operation.get("parameters", []) if p["in"] == "header" and p["name"] == "Idempotency-Key"]
        assert len(headers) == 1, (method, path)
        assert headers[0]["required"] is False
        assert headers[0]["schema"]["maxLength"] == 255
        for status in ("409", "422"):
            response = operation["responses"][status]
            assert "application/problem+json" in response["content"], (method, path, status)
        assert "idempotency_key_in_use" in operation["responses"]["409"]["description"]
        assert "idempotency_key_reused" in operation["responses"]["422"]["description"]
        success = [r for status, r in operation["responses"].items() if status.startswith("2")]
        assert success, (method, path)
        assert all("Idempotent-Replayed" in r["headers"] for r in success), (method, path)
    for method, path, operation in operations(schema):
        if method not in ("post", "patch"):
            assert all(p["name"] != "Idempotency-Key" for p in operation.get("parameters", [])), (method, path)


def test_path_parameters_match_the_path_template(schema):
    for method, path, operation in operations(schema):
        declared = sorted(p["name"] for p in operation.get("parameters", []) if p["in"] == "path")
        assert declared == sorted(re.findall(r"{(\w+)}", path)), (method, path, declared)


def test_every_error_response_outside_auth_is_a_problem(schema):
    problem = {"application/problem+json": {"schema": {"$ref": "#/components/schemas/Problem"}}}
    for method, path, operation in operations(schema):
        if path.startswith("/api/v1/auth/"):
            continue
        for status, response in operation["responses"].items():
            if status[0] in "45":
                assert response["content"] == problem, (method, path, status)


def test_the_problem_schema_describes_rfc_9457_bodies(schema):
    problem = schema["components"]["schemas"]["Problem"]

    assert problem["type"] == "object"
    assert set(problem["required"]) == {"type", "title", "status", "code", "request_id"}
    assert {"type", "title", "status", "detail", "code", "request_id", "errors"} <= set(problem["properties"])
    assert {"validation_error", "idempotency_key_reused", "idempotency_key_in_use", "internal_error"} <= set(
        problem["properties"]["code"]["enum"]
    )


def test_the_test_only_endpoints_are_not_in_the_schema(schema):
    assert not any(path.startswith("/api/v1/test/") for path in schema["paths"])


# --- The documentation page -----------------------------------------------------------------------


def referenced_assets(html: str) -> list[str]:
    return re.findall(r'<(?:script|link|img)\b[^>]*?\b(?:src|href)="([^"]+)"', html)


def test_the_docs_page_uses_only_local_assets_and_each_is_served(client):
    response = client.get("/api/v1/docs")

    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/html")
    html = response.content.decode()
    assets = referenced_assets(html)
    assert any(asset.endswith(".js") for asset in assets)
    assert any(asset.endswith(".css") for asset in assets)
    assert not re.search(r"""(?:src|href|url)\s*[=:]\s*["'](?:https?:)?//""", html), "an external asset"
    for asset in assets:
        assert asset.startswith("/static/"), asset
        served = client.get(asset)
        assert served.status_code == 200, asset
        assert b"".join(served.streaming_content if served.streaming else [served.content])
    assert '"/api/v1/schema"' in html


@pytest.mark.parametrize(
    ("method", "path", "accept", "status", "code"),
    [
        ("post", SCHEMA_URL, "*/*", 405, "method_not_allowed"),
        ("get", SCHEMA_URL, "text/html", 406, "not_acceptable"),
        ("post", "/api/v1/docs", "*/*", 405, "method_not_allowed"),
        ("get", "/api/v1/docs", "application/json", 406, "not_acceptable"),
    ],
)
def test_errors_of_the_schema_and_docs_views_are_json_problems(client, method, path, accept, status, code):
    response = getattr(client, method)(path, HTTP_ACCEPT=accept)

    assert response.status_code == status
    assert response["Content-Type"] == "application/problem+json"
    body = json.loads(response.content)
    assert (body["status"], body["code"], body["request_id"]) == (status, code, response["X-Request-ID"])
