"""Factories and a small world for the pharmacy tests: two branches (the clients see BLR only), a doctor at
each, a patient at BLR, and a drug of each schedule: PARA500 (OTC), AMOX500 (H), ALPRAZ05 (H1), MORPH10 (X)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, timedelta
from decimal import Decimal
from typing import Any

import factory
from django.db import connection
from django.utils import timezone

from pharmacy import services
from pharmacy.models import Batch, Drug, DrugForm, Prescription, ReorderLevel, Schedule, StockMovement
from tests.factories import BranchFactory, DepartmentFactory, DoctorFactory
from tests.patients.factories import PatientFactory

DRUGS = "/api/v1/pharmacy/drugs"
STOCK = "/api/v1/pharmacy/stock"
RECEIPTS = "/api/v1/pharmacy/stock/receipts"
ADJUSTMENTS = "/api/v1/pharmacy/stock/adjustments"
PRESCRIPTIONS = "/api/v1/pharmacy/prescriptions"
DISPENSES = "/api/v1/pharmacy/dispenses"


class DrugFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Drug
        django_get_or_create = ("code",)

    code = factory.Sequence(lambda n: f"DRUG{n:03d}")
    generic_name = factory.Sequence(lambda n: f"Generic {n}")
    brand_name = ""
    form = DrugForm.TABLET
    strength = "500 mg"
    hsn_code = "30049099"
    gst_rate = Decimal("12")
    schedule = Schedule.OTC
    unit = "tablet"
    mrp = None


def today() -> date:
    return timezone.localdate()


def expire(batch: Batch, on: date | None = None) -> Batch:
    """Move a batch's expiry date into the past (receipts refuse expired stock; the tests need some)."""
    Batch.objects.filter(pk=batch.pk).update(expiry_date=on or today() - timedelta(days=1))
    batch.refresh_from_db()
    return batch


def ledger_sum(batch: Batch) -> int:
    return sum(StockMovement.objects.filter(batch=batch).values_list("quantity", flat=True))


def on_hand(batch: Batch) -> int:
    return Batch.objects.values_list("quantity_on_hand", flat=True).get(pk=batch.pk)


def raw_sql(sql: str, params: list[Any] | None = None) -> None:
    with connection.cursor() as cursor:
        cursor.execute(sql, params or [])


@dataclass
class PharmacyWorld:
    blr: Any
    mum: Any
    department: Any
    doctor: Any
    mum_doctor: Any
    patient: Any
    para: Drug  # OTC
    amox: Drug  # Schedule H
    alpraz: Drug  # Schedule H1
    morph: Drug  # Schedule X
    writer: str  # pharmacy:write, BLR only
    reader: str  # pharmacy:read, BLR only

    def receive(
        self,
        drug: Drug,
        batch_number: str,
        quantity: int,
        *,
        expires_in_days: int = 365,
        branch: Any = None,
        mrp: str = "2.00",
    ) -> Batch:
        movement = services.stock_receive(
            branch=branch or self.blr,
            drug=drug,
            batch_number=batch_number,
            expiry_date=today() + timedelta(days=expires_in_days),
            quantity=quantity,
            unit_cost=Decimal("1.00"),
            mrp=Decimal(mrp),
            actor="test",
        )
        return Batch.objects.get(pk=movement.batch_id)

    def reorder(self, drug: Drug, level: int, branch: Any = None) -> ReorderLevel:
        return ReorderLevel.objects.create(drug=drug, branch=branch or self.blr, level=level)

    def prescribe(self, *items: tuple[Drug, int], **kwargs: Any) -> Prescription:
        values: dict[str, Any] = {
            "branch": self.blr,
            "patient": self.patient,
            "doctor": self.doctor,
            "items": [
                services.PrescribedItem(
                    drug=drug,
                    dose="1 tablet",
                    frequency="twice a day",
                    route="oral",
                    duration_days=5,
                    quantity=quantity,
                )
                for drug, quantity in items
            ],
            "created_by": "test",
        }
        return services.prescription_create(**{**values, **kwargs})

    def dispense(self, *items: tuple[Drug, int], **kwargs: Any) -> Any:
        values: dict[str, Any] = {
            "branch": self.blr,
            "items": [services.DispenseItem(drug=drug, quantity=quantity) for drug, quantity in items],
            "dispensed_by": "test",
        }
        return services.dispense_record(**{**values, **kwargs})


def make_pharmacy_world(token_for: Callable[..., str]) -> PharmacyWorld:
    blr = BranchFactory(code="BLR", name="Bengaluru Central Clinic", state="Karnataka", time_zone="Asia/Kolkata")
    mum = BranchFactory(code="MUM", name="Mumbai Andheri Hospital", state="Maharashtra", time_zone="Asia/Kolkata")
    department = DepartmentFactory(name="General Medicine")
    doctor = DoctorFactory(name="Dr. Anil Rao", department=department, branches=[blr])
    mum_doctor = DoctorFactory(name="Dr. Meera Shah", department=department, branches=[mum])
    patient = PatientFactory(first_name="Priya", last_name="Sharma", address_state="Karnataka", registration_branch=blr)
    para = DrugFactory(
        code="PARA500", generic_name="Paracetamol", brand_name="Crocin", strength="500 mg", gst_rate=Decimal("12")
    )
    amox = DrugFactory(
        code="AMOX500",
        generic_name="Amoxicillin",
        brand_name="Mox",
        form=DrugForm.CAPSULE,
        unit="capsule",
        schedule=Schedule.H,
        hsn_code="30041010",
    )
    alpraz = DrugFactory(code="ALPRAZ05", generic_name="Alprazolam", strength="0.5 mg", schedule=Schedule.H1)
    morph = DrugFactory(
        code="MORPH10",
        generic_name="Morphine",
        strength="10 mg/ml",
        form=DrugForm.INJECTION,
        unit="ampoule",
        schedule=Schedule.X,
        hsn_code="30049011",
    )
    return PharmacyWorld(
        blr=blr,
        mum=mum,
        department=department,
        doctor=doctor,
        mum_doctor=mum_doctor,
        patient=patient,
        para=para,
        amox=amox,
        alpraz=alpraz,
        morph=morph,
        writer=token_for(["pharmacy:write"], branches=[blr]),
        reader=token_for(["pharmacy:read"], branches=[blr]),
    )
