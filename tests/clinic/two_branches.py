"""A world seeded at two branches, for the suites that run every operation (operation_cases.py): the
calling client's branch (home) and one it may not see (other), each with the same kinds of objects.

The suites get it from the `world` fixture of tests/clinic/conftest.py, seeded once per module."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal
from typing import Any

from django.test import Client
from django.utils import timezone

from appointments.models import Appointment, WeeklySession
from billing.models import CreditNote, Invoice
from billing.services import CreditLineInput, credit_note_issue
from integrations.clients.scopes import SCOPES
from integrations.webhooks.models import WebhookSubscription
from integrations.webhooks.services import subscription_create
from lab.models import LabOrder, Priority
from lab.services import lab_order_create
from pharmacy.models import Batch, Dispense, Prescription
from pharmacy.services import DispenseItem, PrescribedItem, dispense_record, prescription_create, stock_receive
from tests.appointments.factories import AppointmentFactory
from tests.appointments.lifecycle_helpers import DAY, at, session, start_now
from tests.billing.factories import make_invoice, pay
from tests.factories import ApiClientFactory, BranchFactory, DepartmentFactory, DoctorFactory
from tests.helpers import exchange
from tests.lab.order_factories import LabTestFactory, imaging_test
from tests.patients.factories import (
    AllergyFactory,
    DiagnosisFactory,
    InsuranceFactory,
    MedicationFactory,
    PatientFactory,
    VisitFactory,
    aadhaar,
)
from tests.pharmacy.factories import DrugFactory

# A public address (no DNS lookup when a subscription is saved); nothing connects to it in these suites.
PUBLIC_TARGET = "https://93.184.215.14/hooks"


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
    credit_note: CreditNote  # 10.00 of the finalized invoice's line credited
    lab_order: LabOrder | None = None  # `patient`'s CBC and chest X-ray, ordered (nothing collected)
    # The pharmacy: a batch AMX26 of AMOX500 (100 received), `patient`'s prescription of 20 AMOX500 and a
    # dispense of 2 of them (the drug catalogue is shared by the network).
    batch: Batch | None = None
    prescription: Prescription | None = None
    dispense: Dispense | None = None
    # A webhook subscription created through the API by the site's client (home: the calling client; other:
    # a client limited to the other branch). Subscriptions are per client, so the other site's is another
    # client's.
    subscription: WebhookSubscription | None = None

    def ids(self) -> set[str]:
        """The ids of every object bound to this branch (departments are shared by the network)."""
        objects = [self.branch, self.doctor, self.patient, self.plain, self.booked, self.started, self.checked_in]
        lab = [self.lab_order] if self.lab_order is not None else []
        pharmacy = [obj for obj in (self.batch, self.prescription, self.dispense) if obj is not None]
        if self.prescription is not None:
            pharmacy += list(self.prescription.items.all())
        if self.dispense is not None:
            pharmacy += list(self.dispense.lines.all())
        webhooks = [self.subscription] if self.subscription is not None else []
        return {
            str(obj.pk) for obj in [*objects, self.draft, self.finalized, self.credit_note, *lab, *pharmacy, *webhooks]
        }


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
    credit_note = credit_note_issue(
        invoice=finalized,
        reason="Seeded",
        lines=[CreditLineInput(line_id=finalized.line_items.get().id, amount=Decimal("10.00"))],
    )
    finalized.refresh_from_db()
    lab_order = lab_order_create(
        branch=branch,
        patient=patient,
        doctor=doctor,
        tests=[
            LabTestFactory(code="CBC", name="Complete blood count"),
            imaging_test(code="XR-CHEST", name="Chest X-ray"),
        ],
        priority=Priority.ROUTINE,
        ordered_by="seed",
    )
    amox = DrugFactory(code="AMOX500", generic_name="Amoxicillin", strength="500 mg", schedule="H", unit="capsule")
    batch = stock_receive(
        branch=branch,
        drug=amox,
        batch_number="AMX26",
        expiry_date=DAY + timedelta(days=365),
        quantity=100,
        unit_cost=Decimal("5.00"),
        mrp=Decimal("8.50"),
        actor="seed",
    ).batch
    prescription = prescription_create(
        branch=branch,
        patient=patient,
        doctor=doctor,
        items=[PrescribedItem(drug=amox, dose="1", frequency="tds", route="oral", duration_days=7, quantity=20)],
        created_by="seed",
    )
    dispense = dispense_record(
        branch=branch,
        items=[DispenseItem(drug=amox, quantity=2)],
        prescription=prescription,
        dispensed_by="seed",
    )
    return Site(
        branch,
        doctor,
        patient,
        plain,
        booked,
        started,
        checked_in,
        draft,
        finalized,
        credit_note,
        lab_order=lab_order,
        batch=batch,
        prescription=prescription,
        dispense=dispense,
    )


def seed_world(http: Client) -> World:
    """Seed both sites and a client with every scope limited to home, its token issued by POST
    /api/v1/auth/token through `http`."""
    home = _site("BLR", "Karnataka", "29AABCC1234D1Z7", 1)
    other = _site("MUM", "Maharashtra", "27AABCC1234D1ZB", 2)
    api_client = ApiClientFactory(allowed_scopes=list(SCOPES), branches=[home.branch], rate_limit_per_minute=1_000_000)
    other_client = ApiClientFactory(allowed_scopes=list(SCOPES), branches=[other.branch])
    for site, owner in ((home, api_client), (other, other_client)):
        site.subscription, _secret = subscription_create(
            name=f"{site.branch.code} ERP",
            target_url=f"{PUBLIC_TARGET}/{site.branch.code.lower()}",  # an address: no DNS lookup
            event_types=["appointment.booked", "appointment.cancelled"],
            extra_headers={"Authorization": f"Bearer {site.branch.code}-token"},
            owner=owner,
        )
    response = exchange(http, api_client.client_id, api_client.secret)
    assert response.status_code == 200, response.content
    return World(home=home, other=other, api_client=api_client, token=response.json()["access_token"])
