"""OperationOutcome: the body of every FHIR error, with the HTTP status it goes with.

The issue codes are those of the R4 required value set (http://hl7.org/fhir/issue-type): `invalid`,
`not-supported`, `security` (401), `forbidden` (403), `not-found`, `processing`, `throttled`, `exception`."""

from __future__ import annotations

from typing import Any

from django.http import HttpResponse

from clinic.api.renderers import dumps

FHIR_JSON = "application/fhir+json"

_ISSUE_BY_STATUS = {
    400: "invalid",
    401: "security",
    403: "forbidden",
    404: "not-found",
    405: "not-supported",
    406: "not-supported",
    409: "conflict",
    410: "deleted",
    413: "too-costly",
    415: "not-supported",
    422: "processing",
    429: "throttled",
    503: "transient",
}


class FhirError(Exception):
    """A refusal answered as an OperationOutcome: `expression` names the offending search parameter(s)."""

    def __init__(
        self,
        status: int,
        diagnostics: str,
        *,
        code: str | None = None,
        expression: list[str] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(diagnostics)
        self.status = status
        self.diagnostics = diagnostics
        self.code = code or issue_code(status)
        self.expression = expression
        self.headers = headers or {}


def issue_code(status: int) -> str:
    return _ISSUE_BY_STATUS.get(status, "exception" if status >= 500 else "processing")


def outcome(
    diagnostics: str, *, code: str, severity: str = "error", expression: list[str] | None = None
) -> dict[str, Any]:
    issue: dict[str, Any] = {"severity": severity, "code": code, "diagnostics": diagnostics}
    if expression:
        issue["expression"] = expression
    return {"resourceType": "OperationOutcome", "issue": [issue]}


def outcome_response(error: FhirError) -> HttpResponse:
    body = outcome(error.diagnostics, code=error.code, expression=error.expression)
    response = HttpResponse(dumps(body), status=error.status, content_type=f"{FHIR_JSON}; charset=utf-8")
    for name, value in error.headers.items():
        response[name] = value
    return response
