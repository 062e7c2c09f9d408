"""The OpenAPI document states the rules the server enforces (docs/api-rules.md §17), and the server answers as it
states: request bodies closed to unknown fields, a payment's reference required by mode, printable ids and
Idempotency-Key, 405 and 406 problems, `Cache-Control: no-store`, and PDFs as binary bodies."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from django.test import Client
from jsonschema import Draft202012Validator
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from clinic.api.openapi import PRINTABLE_PATTERN
from tests.clinic import operation_cases as cases
from tests.clinic.documented_operations import DOCUMENT, OPERATIONS, Operation
from tests.helpers import bearer

pytestmark = pytest.mark.django_db

SCHEMAS = DOCUMENT["components"]["schemas"]
REGISTRY: Registry[Any] = Registry().with_resource(
    "urn:clinic:openapi", Resource.from_contents(DOCUMENT, default_specification=DRAFT202012)
)
OAUTH_PATHS = {"/api/v1/auth/token", "/api/v1/auth/revoke"}
API_OPERATIONS = [op for op in OPERATIONS if op.path not in OAUTH_PATHS]
WITH_JSON_BODY = [
    op for op in API_OPERATIONS if "application/json" in op.document.get("requestBody", {}).get("content", {})
]


def _component(ref: str) -> dict[str, Any]:
    return SCHEMAS[ref.rsplit("/", 1)[-1]]


def _objects(schema: dict[str, Any], seen: set[str] | None = None) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every object schema a request body may hold, through references, oneOf cases, arrays and nesting."""
    seen = set() if seen is None else seen
    if "$ref" in schema:
        if schema["$ref"] in seen:
            return
        seen.add(schema["$ref"])
        name = schema["$ref"].rsplit("/", 1)[-1]
        target = _component(schema["$ref"])
        if "properties" in target:
            yield name, target
        yield from _objects({k: v for k, v in target.items() if k != "properties"}, seen)
        for value in target.get("properties", {}).values():
            yield from _objects(value, seen)
        return
    for case in schema.get("oneOf", []) + schema.get("allOf", []) + schema.get("anyOf", []):
        yield from _objects(case, seen)
    if isinstance(schema.get("items"), dict):
        yield from _objects(schema["items"], seen)
    for value in schema.get("properties", {}).values():
        yield from _objects(value, seen)


def _validator(name: str) -> Draft202012Validator:
    return Draft202012Validator({"$ref": f"urn:clinic:openapi#/components/schemas/{name}"}, registry=REGISTRY)  # type: ignore[call-arg]


def _url(path: str) -> str:
    return re.sub(r"\{[^}]+\}", str(uuid.uuid4()), path)


# --- Request bodies ------------------------------------------------------------------------------------


def test_every_json_request_body_and_every_object_in_it_refuses_unknown_members():
    checked = set()
    for operation in WITH_JSON_BODY:
        schema = operation.document["requestBody"]["content"]["application/json"]["schema"]
        for name, target in _objects(schema):
            assert target.get("additionalProperties") is False, (str(operation), name)
            checked.add(name)
    assert {"PatientWriteRequest", "AddressRequest", "LineItemInputRequest", "CashPaymentRequest"} <= checked
    assert len(checked) >= 25


def test_the_form_bodies_of_the_token_endpoints_say_that_other_parameters_are_ignored():
    for path in OAUTH_PATHS:
        form = DOCUMENT["paths"][path]["post"]["requestBody"]["content"]["application/x-www-form-urlencoded"]
        assert form["schema"]["additionalProperties"] == {"description": "Other parameters are ignored (RFC 6749 3.1)."}


@pytest.mark.parametrize("operation", WITH_JSON_BODY, ids=str)
def test_a_body_with_an_unknown_member_is_refused_as_the_schema_says(client, world, operation: Operation):
    call = cases.CASES[operation.operation_id].request(lambda reference: world.home, world)
    body = {**call.body, "x_unknown": 1}
    schema = operation.document["requestBody"]["content"]["application/json"]["schema"]
    assert not _validator(schema["$ref"].rsplit("/", 1)[-1]).is_valid(body)  # the document refuses it ...

    response = cases.Call(call.method, call.path, call.query, body).send(client, world.token)

    assert response.status_code == 400, response.content  # ... and so does the server
    assert "400" in operation.document["responses"]
    assert {"field": "x_unknown", "code": "unknown_field", "message": "Unknown field."} in response.json()["errors"]


