"""docs/api-rules.md §5.5: a query parameter sent empty (`?patient_id=`) is a 400 naming it, never the unfiltered
list. Walked over every GET operation of the OpenAPI document and every query parameter it declares, with the
path's ids filled from a world the token may see; and on a write (the cancel's reason), which changes nothing."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.test import Client

from appointments.models import Appointment
from integrations.clients.scopes import SCOPES
from tests.appointments.factories import AppointmentFactory, at, future_monday
from tests.appointments.lifecycle_helpers import make_clinic
from tests.billing.factories import make_invoice
from tests.helpers import REQUEST_BOOKKEEPING, bearer, row_counts

pytestmark = pytest.mark.django_db


def assert_blank(response: Any, *names: str) -> None:
    assert response.status_code == 400, response.content
    assert response["Content-Type"] == "application/problem+json"
    body = response.json()
    assert body["code"] == "validation_error"
    assert body["errors"] == [{"field": name, "code": "blank", "message": "Must not be empty."} for name in names]


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
    return {"clinic": clinic, "appointment": appointment, "invoice": invoice, "token": token}


def get_operations() -> list[tuple[str, list[str]]]:
    """(path template, its query parameters) of every documented GET of the REST API."""
    from drf_spectacular.generators import SchemaGenerator

    document = SchemaGenerator().get_schema(request=None, public=True)
    found = []
    for path, item in document["paths"].items():
        operation = item.get("get")
        if operation is None:
            continue
        names = [p["name"] for p in operation.get("parameters", []) if p["in"] == "query"]
        if names:
            found.append((path, names))
    return found


def test_every_query_parameter_of_every_get_refuses_an_empty_value(client: Client, world: dict[str, Any]) -> None:
    clinic = world["clinic"]
    # A path's id is the clinic's own record of the kind the path names (the first segment after /api/v1/).
    ids = {
        "patients": clinic.patient.patient_id,
        "appointments": str(world["appointment"].id),
        "invoices": str(world["invoice"].id),
        "doctors": str(clinic.doctor.id),
        "branches": str(clinic.branch.id),
    }
    checked = []
    for path, names in get_operations():
        kind = next((k for k in ids if f"/{k}/{{" in path), None)
        if "{" in path and kind is None:
            pytest.fail(f"No id to fill {path} with: add its kind to the test.")
        url = re.sub(r"\{[^}]+\}", ids[kind], path) if kind else path
        for name in names:
            response = client.get(f"{url}?{name}=", **bearer(world["token"]))
            assert_blank(response, name)
            blank = client.get(f"{url}?{name}=%20%20", **bearer(world["token"]))
            assert_blank(blank, name)
            checked.append((path, name))
    # The lists whose unfiltered answer an unset variable would have leaked are among those walked.
    for path, name in (
        ("/api/v1/pharmacy/prescriptions", "patient_id"),
        ("/api/v1/pharmacy/dispenses", "patient_id"),
        ("/api/v1/appointments", "patient_id"),
        ("/api/v1/billing/invoices", "patient_id"),
        ("/api/v1/lab/orders", "patient_id"),
    ):
        assert (path, name) in checked, (path, name)
    assert len(checked) >= 40


def test_every_empty_parameter_is_named_and_a_filled_one_still_filters(client: Client, world: dict[str, Any]) -> None:
    headers = bearer(world["token"])
    patient = world["clinic"].patient

    refused = client.get("/api/v1/appointments?patient_id=&status=&per_page=5", **headers)
    accepted = client.get(f"/api/v1/appointments?patient_id={patient.patient_id}&per_page=5", **headers)

    assert_blank(refused, "patient_id", "status")
    assert accepted.status_code == 200
    assert [row["appointment_id"] for row in accepted.json()] == [str(world["appointment"].id)]


def test_a_cancel_with_an_empty_reason_cancels_nothing(client: Client, world: dict[str, Any]) -> None:
    appointment = world["appointment"]
    before = row_counts(exclude=REQUEST_BOOKKEEPING)

    response = client.delete(f"/api/v1/appointments/{appointment.id}?reason=", **bearer(world["token"]))

    assert_blank(response, "reason")
    appointment.refresh_from_db()
    assert (appointment.status, appointment.version) == (Appointment.Status.BOOKED, 1)
    assert row_counts(exclude=REQUEST_BOOKKEEPING) == before
