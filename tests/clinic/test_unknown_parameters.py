"""docs/api-rules.md §1: a query parameter the operation does not take is a 400 `unknown_parameter` naming
each of them (a typo such as `?serach=` must not silently return everything), on every operation: lists,
details, slots, the summary, actions and writes; a refused request changes nothing. The accepted names
are those the OpenAPI document lists for the operation (one declaration: ClinicAPIView.query_params)."""

from __future__ import annotations

import json
import re
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client

from appointments.models import Appointment
from billing.models import Invoice
from integrations.clients.scopes import SCOPES
from integrations.models import IdempotencyRecord
from patients.models import Patient
from tests.appointments.factories import AppointmentFactory, at, future_monday
from tests.appointments.lifecycle_helpers import make_clinic
from tests.billing.factories import make_invoice
from tests.helpers import REQUEST_BOOKKEEPING, bearer, row_counts

pytestmark = pytest.mark.django_db

UNKNOWN = {"type": "/api/v1/problems/unknown_parameter", "title": "Unknown query parameter", "status": 400}


def assert_unknown(response: Any, *names: str) -> None:
    assert response.status_code == 400, response.content
    assert response["Content-Type"] == "application/problem+json"
    body = response.json()
    assert {key: body[key] for key in UNKNOWN} == UNKNOWN
    assert body["code"] == "unknown_parameter"
    assert body["errors"] == [
        {"field": name, "code": "unknown_parameter", "message": "Unknown query parameter."} for name in names
    ]
    assert body["request_id"] == response["X-Request-ID"]


@pytest.fixture
def world(token_for: Any) -> dict[str, Any]:
    clinic = make_clinic(token_for)
    monday = future_monday()
    appointment = AppointmentFactory(
        patient=clinic.patient,
        doctor=clinic.doctor,
        branch=clinic.branch,
        slot_start=at(monday, 9, 0, clinic.branch),
        slot_end=at(monday, 9, 15, clinic.branch),
    )
    invoice = make_invoice(branch=clinic.branch, patient=clinic.patient)
    token = token_for(list(SCOPES), branches=[clinic.branch])
    return {"clinic": clinic, "monday": monday, "appointment": appointment, "invoice": invoice, "token": token}


def test_a_misspelled_search_is_refused_instead_of_listing_everyone(client: Client, world: dict[str, Any]) -> None:
    response = client.get("/api/v1/patients", {"serach": "Priya"}, **bearer(world["token"]))

    assert_unknown(response, "serach")
    assert response.json()["detail"] == "Unknown query parameter: serach."


def test_every_unknown_parameter_is_named_and_known_ones_still_work(client: Client, world: dict[str, Any]) -> None:
    headers = bearer(world["token"])

    refused = client.get("/api/v1/patients?search=Priya&pagee=2&sort=name&per_page=5", **headers)
    accepted = client.get("/api/v1/patients?search=Priya&per_page=5", **headers)

    assert_unknown(refused, "pagee", "sort")
    assert refused.json()["detail"] == "Unknown query parameters: pagee, sort."
    assert accepted.status_code == 200
    assert [row["name"] for row in accepted.json()] == ["Priya Sharma"]


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/branches?stat=KA",
        "/api/v1/doctors?departement=Cardiology",
        "/api/v1/appointments?doctor=x",
        "/api/v1/billing/invoices?patient=PAT-000001",
        "/api/v1/billing/summary?date_from=2026-04-01&date_to=2026-04-30&branch=BLR",
    ],
)
def test_lists_and_the_summary_refuse_unknown_parameters(client: Client, world: dict[str, Any], path: str) -> None:
    response = client.get(path, **bearer(world["token"]))

    assert_unknown(response, re.findall(r"[?&](\w+)=", path)[-1])


def test_details_take_no_query_parameter(client: Client, world: dict[str, Any]) -> None:
    headers = bearer(world["token"])
    clinic = world["clinic"]

    for path in (
        f"/api/v1/patients/{clinic.patient.patient_id}?expand=visits",
        f"/api/v1/appointments/{world['appointment'].id}?expand=visits",
        f"/api/v1/billing/invoices/{world['invoice'].id}?expand=visits",
        f"/api/v1/doctors/{clinic.doctor.id}?expand=visits",
    ):
        assert_unknown(client.get(path, **headers), "expand")


