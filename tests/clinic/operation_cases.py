"""One successful request for every operation of the OpenAPI document, on a world seeded at two branches.

The contract suite (test_operation_contract.py) and the response-shape suite (test_response_shapes.py) both
drive the API from this one table, keyed by operation id; a test of each fails when the document has an
operation the table lacks, so a new operation is covered the day it is documented.

A case builds its request from a `Pick`: the site (the objects seeded at one branch) whose object fills each
of the request's references. The plain call takes everything from the caller's own site; the contract suite
then points one reference at a time at the other branch's object and expects the case's `refused` outcome
for that reference.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from decimal import Decimal
from typing import Any
from urllib.parse import urlencode

from django.test import Client
from django.utils import timezone

from appointments.models import Appointment, WeeklySession
from billing.models import Invoice
from clinic.api.renderers import dumps
from integrations.scopes import SCOPES
from tests.appointments.factories import AppointmentFactory
from tests.appointments.lifecycle_helpers import DAY, NEXT_DAY, at, iso, session, start_now
from tests.billing.factories import make_invoice, pay
from tests.conftest import bearer
from tests.factories import BranchFactory, DepartmentFactory, DoctorFactory
from tests.patients.factories import (
    AllergyFactory,
    DiagnosisFactory,
    InsuranceFactory,
    MedicationFactory,
    PatientFactory,
    VisitFactory,
    aadhaar,
)

UNPROTECTED = {"/api/v1/auth/token", "/api/v1/auth/revoke"}


# --- The seeded world ----------------------------------------------------------------------------------


@dataclass
class Site:
    """What is seeded at one branch: a doctor with Monday and Tuesday sessions; `patient` with every
    section of a profile filled, `plain` with only the required fields; appointments in each state an
    operation starts from; a draft and a finalized (partly paid) invoice."""

    branch: Any
    doctor: Any
    patient: Any
    plain: Any
    booked: Appointment  # next-week Monday 09:00, `patient`
    started: Appointment  # today, started a minute ago, `plain`
    checked_in: Appointment  # next-week Monday 11:00, `plain`
    draft: Invoice
    finalized: Invoice

    def ids(self) -> set[str]:
        """The ids of every object bound to this branch (departments are shared by the network)."""
        objects = [self.branch, self.doctor, self.patient, self.plain, self.booked, self.started, self.checked_in]
        return {str(obj.pk) for obj in [*objects, self.draft, self.finalized]}


@dataclass
class World:
    home: Site  # the branch of the calling client
    other: Site  # a branch the calling client may not see
    api_client: Any  # every scope, limited to home.branch
    token: str


def _site(code: str, state: str, gstin: str, number: int) -> Site:
    branch = BranchFactory(
        code=code,
        name=f"{code} Clinic",
        state=state,
        gstin=gstin,
        time_zone="Asia/Kolkata",
        cancellation_window_minutes=120,
    )
    department = DepartmentFactory(name="General Medicine")
    doctor = DoctorFactory(name=f"Dr. {code} Rao", department=department, branches=[branch])
    session(doctor, branch, WeeklySession.Weekday.MONDAY)
    session(doctor, branch, WeeklySession.Weekday.TUESDAY)
    patient = PatientFactory(
        first_name="Priya",
        last_name=f"Sharma{code}",
        registration_branch=branch,
        email=f"priya.{code.lower()}@example.com",
        blood_group="O+",
        address_line1="12 MG Road",
        address_city="Bengaluru",
        address_state=state,
        address_pincode="560001",
        national_health_id=f"91{number:012d}",
        national_id=aadhaar(f"2341234{number:04d}"),
    )
    InsuranceFactory(patient=patient, valid_until=DAY)
    DiagnosisFactory(patient=patient, onset_date=DAY - timedelta(days=400))
    AllergyFactory(patient=patient)
    MedicationFactory(patient=patient, start_date=DAY - timedelta(days=300))
    visited = timezone.now() - timedelta(days=30)
    VisitFactory(
        patient=patient, department=department, doctor=doctor, start=visited, end=visited + timedelta(minutes=20)
    )
    plain = PatientFactory(first_name="Rahul", last_name=f"Verma{code}", registration_branch=branch)
    booked = AppointmentFactory(
        branch=branch,
        doctor=doctor,
        patient=patient,
        slot_start=at(DAY, "09:00"),
        slot_end=at(DAY, "09:15"),
        notes="Fever for three days",
    )
    started = start_now(
        AppointmentFactory(
            branch=branch, doctor=doctor, patient=plain, slot_start=at(DAY, "09:30"), slot_end=at(DAY, "09:45")
        ).id
    )
    checked_in = AppointmentFactory(
        branch=branch,
        doctor=doctor,
        patient=plain,
        slot_start=at(DAY, "11:00"),
        slot_end=at(DAY, "11:15"),
        status=Appointment.Status.CHECKED_IN,
        checked_in_at=timezone.now(),
    )
    draft = make_invoice(branch=branch, patient=patient, department=department, finalize=False)
    finalized = make_invoice(branch=branch, patient=patient, department=department)
    pay(finalized, "100.00", mode="upi", reference=f"UPI-{code}")
    return Site(branch, doctor, patient, plain, booked, started, checked_in, draft, finalized)


def seed_world(api_client_factory: Callable[..., Any], issue_token: Callable[..., str]) -> World:
    home = _site("BLR", "Karnataka", "29AABCC1234D1Z5", 1)
    other = _site("MUM", "Maharashtra", "27AABCC1234D1Z5", 2)
    api_client = api_client_factory(scopes=list(SCOPES), branches=[home.branch], rate_limit_per_minute=1_000_000)
    return World(home=home, other=other, api_client=api_client, token=issue_token(api_client))


# --- Requests -----------------------------------------------------------------------------------------


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
    EMPTY = "200 with an empty list"  # a list filter narrowed to a hidden branch finds nothing


@dataclass(frozen=True)
class Case:
    request: Callable[[Pick, World], Call]
    status: int
    # The patients (or their ids) the audit row of a successful call names; the body is the response's.
    audited: Callable[[Site, Any], list[Any]] = lambda site, body: []
    refused: Mapping[str, str] = field(default_factory=dict)  # reference -> Refusal


def _list_patients(site: Site, body: Any) -> list[Any]:
    return [site.patient, site.plain]


def _today() -> str:
    return timezone.localdate().isoformat()


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
        refused={"patient_id": Refusal.FIELD, "doctor_id": Refusal.FIELD, "branch_id": Refusal.FIELD},
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
        refused={"patient_id": Refusal.FIELD, "branch_id": Refusal.FIELD},
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
    "billing_summary": Case(
        lambda of, w: Call(
            "GET",
            "/api/v1/billing/summary",
            {"branch_id": str(of("branch_id").branch.id), "date_from": _today(), "date_to": _today()},
        ),
        200,
        refused={"branch_id": Refusal.FIELD},
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


# --- The document -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Operation:
    operation_id: str
    method: str
    path: str
    document: Mapping[str, Any]  # the operation object

    def __str__(self) -> str:
        return f"{self.operation_id} ({self.method} {self.path})"


def openapi_document() -> dict[str, Any]:
    """The document as served (JSON-compatible), built in-process."""
    from drf_spectacular.generators import SchemaGenerator
    from drf_spectacular.renderers import OpenApiJsonRenderer

    rendered = OpenApiJsonRenderer().render(SchemaGenerator().get_schema(request=None, public=True))
    return json.loads(rendered, parse_float=Decimal)  # multipleOf 0.01 compared exactly, not as a float


DOCUMENT = openapi_document()

OPERATIONS: list[Operation] = sorted(
    (
        Operation(operation["operationId"], method.upper(), path, operation)
        for path, item in DOCUMENT["paths"].items()
        for method, operation in item.items()
    ),
    key=lambda op: op.operation_id,
)


def _entities() -> set[str]:
    """The resources the document has collections of (`/api/v1/patients` -> patient, `branches` -> branch)."""
    found = set()
    for path in DOCUMENT["paths"]:
        last = path.rstrip("/").rsplit("/", 1)[-1]
        if "{" not in last:
            found.add(re.sub(r"(?<=ch)es$|s$", "", last))
    return found


def _schema(node: Mapping[str, Any]) -> Mapping[str, Any]:
    while "$ref" in node:
        node = DOCUMENT["components"]["schemas"][node["$ref"].rsplit("/", 1)[-1]]
    return node


def references(operation: Operation) -> list[str]:
    """The names by which the operation's request names branch-bound objects: its path parameters, and the
    query parameters and top-level body members called `<entity>_id` for a resource of the document."""
    entities = _entities()

    def is_reference(name: str) -> bool:
        return name.endswith("_id") and name[: -len("_id")] in entities

    names = [p["name"] for p in operation.document.get("parameters", []) if p["in"] == "path"]
    names += [
        p["name"] for p in operation.document.get("parameters", []) if p["in"] == "query" and is_reference(p["name"])
    ]
    content = operation.document.get("requestBody", {}).get("content", {})
    for media in content.values():
        names += [name for name in _schema(media.get("schema", {})).get("properties", {}) if is_reference(name)]
    assert len(names) == len(set(names)), (operation, names)  # one name, one reference
    return sorted(set(names))
