"""seed_demo's pharmacy: a drug of every schedule (OTC, H, H1, X) with its HSN code and GST rate and a reorder
level at each branch; batches at every branch received through the ledger (one expiring within 90 days,
one already expired); and at the first branch with a doctor a prescription, partly dispensed (not billed:
billing's part of the demo owns the demo invoices).
Created once: a second run finds it all and changes nothing."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from decimal import Decimal
from typing import Any

from django.db import transaction
from django.utils import timezone

from clinic.models import Branch, Doctor
from patients.models import Patient
from pharmacy import services
from pharmacy.models import Batch, Drug, DrugForm, Prescription, ReorderLevel, Schedule

# code, generic name, brand, form, strength, HSN, GST %, schedule, unit, MRP per unit, reorder level. Medicines
# (HSN 3003/3004) are taxed at 5 % since the GST rate changes of 22 September 2025 (12 % before).
DRUGS: list[tuple[str, str, str, str, str, str, str, str, str, str, int]] = [
    (
        "PARA500",
        "Paracetamol",
        "Crocin",
        DrugForm.TABLET,
        "500 mg",
        "30049099",
        "5",
        Schedule.OTC,
        "tablet",
        "2.00",
        200,
    ),
    ("CETI10", "Cetirizine", "Okacet", DrugForm.TABLET, "10 mg", "30049099", "5", Schedule.OTC, "tablet", "1.80", 100),
    (
        "ORS21",
        "Oral rehydration salts",
        "Electral",
        DrugForm.POWDER,
        "21.8 g",
        "30049099",
        "5",
        Schedule.OTC,
        "sachet",
        "22.00",
        50,
    ),
    ("AMOX500", "Amoxicillin", "Mox", DrugForm.CAPSULE, "500 mg", "30041010", "5", Schedule.H, "capsule", "8.50", 100),
    (
        "AZI500",
        "Azithromycin",
        "Azithral",
        DrugForm.TABLET,
        "500 mg",
        "30042019",
        "5",
        Schedule.H,
        "tablet",
        "23.50",
        30,
    ),
    (
        "ALPRAZ05",
        "Alprazolam",
        "Alprax",
        DrugForm.TABLET,
        "0.5 mg",
        "30049099",
        "5",
        Schedule.H1,
        "tablet",
        "3.10",
        20,
    ),
    (
        "MORPH10",
        "Morphine sulphate",
        "",
        DrugForm.INJECTION,
        "10 mg/ml",
        "30041090",
        "5",
        Schedule.X,
        "ampoule",
        "45.00",
        5,
    ),
]

# drug code, batch number, days to expiry (negative: expired on arrival in the demo), units received
BATCHES: list[tuple[str, str, int, int]] = [
    ("PARA500", "CR2611A", 540, 500),
    ("PARA500", "CR2603S", 60, 120),  # expires within the 90-day warning
    ("PARA500", "CR2509X", -10, 40),  # already expired: awaits its write-off
    ("CETI10", "OK2701", 400, 200),
    ("ORS21", "EL2612", 300, 80),
    ("AMOX500", "MX2604B", 200, 150),
    ("AZI500", "AZ2702", 420, 20),  # below its reorder level of 30
    ("ALPRAZ05", "AL2705", 500, 60),
    ("MORPH10", "MO2703", 365, 10),
]


def _drugs() -> dict[str, Drug]:
    drugs = {}
    for code, generic, brand, form, strength, hsn, gst, schedule, unit, mrp, _ in DRUGS:
        drugs[code], _created = Drug.objects.get_or_create(
            code=code,
            defaults={
                "generic_name": generic,
                "brand_name": brand,
                "form": form,
                "strength": strength,
                "hsn_code": hsn,
                "gst_rate": Decimal(gst),
                "schedule": schedule,
                "unit": unit,
                "mrp": Decimal(mrp),
            },
        )
    return drugs


def _stock(branch: Branch, drugs: dict[str, Drug]) -> None:
    levels = {code: level for code, *_, level in DRUGS}
    for code, drug in drugs.items():
        ReorderLevel.objects.get_or_create(drug=drug, branch=branch, defaults={"level": levels[code]})
    today = timezone.localtime(timezone.now(), branch.zone).date()
    for code, number, days, quantity in BATCHES:
        if Batch.objects.filter(branch=branch, drug=drugs[code], batch_number=number).exists():
            continue
        drug = drugs[code]
        movement = services.stock_receive(
            branch=branch,
            drug=drug,
            batch_number=number,
            expiry_date=today + timedelta(days=max(days, 30)),
            quantity=quantity,
            unit_cost=(drug.mrp or Decimal(1)) * Decimal("0.7"),
            mrp=drug.mrp or Decimal(1),
            actor="seed_demo",
        )
        if days < 0:
            # Demo only: received stock is never expired, so the expired batch is dated back after its receipt
            # (expiry is not the on-hand, which only the ledger changes).
            Batch.objects.filter(pk=movement.batch_id).update(expiry_date=today + timedelta(days=days))


def _prescription(branch: Branch, doctor: Doctor, patient: Patient, drugs: dict[str, Drug]) -> None:
    if Prescription.objects.filter(branch=branch, patient=patient).exists():
        return
    prescription = services.prescription_create(
        branch=branch,
        patient=patient,
        doctor=doctor,
        items=[
            services.PrescribedItem(
                drug=drugs["AMOX500"],
                dose="1 capsule",
                frequency="three times a day",
                route="oral",
                duration_days=5,
                quantity=15,
                instructions="After food",
            ),
            services.PrescribedItem(
                drug=drugs["PARA500"],
                dose="1 tablet",
                frequency="when needed, at most 4 a day",
                route="oral",
                duration_days=3,
                quantity=10,
            ),
        ],
        created_by="seed_demo",
    )
    services.dispense_record(
        branch=branch,
        prescription=prescription,
        items=[services.DispenseItem(drug=drugs["AMOX500"], quantity=15)],
        dispensed_by="seed_demo",
    )


@transaction.atomic
def seed_demo_pharmacy(
    *, branches: Sequence[Branch], doctors: Sequence[Doctor], patients: Sequence[Patient]
) -> dict[str, list[dict[str, Any]]]:
    """The catalogue, stock at every branch, and a prescription with a dispense; the manifest's `drugs`."""
    drugs = _drugs()
    for branch in branches:
        _stock(branch, drugs)
    first = branches[0] if branches else None
    doctor = next((d for d in doctors if first is not None and d.branches.filter(pk=first.pk).exists()), None)
    local = [p for p in patients if first is not None and p.registration_branch_id == first.id]
    if first is not None and doctor is not None and local:
        _prescription(first, doctor, local[0], drugs)
    return {
        "drugs": [
            {"id": str(drug.id), "code": drug.code, "name": drug.display_name, "schedule": drug.schedule}
            for drug in sorted(drugs.values(), key=lambda d: d.code)
        ]
    }
