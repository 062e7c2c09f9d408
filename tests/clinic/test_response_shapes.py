"""Every documented 2xx schema validates a real response: for each operation of the OpenAPI document (built
in-process), a successful call on seeded data (the case table of operation_cases.py, plus variants that
reach the nulls and other states), validated with JSON Schema 2020-12, `#/components/...` references
resolved in the document, format checking on and no member the document does not declare.

A new operation without a case fails here; a response shape that drifts from its builder fails here.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable
from datetime import datetime, time, timedelta
from decimal import Decimal
from typing import Any
from urllib.parse import urlparse

import pytest
from jsonschema import Draft202012Validator, FormatChecker, ValidationError, validators
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from integrations.webhooks.models import WebhookEvent
from pharmacy.models import Batch, ReorderLevel
from pharmacy.services import ReturnItem, dispense_return, prescription_cancel, stock_receive
from tests.appointments.lifecycle_helpers import DAY
from tests.clinic import operation_cases as cases
from tests.clinic.documented_operations import DOCUMENT, OPERATIONS, Operation
from tests.clinic.two_branches import World
from tests.lab.catalogue import seed_catalogue
from tests.pharmacy.factories import DrugFactory

pytestmark = pytest.mark.django_db

DOCUMENT_URI = "urn:clinic:openapi"
RFC3339 = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$")

FORMATS = FormatChecker()  # date, email, uuid, ... as jsonschema knows them; the rest declared here


@FORMATS.checks("date-time", raises=ValueError)
def _date_time(value: object) -> bool:
    """RFC 3339: a full date and time with its offset (a bare local time is not one)."""
    return not isinstance(value, str) or (bool(RFC3339.match(value)) and bool(datetime.fromisoformat(value)))


@FORMATS.checks("time", raises=ValueError)
def _time(value: object) -> bool:
    return not isinstance(value, str) or bool(time.fromisoformat(value))


@FORMATS.checks("uri")
def _uri(value: object) -> bool:
    return not isinstance(value, str) or bool(urlparse(value).scheme)


@FORMATS.checks("binary")
def _binary(value: object) -> bool:
    """A body that is not JSON (the printed invoices): the success test checks its magic bytes instead."""
    return True


# Bodies that are files, not JSON: the leading bytes each must start with.
FILE_SIGNATURES = {"application/pdf": b"%PDF-"}


@FORMATS.checks("decimal")
def _decimal(value: object) -> bool:
    """Money and quantities leave as JSON numbers (never strings), read here as an integrator's validator
    reads them: plain floats. (A null where the type allows one is the type's business, not the format's.)"""
    return value is None or (isinstance(value, int | float) and not isinstance(value, bool))


def _decimal_places(validator: Any, places: int, instance: Any, schema: Any) -> Any:
    """`x-decimal-places`: the number has at most that many places, as its shortest decimal form shows."""
    if isinstance(instance, float) and Decimal(repr(instance)).as_tuple().exponent < -places:  # type: ignore[operator]
        yield ValidationError(f"{instance!r} has more than {places} decimal places")


Validator = validators.extend(Draft202012Validator, {"x-decimal-places": _decimal_places})


def _closed(node: Any) -> Any:
    """The schemas with `additionalProperties: false` on every object that lists its properties and says
    nothing else: a member the builder adds and the document omits is a difference too."""
    if isinstance(node, dict):
        node = {key: _closed(value) for key, value in node.items()}
        if "properties" in node and "additionalProperties" not in node:
            node["additionalProperties"] = False
        return node
    if isinstance(node, list):
        return [_closed(value) for value in node]
    return node


REGISTRY: Registry[Any] = Registry().with_resource(
    DOCUMENT_URI, Resource.from_contents(_closed(copy.deepcopy(DOCUMENT)), default_specification=DRAFT202012)
)


def _pointer(*parts: str) -> str:
    return "/".join(part.replace("~", "~0").replace("/", "~1") for part in parts)


def _validator(operation: Operation, status: int, media_type: str) -> Draft202012Validator:
    pointer = _pointer(
        "paths", operation.path, operation.method.lower(), "responses", str(status), "content", media_type, "schema"
    )
    return Validator({"$ref": f"{DOCUMENT_URI}#/{pointer}"}, registry=REGISTRY, format_checker=FORMATS)


def _otc_stock(w: World) -> None:
    """An OTC drug with a batch at home, and an expired one (the world's drug is Schedule H)."""
    drug = DrugFactory(code="PARA500", generic_name="Paracetamol", brand_name="Crocin")
    stock_receive(
        branch=w.home.branch,
        drug=drug,
        batch_number="P1",
        expiry_date=DAY + timedelta(days=300),
        quantity=20,
        unit_cost=Decimal(1),
        mrp=Decimal(2),
        actor="test",
    )
    expire(w.home.branch, drug, "P0")
    ReorderLevel.objects.create(drug=drug, branch=w.home.branch, level=50)


def expire(branch: Any, drug: Any, number: str) -> None:
    movement = stock_receive(
        branch=branch,
        drug=drug,
        batch_number=number,
        expiry_date=DAY + timedelta(days=30),
        quantity=3,
        unit_cost=Decimal(1),
        mrp=Decimal(2),
        actor="test",
    )
    Batch.objects.filter(pk=movement.batch_id).update(expiry_date=DAY - timedelta(days=400))


def _returned(w: World) -> Any:
    dispense = w.home.dispense
    assert dispense is not None
    dispense_return(
        dispense=dispense,
        items=[ReturnItem(line_id=dispense.lines.get().id, quantity=1)],
        reason="Spare",
        returned_by="test",
    )
    return dispense


# Further successful calls of some operations, for what the table's one call does not reach: null members,
# other states, the unfiltered lists and search.
VARIANTS: list[tuple[str, str, Callable[[World], cases.Call]]] = [
    ("patients_list", "unfiltered", lambda w: cases.Call("GET", "/api/v1/patients")),
    ("patients_list", "search", lambda w: cases.Call("GET", "/api/v1/patients", {"search": "priya sharma"})),
    ("patients_retrieve", "nulls", lambda w: cases.Call("GET", f"/api/v1/patients/{w.home.plain.id}")),
    (
        "patients_create",
        "required fields only",
        lambda w: cases.Call(
            "POST",
            "/api/v1/patients",
            body={
                "first_name": "Meera",
                "last_name": "Nair",
                "date_of_birth": "1990-07-01",
                "gender": "female",
                "phone": "+919800011122",
            },
        ),
    ),
    ("appointments_list", "every state", lambda w: cases.Call("GET", "/api/v1/appointments")),
    (
        "appointments_slots",
        "a doctor's only branch",
        lambda w: cases.Call(
            "GET", "/api/v1/appointments/slots", {"doctor_id": str(w.home.doctor.id), "date": DAY.isoformat()}
        ),
    ),
    (
        "lab_tests_list",
        "lab and imaging, nulls",
        lambda w: (seed_catalogue(), cases.Call("GET", "/api/v1/lab/tests"))[1],
    ),
    (
        "pharmacy_dispenses_create",
        "over the counter, no patient",
        lambda w: (
            _otc_stock(w),
            cases.Call("POST", "/api/v1/pharmacy/dispenses", body={"items": [{"drug": "PARA500", "quantity": 2}]}),
        )[1],
    ),
    (
        "pharmacy_stock_list",
        "expired batches and reorder levels",
        lambda w: (_otc_stock(w), cases.Call("GET", "/api/v1/pharmacy/stock"))[1],
    ),
    (
        "pharmacy_dispenses_retrieve",
        "with a return",
        lambda w: cases.Call("GET", f"/api/v1/pharmacy/dispenses/{_returned(w).id}"),
    ),
    (
        "pharmacy_prescriptions_list",
        "cancelled",
        lambda w: (
            prescription_cancel(prescription=w.home.prescription, reason="Wrong"),
            cases.Call("GET", "/api/v1/pharmacy/prescriptions"),
        )[1],
    ),
    ("billing_invoices_list", "draft and paid", lambda w: cases.Call("GET", "/api/v1/billing/invoices")),
    ("billing_invoices_retrieve", "draft", lambda w: cases.Call("GET", f"/api/v1/billing/invoices/{w.home.draft.id}")),
    (
        "billing_invoices_create",
        "catalogue-free draft",
        lambda w: cases.Call(
            "POST",
            "/api/v1/billing/invoices",
            body={
                "patient_id": str(w.home.plain.id),
                "line_items": [
                    {"service_name": "X-ray", "department": "General Medicine", "rate": 400, "tax_rate": 0},
                    {
                        "service_name": "Dressing",
                        "department": "General Medicine",
                        "rate": 120.5,
                        "tax_rate": 12,
                        "quantity": 2.5,
                    },
                ],
            },
        ),
    ),
    (
        "billing_invoices_payments_create",
        "settles the balance",
        lambda w: cases.Call(
            "POST",
            f"/api/v1/billing/invoices/{w.home.finalized.id}/payments",
            body={"amount": str(w.home.finalized.balance), "payment_mode": "cash"},
        ),
    ),
    (
        "billing_credit_notes_create",
        "the whole line, leaving a refund due",
        lambda w: cases.Call(
            "POST",
            f"/api/v1/billing/invoices/{w.home.finalized.id}/credit-notes",
            body={"reason": "Not given", "lines": [{"line_id": str(w.home.finalized.line_items.get().id)}]},
        ),
    ),
]

CALLS = [(op, "case", None) for op in OPERATIONS] + [
    (op, name, call) for operation_id, name, call in VARIANTS for op in OPERATIONS if op.operation_id == operation_id
]


def test_every_documented_operation_has_a_case():
    documented = {op.operation_id for op in OPERATIONS}

    assert sorted(documented - set(cases.CASES)) == []
    assert {operation_id for operation_id, _, _ in VARIANTS} <= documented


def test_every_format_the_document_uses_is_checked():
    used = set(re.findall(r'"format": "([^"]+)"', json.dumps(DOCUMENT, default=str)))

    assert used - set(FORMATS.checkers) == set()


@pytest.mark.parametrize(("operation", "name", "variant"), CALLS, ids=[f"{op} {name}" for op, name, _ in CALLS])
def test_the_response_of_a_successful_call_is_valid_against_its_documented_schema(
    client, world, operation, name, variant
):
    case = cases.CASES[operation.operation_id]
    call = variant(world) if variant is not None else case.request(lambda reference: world.home, world)
    events_before = set(WebhookEvent.objects.values_list("id", flat=True))

    response = call.send(client, world.token)

    status = str(response.status_code)
    assert status.startswith("2"), response.content
    # The webhook bodies the call published, as a receiver parses them (plain floats), against the document.
    # (A test event is no published kind: its body is documented with the test operation.)
    published = WebhookEvent.objects.exclude(id__in=events_before).exclude(is_test=True)
    for event in published.order_by("created_at", "id"):
        pointer = _pointer("webhooks", event.type, "post", "requestBody", "content", "application/json", "schema")
        webhook = Validator({"$ref": f"{DOCUMENT_URI}#/{pointer}"}, registry=REGISTRY, format_checker=FORMATS)
        problems = sorted(webhook.iter_errors(json.loads(event.body())), key=str)
        assert problems == [], f"{event.type}: " + "; ".join(
            f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in problems[:10]
        )
    documented = operation.document["responses"]
    assert status in documented, f"{operation} answered an undocumented {status}"
    for header, spec in documented[status].get("headers", {}).items():
        if spec.get("required"):
            assert header in response, f"{operation} {status} lacks its required {header} header"
        if header in response and "enum" in spec["schema"]:
            # A header the document fixes (Cache-Control: no-store): the value sent is the one declared.
            assert response[header] in spec["schema"]["enum"], (operation, status, header, response[header])
    content = documented[status].get("content", {})
    if not content:
        assert response.content in (b"", b"{}"), f"{operation} documents no body for {status}"
        return
    media_type = response["Content-Type"].split(";")[0]
    assert media_type in content, (media_type, sorted(content))
    if media_type in FILE_SIGNATURES:
        assert content[media_type]["schema"] == {"type": "string", "format": "binary"}
        assert response.content.startswith(FILE_SIGNATURES[media_type]), response.content[:100]
        return
    body = json.loads(response.content)  # plain floats, as an integrator's client parses it
    errors = sorted(_validator(operation, response.status_code, media_type).iter_errors(body), key=str)

    assert errors == [], "\n".join(f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in errors[:10])


def _operation(operation_id: str) -> Operation:
    (operation,) = [op for op in OPERATIONS if op.operation_id == operation_id]
    return operation


def test_the_validator_refuses_what_the_document_does_not_allow():
    """Guards the suite itself: references resolve, formats are checked, undeclared members are refused."""
    summary = {
        "id": "3f1c9b0e-8f4a-4c55-9a36-1f3c6d2e7b10",
        "patient_id": "PAT-000123",
        "name": "Priya Sharma",
        "phone": "+919876543210",
        "age": 42,
        "gender": "female",
        "last_visit_date": "2026-10-04",
    }
    patients = _validator(_operation("patients_list"), 200, "application/json")
    payment = _validator(_operation("billing_invoices_payments_create"), 201, "application/json")

    assert list(patients.iter_errors([summary])) == []
    assert [e.validator for e in patients.iter_errors([{**summary, "id": "PAT-1"}])] == ["format"]
    assert [e.validator for e in patients.iter_errors([{**summary, "last_visit_date": "4 Oct"}])] == ["format"]
    assert [e.validator for e in patients.iter_errors([{**summary, "gender": "f"}])] == ["enum"]
    assert [e.validator for e in patients.iter_errors([{**summary, "extra": 1}])] == ["additionalProperties"]
    assert [e.validator for e in patients.iter_errors([{k: v for k, v in summary.items() if k != "age"}])] == [
        "required"
    ]
    assert "format" in {e.validator for e in payment.iter_errors({"payment": {"recorded_at": "2026-10-04T09:30:00"}})}
    assert "x-decimal-places" in {e.validator for e in payment.iter_errors({"invoice": {"paid": 1.005}})}
    # What multipleOf 0.01 refused as floats (36.09, 0.07, 8.2) is valid money.
    for paid in (36.09, 0.07, 8.2, 1180.5, 12):
        assert "x-decimal-places" not in {e.validator for e in payment.iter_errors({"invoice": {"paid": paid}})}
