"""What the FHIR tests share: requests with a token, and the check that a body is an OperationOutcome."""

from __future__ import annotations

from typing import Any

from django.test import Client

from integrations.fhir import r4
from tests.helpers import bearer

FHIR_JSON = "application/fhir+json; charset=utf-8"


def fhir_get(token: str | None, path: str, **headers: Any) -> Any:
    auth = bearer(token) if token else {}
    return Client().get(f"/fhir/R4/{path}", **auth, **headers)


def assert_outcome(response: Any, status: int, code: str, expression: list[str] | None = None) -> str:
    """An OperationOutcome with one error issue of `code` (and `expression`); returns its diagnostics."""
    assert response.status_code == status, response.content
    assert response["Content-Type"] == FHIR_JSON
    body = response.json()
    assert body["resourceType"] == "OperationOutcome", body
    r4.validate(body)  # the issue codes are the R4 issue-type value set's
    [issue] = body["issue"]
    assert (issue["severity"], issue["code"]) == ("error", code), issue
    assert issue.get("expression") == expression, issue
    assert issue["diagnostics"]
    return issue["diagnostics"]


def entries(response: Any, mode: str = "match") -> list[dict[str, Any]]:
    assert response.status_code == 200, response.content
    return [entry["resource"] for entry in response.json()["entry"] if entry["search"]["mode"] == mode]


def ids(response: Any, mode: str = "match") -> list[str]:
    return [resource["id"] for resource in entries(response, mode)]