def test_a_payment_body_is_one_schema_per_case_of_the_reference_rule():
    payment = SCHEMAS["PaymentRequest"]

    assert payment["oneOf"] == [
        {"$ref": "#/components/schemas/CashPaymentRequest"},
        {"$ref": "#/components/schemas/ReferencedPaymentRequest"},
    ]
    assert payment["discriminator"]["propertyName"] == "payment_mode"
    assert payment["discriminator"]["mapping"] == {
        "cash": "#/components/schemas/CashPaymentRequest",
        **{
            mode: "#/components/schemas/ReferencedPaymentRequest"
            for mode in ("card", "upi", "neft", "cheque", "online", "insurance")
        },
    }
    assert SCHEMAS["CashPaymentModeEnum"]["enum"] == ["cash"]
    assert "reference" not in SCHEMAS["CashPaymentRequest"]["required"]
    referenced = SCHEMAS["ReferencedPaymentRequest"]
    assert set(referenced["required"]) == {"amount", "payment_mode", "reference"}
    assert (referenced["properties"]["reference"]["minLength"], referenced["properties"]["reference"]["pattern"]) == (
        1,
        r"\S",
    )
    assert SCHEMAS["RefundRequest"]["discriminator"]["mapping"]["cash"] == "#/components/schemas/CashRefundRequest"
    validator = _validator("PaymentRequest")
    assert validator.is_valid({"amount": 10, "payment_mode": "cash"})
    assert validator.is_valid({"amount": 10, "payment_mode": "upi", "reference": "UPI-1"})
    assert not validator.is_valid({"amount": 10, "payment_mode": "upi"})
    assert not validator.is_valid({"amount": 10, "payment_mode": "upi", "reference": "  "})


@pytest.mark.parametrize(
    ("body", "errors"),
    [
        ({"amount": 10, "payment_mode": "upi"}, [("reference", "required")]),
        ({"amount": 10, "payment_mode": "card", "reference": "   "}, [("reference", "required")]),
        ({"amount": 10, "payment_mode": "cash", "reference": "", "tip": 1}, [("tip", "unknown_field")]),
    ],
)
def test_a_payment_refused_by_the_document_is_refused_by_the_server(client, world, body, errors):
    invoice = world.home.finalized
    paid = invoice.paid

    response = client.post(
        f"/api/v1/billing/invoices/{invoice.id}/payments", body, content_type="application/json", **bearer(world.token)
    )

    assert not _validator("PaymentRequest").is_valid(body)
    assert response.status_code == 400, response.content
    assert [(e["field"], e["code"]) for e in response.json()["errors"]] == errors
    invoice.refresh_from_db()
    assert invoice.paid == paid


def test_a_cash_payment_without_a_reference_is_valid_for_both(client, world):
    invoice = world.home.finalized
    body = {"amount": 1, "payment_mode": "cash"}

    response = client.post(
        f"/api/v1/billing/invoices/{invoice.id}/payments", body, content_type="application/json", **bearer(world.token)
    )

    assert _validator("PaymentRequest").is_valid(body)
    assert response.status_code == 201, response.content


def test_optional_request_members_state_their_default_in_words_not_as_a_default_keyword():
    for name, schema in SCHEMAS.items():
        if name.endswith("Request"):
            for member, prop in schema.get("properties", {}).items():
                assert "default" not in prop, (name, member)
    booking = SCHEMAS["BookingRequest"]["properties"]
    assert booking["visit_type"]["description"].endswith('Default: "consultation".')
    assert "visit_type" not in SCHEMAS["BookingRequest"]["required"]
    assert SCHEMAS["InvoiceCreateRequest"]["properties"]["finalize"]["description"].endswith("Default: false.")


def test_path_and_free_text_query_parameters_and_the_idempotency_key_state_the_character_rules():
    patterns = 0
    for operation in OPERATIONS:
        for parameter in operation.document.get("parameters", []):
            schema = parameter["schema"]
            if parameter["name"] == "Idempotency-Key":
                assert schema["pattern"] == r"^[\x20-\x7E]+$"
                assert re.fullmatch(schema["pattern"], "order-42 retry#1")
                assert not re.fullmatch(schema["pattern"], "tab\there")
            elif parameter["in"] in ("path", "query") and schema.get("type") == "string":
                assert "pattern" in schema or {"enum", "format"} & schema.keys(), (str(operation), parameter["name"])
                patterns += schema.get("pattern") == PRINTABLE_PATTERN
    assert patterns > 10
    assert re.fullmatch(PRINTABLE_PATTERN, "PAT-000123")
    assert not re.fullmatch(PRINTABLE_PATTERN, "PAT\x01")


def test_a_control_character_in_a_path_id_or_an_idempotency_key_is_refused(client, world):
    profile = client.get("/api/v1/patients/PAT%01", **bearer(world.token))
    keyed = client.post(
        "/api/v1/patients", {}, content_type="application/json", HTTP_IDEMPOTENCY_KEY="key\x7f", **bearer(world.token)
    )

    assert profile.status_code == 400, profile.content
    assert keyed.status_code == 400, keyed.content
    assert keyed.json()["errors"][0]["field"] == "Idempotency-Key"


