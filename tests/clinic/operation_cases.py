"""One successful request for every operation of the OpenAPI document, on the world of two_branches.py.

The contract suite (test_operation_contract.py) and the response-shape suite (test_response_shapes.py) both
drive the API from this one table, keyed by operation id; a test of each fails when the document has an
operation the table lacks, so a new operation is covered the day it is documented.

A case builds its request from a `Pick`: the site (the objects seeded at one branch) whose object fills each
of the request's references (documented_operations.references). The plain call takes everything from the
caller's own site; the contract suite then points one reference at a time at the other branch's object and
expects the case's `refused` outcome for that reference.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any
from urllib.parse import urlencode

from django.test import Client
from django.utils import timezone

from clinic.api.renderers import dumps
from tests.appointments.lifecycle_helpers import DAY, NEXT_DAY, iso
from tests.clinic.two_branches import Site, World
from tests.helpers import bearer
from tests.lab.catalogue import seed_catalogue
from tests.patients.factories import aadhaar


@dataclass(frozen=True)
class Call:
    method: str
    path: str
    query: Mapping[str, str] = field(default_factory=dict)
    body: Any = None
    form: bool = False  # form-encoded (the OAuth endpoints), else JSON

    def send(self, client: Client, token: str | None) -> Any:
        headers = bearer(token) if token else {}
        url = self.path + (f"?{urlencode(self.query)}" if self.query else "")
        if self.form:
            return client.post(url, urlencode(self.body), content_type="application/x-www-form-urlencoded", **headers)
        if self.body is None:
            return client.generic(self.method, url, **headers)
        return client.generic(self.method, url, dumps(self.body), content_type="application/json", **headers)


Pick = Callable[[str], Site]  # reference name -> the site whose object fills it


class Refusal:
    """What a client gets when one reference of its request names an object of a branch it may not see."""

    NOT_FOUND = "404 not_found"
    FIELD = "400 naming the field"
    EMPTY = "200 with an empty list"  # a list filter naming what the client cannot see finds nothing (§5.4)


@dataclass(frozen=True)
class Case:
    request: Callable[[Pick, World], Call]
    status: int
    # The patients (or their ids) the audit row of a successful call names; the body is the response's.
    audited: Callable[[Site, Any], list[Any]] = lambda site, body: []
    refused: Mapping[str, str] = field(default_factory=dict)  # reference -> Refusal


def _list_patients(site: Site, body: Any) -> list[Any]:
    return [site.patient, site.plain]


def _lab_order(site: Site) -> Any:
    assert site.lab_order is not None
    return site.lab_order


def _prescription(site: Site) -> Any:
    assert site.prescription is not None
    return site.prescription


def _dispense(site: Site) -> Any:
    assert site.dispense is not None
    return site.dispense


def _subscription(site: Site) -> Any:
    assert site.subscription is not None
    return site.subscription


def _subscription_path(of: Pick, action: str = "") -> str:
    return f"/api/v1/webhooks/subscriptions/{_subscription(of('id')).id}{action}"


def _today() -> str:
    return timezone.localdate().isoformat()


def _lab_tests(of: Pick, w: World) -> Call:
    seed_catalogue()  # the catalogue is the same at every branch: the world has none of its own
    return Call("GET", "/api/v1/lab/tests", {"kind": "lab"})


CASES: dict[str, Case] = {
    # --- organisation
    "branches_list": Case(lambda of, w: Call("GET", "/api/v1/branches"), 200),
    "doctors_list": Case(
        lambda of, w: Call(
            "GET", "/api/v1/doctors", {"branch_id": str(of("branch_id").branch.id), "department": "general medicine"}
        ),
        200,
        refused={"branch_id": Refusal.EMPTY},
    ),
    "doctors_retrieve": Case(
        lambda of, w: Call("GET", f"/api/v1/doctors/{of('id').doctor.id}"), 200, refused={"id": Refusal.NOT_FOUND}
    ),
    # --- patients
    "patients_list": Case(
        lambda of, w: Call("GET", "/api/v1/patients", {"branch_id": str(of("branch_id").branch.id)}),
        200,
        audited=_list_patients,
        refused={"branch_id": Refusal.EMPTY},
    ),
    "patients_create": Case(
        lambda of, w: Call(
            "POST",
            "/api/v1/patients",
            body={
                "first_name": "Anil",
                "last_name": "Kumar",
                "date_of_birth": "1979-02-14",
                "gender": "male",
                "phone": "+919812300077",
                "email": "anil@example.com",
                "address": {
                    "line1": "4 Residency Road",
                    "city": "Bengaluru",
                    "state": "Karnataka",
                    "pincode": "560025",
                },
                "blood_group": "B+",
                "branch_id": str(of("branch_id").branch.id),
                "national_health_id": "91-5555-6666-7777",
                "national_id": aadhaar("23412349876"),
                "insurance": [{"provider": "Star Health", "policy_number": "SH-1", "valid_until": None}],
            },
        ),
        201,
        audited=lambda site, body: [body["id"]],  # the new patient
        refused={"branch_id": Refusal.FIELD},
    ),
    "patients_retrieve": Case(
        lambda of, w: Call("GET", f"/api/v1/patients/{of('id').patient.patient_id}"),
        200,
        audited=lambda site, body: [site.patient],
        refused={"id": Refusal.NOT_FOUND},
    ),
    "patients_record": Case(
        lambda of, w: Call("GET", f"/api/v1/patients/{of('id').patient.patient_id}/record", {"per_page": "5"}),
        200,
        audited=lambda site, body: [site.patient],
        refused={"id": Refusal.NOT_FOUND},
    ),
    "patients_partial_update": Case(
        lambda of, w: Call(
            "PATCH",
            f"/api/v1/patients/{of('id').patient.id}",
            body={"email": "priya.new@example.com", "branch_id": str(of("branch_id").branch.id)},
        ),
        200,
        audited=lambda site, body: [site.patient],
        refused={"id": Refusal.NOT_FOUND, "branch_id": Refusal.FIELD},
    ),
    # --- appointments
    "appointments_slots": Case(
        lambda of, w: Call(
            "GET",
            "/api/v1/appointments/slots",
            {
                "doctor_id": str(of("doctor_id").doctor.id),
                "branch_id": str(of("branch_id").branch.id),
                "date": DAY.isoformat(),
            },
        ),
        200,
        refused={"doctor_id": Refusal.NOT_FOUND, "branch_id": Refusal.FIELD},
    ),
    "appointments_list": Case(
        lambda of, w: Call(
            "GET",
            "/api/v1/appointments",
            {
                "patient_id": of("patient_id").patient.patient_id,
                "doctor_id": str(of("doctor_id").doctor.id),
                "branch_id": str(of("branch_id").branch.id),
                "date_from": DAY.isoformat(),
            },
        ),
        200,
        audited=lambda site, body: [site.patient],
        refused={"patient_id": Refusal.EMPTY, "doctor_id": Refusal.EMPTY, "branch_id": Refusal.EMPTY},
    ),
    "appointments_create": Case(
        lambda of, w: Call(
            "POST",
            "/api/v1/appointments",
            body={
                "patient_id": str(of("patient_id").patient.id),
                "doctor_id": str(of("doctor_id").doctor.id),
                "branch_id": str(of("branch_id").branch.id),
                "slot_start": iso(DAY, "10:00"),
                "slot_end": iso(DAY, "10:15"),
                "visit_type": "follow_up",
                "notes": "Review of reports",
            },
        ),
        201,
        audited=lambda site, body: [site.patient],
        refused={"patient_id": Refusal.FIELD, "doctor_id": Refusal.FIELD, "branch_id": Refusal.FIELD},
    ),
    "appointments_retrieve": Case(
        lambda of, w: Call("GET", f"/api/v1/appointments/{of('id').booked.id}"),
        200,
        audited=lambda site, body: [site.patient],
        refused={"id": Refusal.NOT_FOUND},
    ),
    "appointments_cancel": Case(
        lambda of, w: Call("DELETE", f"/api/v1/appointments/{of('id').booked.id}", {"reason": "Travelling"}),
        200,
        audited=lambda site, body: [site.patient],
        refused={"id": Refusal.NOT_FOUND},
    ),
    "appointments_reschedule": Case(
        lambda of, w: Call(
            "PATCH",
            f"/api/v1/appointments/{of('id').booked.id}/reschedule",
            body={
                "new_slot_start": iso(NEXT_DAY, "10:00"),
                "new_slot_end": iso(NEXT_DAY, "10:15"),
                "reason": "Patient asked for Tuesday",
            },
        ),
        200,
        audited=lambda site, body: [site.patient],
        refused={"id": Refusal.NOT_FOUND},
    ),
    "appointments_check_in": Case(
        lambda of, w: Call("POST", f"/api/v1/appointments/{of('id').started.id}/check-in"),
        200,
        audited=lambda site, body: [site.plain],
        refused={"id": Refusal.NOT_FOUND},
    ),
    "appointments_no_show": Case(
        lambda of, w: Call("POST", f"/api/v1/appointments/{of('id').started.id}/no-show"),
        200,
        audited=lambda site, body: [site.plain],
        refused={"id": Refusal.NOT_FOUND},
    ),
    "appointments_complete": Case(
        lambda of, w: Call("POST", f"/api/v1/appointments/{of('id').checked_in.id}/complete"),
        200,
        audited=lambda site, body: [site.plain],
        refused={"id": Refusal.NOT_FOUND},
    ),
    # --- billing
    "billing_invoices_list": Case(
        lambda of, w: Call(
            "GET",
            "/api/v1/billing/invoices",
            {"patient_id": str(of("patient_id").patient.id), "branch_id": str(of("branch_id").branch.id)},
        ),
        200,
        audited=lambda site, body: [site.patient],
        refused={"patient_id": Refusal.EMPTY, "branch_id": Refusal.EMPTY},
    ),
    "billing_invoices_create": Case(
        lambda of, w: Call(
            "POST",
            "/api/v1/billing/invoices",
            body={
                "patient_id": of("patient_id").patient.patient_id,
                "branch_id": str(of("branch_id").branch.id),
                "line_items": [
                    {
                        "service_name": "Consultation",
                        "department": "General Medicine",
                        "rate": 700,
                        "tax_rate": 18,
                        "discount": 50.5,
                    }
                ],
                "finalize": True,
            },
        ),
        201,
        audited=lambda site, body: [site.patient],
        refused={"patient_id": Refusal.FIELD, "branch_id": Refusal.FIELD},
    ),
    "billing_invoices_retrieve": Case(
        lambda of, w: Call("GET", f"/api/v1/billing/invoices/{of('id').finalized.id}"),
        200,
        audited=lambda site, body: [site.patient],
        refused={"id": Refusal.NOT_FOUND},
    ),
    "billing_invoices_partial_update": Case(
        lambda of, w: Call(
            "PATCH",
            f"/api/v1/billing/invoices/{of('id').draft.id}",
            body={
                "line_items": [
                    {"service_name": "Dressing", "department": "General Medicine", "rate": 250, "tax_rate": 5}
                ]
            },
        ),
        200,
        audited=lambda site, body: [site.patient],
        refused={"id": Refusal.NOT_FOUND},
    ),
    "billing_invoices_finalize": Case(
        lambda of, w: Call("POST", f"/api/v1/billing/invoices/{of('id').draft.id}/finalize"),
        200,
        audited=lambda site, body: [site.patient],
        refused={"id": Refusal.NOT_FOUND},
    ),
    "billing_invoices_cancel": Case(
        lambda of, w: Call(
            "POST", f"/api/v1/billing/invoices/{of('id').draft.id}/cancel", body={"reason": "Duplicate"}
        ),
        200,
        audited=lambda site, body: [site.patient],
        refused={"id": Refusal.NOT_FOUND},
    ),
    "billing_invoices_payments_create": Case(
        lambda of, w: Call(
            "POST",
            f"/api/v1/billing/invoices/{of('id').finalized.id}/payments",
            body={"amount": 80.25, "payment_mode": "card", "reference": "CARD-0001"},
        ),
        201,
        audited=lambda site, body: [site.patient],
        refused={"id": Refusal.NOT_FOUND},
    ),
    "billing_credit_notes_list": Case(
        lambda of, w: Call("GET", f"/api/v1/billing/invoices/{of('id').finalized.id}/credit-notes"),
        200,
        audited=lambda site, body: [site.patient],
        refused={"id": Refusal.NOT_FOUND},
    ),
    "billing_credit_notes_create": Case(
        lambda of, w: Call(
            "POST",
            f"/api/v1/billing/invoices/{of('id').finalized.id}/credit-notes",
            body={
                "reason": "Overcharged",
                "lines": [{"line_id": str(of("id").finalized.line_items.get().id), "amount": 5}],
            },
        ),
        201,
        audited=lambda site, body: [site.patient],
        refused={"id": Refusal.NOT_FOUND},
    ),
    "billing_credit_notes_retrieve": Case(
        lambda of, w: Call(
            "GET",
            f"/api/v1/billing/invoices/{of('id').finalized.id}/credit-notes/{of('credit_note_id').credit_note.id}",
        ),
        200,
        audited=lambda site, body: [site.patient],
        refused={"id": Refusal.NOT_FOUND, "credit_note_id": Refusal.NOT_FOUND},
    ),
    "billing_invoices_refunds_create": Case(
        lambda of, w: Call(
            "POST",
            f"/api/v1/billing/invoices/{of('id').finalized.id}/refunds",
            body={"amount": 20.5, "payment_mode": "upi", "reference": "UPI-RFND-1"},
        ),
        201,
        audited=lambda site, body: [site.patient],
        refused={"id": Refusal.NOT_FOUND},
    ),
    "billing_invoices_pdf": Case(
        lambda of, w: Call("GET", f"/api/v1/billing/invoices/{of('id').finalized.id}.pdf"),
        200,
        audited=lambda site, body: [site.patient],
        refused={"id": Refusal.NOT_FOUND},
    ),
    "billing_credit_notes_pdf": Case(
        lambda of, w: Call(
            "GET",
            f"/api/v1/billing/invoices/{of('id').finalized.id}/credit-notes/{of('credit_note_id').credit_note.id}.pdf",
        ),
        200,
        audited=lambda site, body: [site.patient],
        refused={"id": Refusal.NOT_FOUND, "credit_note_id": Refusal.NOT_FOUND},
    ),
    # --- lab orders
    "lab_orders_list": Case(
        lambda of, w: Call(
            "GET",
            "/api/v1/lab/orders",
            {"patient_id": str(of("patient_id").patient.id), "branch_id": str(of("branch_id").branch.id)},
        ),
        200,
        audited=lambda site, body: [site.patient],
        refused={"patient_id": Refusal.EMPTY, "branch_id": Refusal.EMPTY},
    ),
    "lab_orders_create": Case(
        lambda of, w: Call(
            "POST",
            "/api/v1/lab/orders",
            body={
                "patient_id": of("patient_id").patient.patient_id,
                "branch_id": str(of("branch_id").branch.id),
                "doctor_id": str(of("doctor_id").doctor.id),
                "appointment_id": str(of("appointment_id").booked.id),
                "tests": ["CBC", "XR-CHEST"],
                "priority": "urgent",
                "clinical_notes": "Fever for three days",
            },
        ),
        201,
        audited=lambda site, body: [site.patient],
        refused={
            "patient_id": Refusal.FIELD,
            "branch_id": Refusal.FIELD,
            "doctor_id": Refusal.FIELD,
            "appointment_id": Refusal.FIELD,
        },
    ),
    "lab_orders_retrieve": Case(
        lambda of, w: Call("GET", f"/api/v1/lab/orders/{_lab_order(of('id')).id}"),
        200,
        audited=lambda site, body: [site.patient],
        refused={"id": Refusal.NOT_FOUND},
    ),
    "lab_orders_pdf": Case(
        lambda of, w: Call("GET", f"/api/v1/lab/orders/{_lab_order(of('id')).id}.pdf"),
        200,
        audited=lambda site, body: [site.patient],
        refused={"id": Refusal.NOT_FOUND},
    ),
    "lab_orders_collect": Case(
        lambda of, w: Call("POST", f"/api/v1/lab/orders/{_lab_order(of('id')).id}/collect"),
        200,
        audited=lambda site, body: [site.patient],
        refused={"id": Refusal.NOT_FOUND},
    ),
    "lab_orders_cancel": Case(
        lambda of, w: Call(
            "POST", f"/api/v1/lab/orders/{_lab_order(of('id')).id}/cancel", body={"reason": "Ordered twice"}
        ),
        200,
        audited=lambda site, body: [site.patient],
        refused={"id": Refusal.NOT_FOUND},
    ),
    "lab_orders_results": Case(
        lambda of, w: Call(
            "POST",
            f"/api/v1/lab/orders/{_lab_order(of('id')).id}/results",
            body={
                "results": [{"test": "XR-CHEST", "value": "No active lung disease."}],
                "performed_at": timezone.now().isoformat(),
                "performer": "Dr. R. Nair, radiologist",
                "status": "preliminary",
            },
        ),
        201,
        audited=lambda site, body: [site.patient],
        refused={"id": Refusal.NOT_FOUND},
    ),
    "billing_summary": Case(
        lambda of, w: Call(
            "GET",
            "/api/v1/billing/summary",
            {"branch_id": str(of("branch_id").branch.id), "date_from": _today(), "date_to": _today()},
        ),
        200,
        refused={"branch_id": Refusal.FIELD},
    ),
    # --- lab
    "lab_tests_list": Case(_lab_tests, 200),
    # --- pharmacy
    "pharmacy_drugs_list": Case(lambda of, w: Call("GET", "/api/v1/pharmacy/drugs", {"schedule": "H"}), 200),
    "pharmacy_stock_list": Case(
        lambda of, w: Call("GET", "/api/v1/pharmacy/stock", {"branch_id": str(of("branch_id").branch.id)}),
        200,
        refused={"branch_id": Refusal.EMPTY},
    ),
    "pharmacy_stock_receipts": Case(
        lambda of, w: Call(
            "POST",
            "/api/v1/pharmacy/stock/receipts",
            body={
                "branch_id": str(of("branch_id").branch.id),
                "drug": "AMOX500",
                "batch_number": "AMX27",
                "expiry_date": (DAY + timedelta(days=500)).isoformat(),
                "quantity": 50,
                "unit_cost": 5,
                "mrp": 8.5,
            },
        ),
        201,
        refused={"branch_id": Refusal.FIELD},
    ),
    "pharmacy_stock_adjustments": Case(
        lambda of, w: Call(
            "POST",
            "/api/v1/pharmacy/stock/adjustments",
            body={
                "branch_id": str(of("branch_id").branch.id),
                "drug": "AMOX500",
                "batch_number": "AMX26",
                "quantity": -1,
                "reason": "Strip damaged",
            },
        ),
        201,
        refused={"branch_id": Refusal.FIELD},
    ),
    "pharmacy_prescriptions_list": Case(
        lambda of, w: Call(
            "GET",
            "/api/v1/pharmacy/prescriptions",
            {"patient_id": str(of("patient_id").patient.id), "branch_id": str(of("branch_id").branch.id)},
        ),
        200,
        audited=lambda site, body: [site.patient],
        refused={"patient_id": Refusal.EMPTY, "branch_id": Refusal.EMPTY},
    ),
    "pharmacy_prescriptions_create": Case(
        lambda of, w: Call(
            "POST",
            "/api/v1/pharmacy/prescriptions",
            body={
                "patient_id": of("patient_id").patient.patient_id,
                "branch_id": str(of("branch_id").branch.id),
                "doctor_id": str(of("doctor_id").doctor.id),
                "appointment_id": str(of("appointment_id").booked.id),
                "items": [
                    {
                        "drug": "AMOX500",
                        "dose": "1 capsule",
                        "frequency": "three times a day",
                        "route": "oral",
                        "duration_days": 5,
                        "quantity": 15,
                    }
                ],
            },
        ),
        201,
        audited=lambda site, body: [site.patient],
        refused={
            "patient_id": Refusal.FIELD,
            "branch_id": Refusal.FIELD,
            "doctor_id": Refusal.FIELD,
            "appointment_id": Refusal.FIELD,
        },
    ),
    "pharmacy_prescriptions_retrieve": Case(
        lambda of, w: Call("GET", f"/api/v1/pharmacy/prescriptions/{_prescription(of('id')).id}"),
        200,
        audited=lambda site, body: [site.patient],
        refused={"id": Refusal.NOT_FOUND},
    ),
    "pharmacy_prescriptions_cancel": Case(
        lambda of, w: Call(
            "POST", f"/api/v1/pharmacy/prescriptions/{_prescription(of('id')).id}/cancel", body={"reason": "Wrong drug"}
        ),
        200,
        audited=lambda site, body: [site.patient],
        refused={"id": Refusal.NOT_FOUND},
    ),
    "pharmacy_dispenses_list": Case(
        lambda of, w: Call(
            "GET",
            "/api/v1/pharmacy/dispenses",
            {
                "patient_id": str(of("patient_id").patient.id),
                "branch_id": str(of("branch_id").branch.id),
                "prescription_id": str(_prescription(of("prescription_id")).id),
            },
        ),
        200,
        audited=lambda site, body: [site.patient],
        refused={"patient_id": Refusal.EMPTY, "branch_id": Refusal.EMPTY, "prescription_id": Refusal.EMPTY},
    ),
    "pharmacy_dispenses_create": Case(
        lambda of, w: Call(
            "POST",
            "/api/v1/pharmacy/dispenses",
            body={
                "branch_id": str(of("branch_id").branch.id),
                "prescription_id": str(_prescription(of("prescription_id")).id),
                "patient_id": of("patient_id").patient.patient_id,
                "items": [{"drug": "AMOX500", "quantity": 3}],
                "bill": True,
            },
        ),
        201,
        audited=lambda site, body: [site.patient],
        refused={"patient_id": Refusal.FIELD, "branch_id": Refusal.FIELD, "prescription_id": Refusal.FIELD},
    ),
    "pharmacy_dispenses_retrieve": Case(
        lambda of, w: Call("GET", f"/api/v1/pharmacy/dispenses/{_dispense(of('id')).id}"),
        200,
        audited=lambda site, body: [site.patient],
        refused={"id": Refusal.NOT_FOUND},
    ),
    "pharmacy_dispenses_returns": Case(
        lambda of, w: Call(
            "POST",
            f"/api/v1/pharmacy/dispenses/{_dispense(of('id')).id}/returns",
            body={
                "reason": "Course changed",
                "lines": [{"line_id": str(_dispense(of("id")).lines.get().id), "quantity": 1}],
            },
        ),
        201,
        audited=lambda site, body: [site.patient],
        refused={"id": Refusal.NOT_FOUND},
    ),
    # --- webhook subscriptions (per client: the other site's is another client's)
    "webhooks_subscriptions_list": Case(lambda of, w: Call("GET", "/api/v1/webhooks/subscriptions"), 200),
    "webhooks_subscriptions_create": Case(
        lambda of, w: Call(
            "POST",
            "/api/v1/webhooks/subscriptions",
            body={
                "name": "Billing feed",
                "description": "Payments for the ERP",
                "target_url": "https://93.184.215.14/billing",
                "event_types": ["payment.recorded", "invoice.finalized"],
                "branch_ids": [str(w.home.branch.id)],
                "extra_headers": {"Authorization": "Bearer erp-1"},
            },
        ),
        201,
    ),
    "webhooks_subscriptions_retrieve": Case(
        lambda of, w: Call("GET", _subscription_path(of)), 200, refused={"id": Refusal.NOT_FOUND}
    ),
    "webhooks_subscriptions_partial_update": Case(
        lambda of, w: Call("PATCH", _subscription_path(of), body={"is_active": False, "name": "Paused feed"}),
        200,
        refused={"id": Refusal.NOT_FOUND},
    ),
    "webhooks_subscriptions_destroy": Case(
        lambda of, w: Call("DELETE", _subscription_path(of)), 204, refused={"id": Refusal.NOT_FOUND}
    ),
    "webhooks_subscriptions_test": Case(
        lambda of, w: Call("POST", _subscription_path(of, "/test")), 202, refused={"id": Refusal.NOT_FOUND}
    ),
    "webhooks_subscriptions_rotate_secret": Case(
        lambda of, w: Call("POST", _subscription_path(of, "/rotate-secret")), 200, refused={"id": Refusal.NOT_FOUND}
    ),
    # --- OAuth (plain Django views, no scope and no branch)
    "auth_token": Case(
        lambda of, w: Call(
            "POST",
            "/api/v1/auth/token",
            body={
                "grant_type": "client_credentials",
                "client_id": w.api_client.client_id,
                "client_secret": w.api_client.secret,
                "scope": "patients:read",
            },
            form=True,
        ),
        200,
    ),
    "auth_revoke": Case(
        lambda of, w: Call(
            "POST",
            "/api/v1/auth/revoke",
            body={"token": w.token, "client_id": w.api_client.client_id, "client_secret": w.api_client.secret},
            form=True,
        ),
        200,
    ),
}