def test_slots_refuse_a_misspelled_duration(client: Client, world: dict[str, Any]) -> None:
    clinic = world["clinic"]
    response = client.get(
        "/api/v1/appointments/slots",
        {"doctor_id": str(clinic.doctor.id), "date": world["monday"].isoformat(), "durattion": 30},
        **bearer(world["token"]),
    )

    assert_unknown(response, "durattion")


def test_a_cancel_with_an_unknown_parameter_cancels_nothing(client: Client, world: dict[str, Any]) -> None:
    appointment = world["appointment"]
    before = row_counts(exclude=REQUEST_BOOKKEEPING)

    response = client.delete(
        f"/api/v1/appointments/{appointment.id}?reason=Travelling&notify=false", **bearer(world["token"])
    )

    assert_unknown(response, "notify")
    appointment.refresh_from_db()
    assert (appointment.status, appointment.version) == (Appointment.Status.BOOKED, 1)
    assert row_counts(exclude=REQUEST_BOOKKEEPING) == before


def test_an_action_with_a_query_parameter_changes_nothing(client: Client, world: dict[str, Any]) -> None:
    appointment = world["appointment"]
    invoice = world["invoice"]
    before = row_counts(exclude=REQUEST_BOOKKEEPING)

    no_show = client.post(f"/api/v1/appointments/{appointment.id}/no-show?force=1", **bearer(world["token"]))
    payment = client.post(
        f"/api/v1/billing/invoices/{invoice.id}/payments?dry_run=1",
        json.dumps({"amount": 100, "payment_mode": "cash"}),
        content_type="application/json",
        **bearer(world["token"]),
    )

    assert_unknown(no_show, "force")
    assert_unknown(payment, "dry_run")
    appointment.refresh_from_db()
    invoice.refresh_from_db()
    assert appointment.status == Appointment.Status.BOOKED
    assert (invoice.status, invoice.paid) == (Invoice.Status.FINALIZED, 0)
    assert row_counts(exclude=REQUEST_BOOKKEEPING) == before


def test_a_refused_create_registers_nobody_and_keeps_no_idempotency_record(
    client: Client, world: dict[str, Any]
) -> None:
    body = {
        "first_name": "Asha",
        "last_name": "Menon",
        "date_of_birth": "1990-01-01",
        "gender": "female",
        "phone": "+919812345678",
        "branch_id": str(world["clinic"].branch.id),
    }
    before = row_counts(exclude=REQUEST_BOOKKEEPING)

    response = client.post(
        "/api/v1/patients?validate_only=true",
        json.dumps(body),
        content_type="application/json",
        HTTP_IDEMPOTENCY_KEY="unknown-parameter-1",
        **bearer(world["token"]),
    )

    assert_unknown(response, "validate_only")
    assert not Patient.objects.filter(first_name="Asha").exists()
    assert not IdempotencyRecord.objects.exists()
    assert row_counts(exclude=REQUEST_BOOKKEEPING) == before


def test_an_edit_with_a_query_parameter_changes_nothing(client: Client, world: dict[str, Any]) -> None:
    appointment = world["appointment"]
    start = appointment.slot_start + timedelta(hours=1)

    response = client.patch(
        f"/api/v1/appointments/{appointment.id}/reschedule?notify=0",
        json.dumps({"new_slot_start": start.isoformat(), "new_slot_end": (start + timedelta(minutes=15)).isoformat()}),
        content_type="application/json",
        **bearer(world["token"]),
    )

    assert_unknown(response, "notify")
    appointment.refresh_from_db()
    assert (appointment.slot_start, appointment.version) == (start - timedelta(hours=1), 1)


def test_the_accepted_parameters_are_exactly_those_the_schema_documents() -> None:
    from drf_spectacular.generators import SchemaGenerator

    from clinic.api.views import ClinicAPIView, accepted_parameters

    document = SchemaGenerator().get_schema(request=None, public=True)
    generator = SchemaGenerator()
    generator._initialise_endpoints()
    checked = 0
    for path, _pattern, method, callback in generator.endpoints:
        view_class = getattr(callback, "cls", None)
        if view_class is None or not issubclass(view_class, ClinicAPIView):
            continue
        operation = document["paths"][path][method.lower()]
        documented = {p["name"] for p in operation.get("parameters", []) if p["in"] == "query"}
        # A ViewSet declares its parameters per action (list and slots are both GET on one ViewSet).
        key = getattr(callback, "actions", {}).get(method.lower(), method)
        assert documented == set(accepted_parameters(view_class.query_params.get(key, ()))), (method, path)
        checked += 1
    assert checked >= 20