# --- 405, 406 and Cache-Control ------------------------------------------------------------------------


def test_every_response_declares_cache_control_no_store():
    for operation in OPERATIONS:
        for status, response in operation.document["responses"].items():
            header = response["headers"]["Cache-Control"]
            assert header["required"] is True, (str(operation), status)
            assert header["schema"]["enum"] == ["no-store"], (str(operation), status)


@pytest.mark.parametrize("operation", API_OPERATIONS, ids=str)
def test_every_operation_answers_an_unsupported_accept_with_the_406_it_declares(client: Client, operation: Operation):
    response = client.generic(
        operation.method, _url(operation.path), "{}", content_type="application/json", HTTP_ACCEPT="image/png"
    )

    assert response.status_code == 406, response.content
    assert response["Content-Type"] == "application/problem+json"
    assert response["Cache-Control"] == "no-store"
    assert response.json()["code"] == "not_acceptable"
    declared = operation.document["responses"]["406"]
    assert declared["content"]["application/problem+json"]["schema"] == {"$ref": "#/components/schemas/Problem"}
    assert declared["headers"]["Cache-Control"]["schema"]["enum"] == [response["Cache-Control"]]


def test_the_pdf_operations_declare_pdf_in_their_406_and_their_200():
    invoice = next(op for op in OPERATIONS if op.operation_id == "billing_invoices_retrieve").document["responses"]
    assert set(invoice["200"]["content"]) == {"application/json", "application/pdf"}
    assert "application/pdf" in invoice["406"]["description"]


def _paths() -> list[tuple[str, list[str]]]:
    return [
        (path, sorted(method.upper() for method in item))
        for path, item in DOCUMENT["paths"].items()
        if path not in OAUTH_PATHS
    ]


@pytest.mark.parametrize(("path", "methods"), _paths(), ids=[path for path, _ in _paths()])
def test_a_method_a_path_does_not_offer_is_the_405_each_of_its_operations_declares(client, world, path, methods):
    assert "PUT" not in methods  # the API has no PUT: it stands for any method a path lacks
    offered = methods + (["HEAD"] if "GET" in methods else []) + ["OPTIONS"]

    response = client.put(_url(path), "{}", content_type="application/json", **bearer(world.token))

    assert response.status_code == 405, response.content
    assert response["Content-Type"] == "application/problem+json"
    assert response.json()["code"] == "method_not_allowed"
    assert sorted(response["Allow"].split(", ")) == sorted(offered)
    for method in methods:
        declared = DOCUMENT["paths"][path][method.lower()]["responses"]["405"]
        assert declared["headers"]["Allow"]["required"] is True
        assert all(name in declared["description"] for name in offered), declared["description"]


def test_the_token_endpoint_declares_and_answers_405_as_a_problem(client):
    response = client.get("/api/v1/auth/token")

    assert response.status_code == 405
    assert response["Content-Type"] == "application/problem+json"
    assert response["Allow"] == "POST, OPTIONS"
    declared = DOCUMENT["paths"]["/api/v1/auth/token"]["post"]["responses"]["405"]
    assert "application/problem+json" in declared["content"]
    assert declared["headers"]["Cache-Control"]["required"] is True
    assert response["Cache-Control"] == "no-store"


# --- Problem examples and PDFs -------------------------------------------------------------------------


def _example_codes(operation_id: str, status: str) -> set[str]:
    (operation,) = [op for op in OPERATIONS if op.operation_id == operation_id]
    examples = operation.document["responses"][status]["content"]["application/problem+json"]["examples"]
    return {example["value"]["code"] for example in examples.values()}


def test_the_conflicts_each_operation_can_answer_have_an_example():
    assert _example_codes("appointments_create", "409") == {"slot_unavailable", "idempotency_key_in_use"}
    assert _example_codes("appointments_cancel", "409") == {
        "invalid_state",
        "cancellation_window",
        "idempotency_key_in_use",
    }
    assert {"slot_unavailable", "cancellation_window", "invalid_state"} <= _example_codes(
        "appointments_reschedule", "409"
    )
    assert _example_codes("patients_partial_update", "409") == {"duplicate_patient", "idempotency_key_in_use"}


def test_every_pdf_response_is_a_binary_string():
    pdfs = [
        (str(operation), status, media["schema"])
        for operation in OPERATIONS
        for status, response in operation.document["responses"].items()
        for media_type, media in response.get("content", {}).items()
        if media_type == "application/pdf"
    ]

    assert len(pdfs) >= 4  # the invoice (by Accept and .pdf), the credit note and the lab report
    assert all(schema == {"type": "string", "format": "binary"} for _, _, schema in pdfs), pdfs
