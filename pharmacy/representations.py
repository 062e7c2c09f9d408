"""The pharmacy response bodies (docs/api-rules.md §14): one TypedDict per shape, named as its OpenAPI
component (clinic.api.shapes derives the component from it), and the functions that build them. The same
bodies are what the pharmacy events carry.

Quantities are integers in the drug's dispensing unit; money leaves as exact JSON numbers with two places;
datetimes carry the branch's UTC offset.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import date, datetime
from decimal import Decimal
from typing import Annotated, TypedDict
from zoneinfo import ZoneInfo

from django.utils import timezone

from clinic.lib.shapes import DateText, Deprecated, Doc, Format, Money, Number
from clinic.lib.tax import round_money
from patients.models import Patient
from pharmacy import models

GstRate = Number(max_digits=5, decimal_places=2)

# --- Catalogue ---------------------------------------------------------------------------------------------


class Drug(TypedDict):
    """A drug of the catalogue (the same at every branch)."""

    id: Annotated[str, Format.UUID]
    code: Annotated[str, Doc("What prescriptions, dispenses and stock receipts name in `drug`, e.g. PARA500.")]
    generic_name: str
    brand_name: str | None
    form: Annotated[str, models.DrugForm]
    strength: Annotated[str, Doc('e.g. "500 mg".')]
    hsn_code: Annotated[str, Doc("HSN code of the goods (4, 6 or 8 digits), as invoice lines carry it.")]
    gst_rate: Annotated[Decimal, GstRate, Doc("GST rate in percent; drugs are taxable goods.")]
    schedule: Annotated[str, models.Schedule]
    unit: Annotated[str, Doc("The dispensing unit every quantity counts: tablet, ml, bottle, vial...")]
    mrp: Annotated[Decimal | None, Money, Doc("Default MRP per unit; each batch carries its own.")]


def drug_representation(drug: models.Drug) -> Drug:
    return {
        "id": str(drug.id),
        "code": drug.code,
        "generic_name": drug.generic_name,
        "brand_name": drug.brand_name or None,
        "form": drug.form,
        "strength": drug.strength,
        "hsn_code": drug.hsn_code,
        "gst_rate": drug.gst_rate,
        "schedule": drug.schedule,
        "unit": drug.unit,
        "mrp": drug.mrp,
    }


class DrugRef(TypedDict):
    """The drug as prescriptions, dispenses and stock show it."""

    code: str
    name: Annotated[str, Doc("Generic name, strength and form: Paracetamol 500 mg tablet.")]
    brand_name: str | None
    schedule: Annotated[str, models.Schedule]
    unit: str


def drug_ref(drug: models.Drug) -> DrugRef:
    return {
        "code": drug.code,
        "name": drug.display_name,
        "brand_name": drug.brand_name or None,
        "schedule": drug.schedule,
        "unit": drug.unit,
    }


# --- Stock


class StockBatch(TypedDict):
    id: Annotated[str, Format.UUID]
    batch_id: Annotated[str, Format.UUID, Deprecated("id")]
    batch_number: str
    expiry_date: DateText
    quantity_on_hand: Annotated[int, Doc("Units; the sum of the batch's ledger movements.")]
    unit_cost: Annotated[Decimal, Money]
    mrp: Annotated[Decimal, Money, Doc("Per unit: the price a dispense charges.")]
    expired: Annotated[bool, Doc("The expiry date is not after today at the branch: never dispensed.")]


def stock_batch_representation(batch: models.Batch, today: date) -> StockBatch:
    return {
        "id": str(batch.id),
        "batch_id": str(batch.id),
        "batch_number": batch.batch_number,
        "expiry_date": batch.expiry_date.isoformat(),
        "quantity_on_hand": batch.quantity_on_hand,
        "unit_cost": batch.unit_cost,
        "mrp": batch.mrp,
        "expired": batch.expiry_date <= today,
    }


class StockLevel(TypedDict):
    """A drug's stock at one branch."""

    drug: DrugRef
    branch_id: Annotated[str, Format.UUID]
    on_hand: Annotated[int, Doc("Units in the non-expired batches (expired stock is apart).")]
    expired_on_hand: Annotated[int, Doc("Units in expired batches, awaiting write-off.")]
    reorder_level: Annotated[int | None, Doc("Null when none is set for the branch.")]
    below_reorder: Annotated[bool, Doc("on_hand is below the reorder level.")]
    batches: Annotated[list[StockBatch], Doc("The batches holding stock, first expiry first.")]


@dataclass
class StockEntry:
    """What a StockLevel is built from (pharmacy.selectors.stock_level_page)."""

    drug: models.Drug
    branch_id: uuid.UUID
    today: date
    reorder_level: int | None
    batches: list[models.Batch] = field(default_factory=list)  # holding stock, by expiry then id

    @property
    def on_hand(self) -> int:
        return sum(b.quantity_on_hand for b in self.batches if b.expiry_date > self.today)

    @property
    def below_reorder(self) -> bool:
        return self.reorder_level is not None and self.on_hand < self.reorder_level


def stock_level_representation(entry: StockEntry) -> StockLevel:
    return {
        "drug": drug_ref(entry.drug),
        "branch_id": str(entry.branch_id),
        "on_hand": entry.on_hand,
        "expired_on_hand": sum(b.quantity_on_hand for b in entry.batches if b.expiry_date <= entry.today),
        "reorder_level": entry.reorder_level,
        "below_reorder": entry.below_reorder,
        "batches": [stock_batch_representation(batch, entry.today) for batch in entry.batches],
    }


class StockMovement(TypedDict):
    """One line of the stock ledger, with its batch as it stands after it."""

    movement_id: Annotated[int, Doc("The ledger's sequence.")]
    kind: Annotated[str, models.MovementKind]
    quantity: Annotated[int, Doc("Signed: positive into stock, negative out of it.")]
    reason: str | None
    actor: Annotated[str, Doc('"api:<client>" or "staff:<user>".')]
    at: Annotated[str, Format.DATE_TIME]
    drug: DrugRef
    branch_id: Annotated[str, Format.UUID]
    batch: StockBatch


def _local(value: datetime, zone: ZoneInfo) -> str:
    return value.astimezone(zone).isoformat()


def local_today(zone: ZoneInfo) -> date:
    return timezone.localtime(timezone.now(), zone).date()


def stock_movement_representation(movement: models.StockMovement) -> StockMovement:
    """From a movement read with its batch, the batch's drug and branch."""
    batch = movement.batch
    zone = batch.branch.zone
    return {
        "movement_id": movement.id,
        "kind": movement.kind,
        "quantity": movement.quantity,
        "reason": movement.reason or None,
        "actor": movement.actor,
        "at": _local(movement.at, zone),
        "drug": drug_ref(batch.drug),
        "branch_id": str(batch.branch_id),
        "batch": stock_batch_representation(batch, local_today(zone)),
    }


# --- Prescriptions


class PharmacyPatient(TypedDict):
    id: Annotated[str, Format.UUID]
    patient_id: Annotated[str, Doc("The patient's business id.")]
    name: str


class PharmacyDoctor(TypedDict):
    id: Annotated[str, Format.UUID]
    name: str


class PrescriptionItem(TypedDict):
    id: Annotated[str, Format.UUID]
    item_id: Annotated[str, Format.UUID, Deprecated("id")]
    drug: DrugRef
    dose: str
    frequency: str
    route: str
    duration_days: int
    quantity: Annotated[int, Doc("Prescribed units.")]
    instructions: str | None
    dispensed: Annotated[int, Doc("Units dispensed against the item, less those returned.")]
    remaining: Annotated[int, Doc("Units that may still be dispensed (0 once cancelled).")]


class Prescription(TypedDict):
    """A prescription as the API returns it and the prescription events carry it."""

    id: Annotated[str, Format.UUID]
    prescription_id: Annotated[str, Format.UUID, Deprecated("id")]
    prescription_number: Annotated[str, Doc("Per branch and calendar year, gap-free: BLR-RX-2026-000123.")]
    status: Annotated[str, models.PrescriptionStatus]
    patient: PharmacyPatient
    doctor: PharmacyDoctor
    branch_id: Annotated[str, Format.UUID]
    appointment_id: Annotated[str | None, Format.UUID]
    items: list[PrescriptionItem]
    created_by: str
    created_at: Annotated[str, Format.DATE_TIME, Doc("With the branch's UTC offset.")]
    cancelled_at: Annotated[str | None, Format.DATE_TIME]
    cancellation_reason: str | None


def _patient(patient: Patient) -> PharmacyPatient:
    return {"id": str(patient.id), "patient_id": patient.patient_id, "name": patient.name}


def prescription_representation(prescription: models.Prescription) -> Prescription:
    """Expects what pharmacy.selectors loads (branch, patient, doctor, items with their drugs)."""
    zone = prescription.branch.zone
    open_ = prescription.status == models.PrescriptionStatus.ACTIVE
    return {
        "id": str(prescription.id),
        "prescription_id": str(prescription.id),
        "prescription_number": prescription.prescription_number,
        "status": prescription.status,
        "patient": _patient(prescription.patient),
        "doctor": {"id": str(prescription.doctor_id), "name": prescription.doctor.name},
        "branch_id": str(prescription.branch_id),
        "appointment_id": str(prescription.appointment_id) if prescription.appointment_id else None,
        "items": [
            {
                "id": str(item.id),
                "item_id": str(item.id),
                "drug": drug_ref(item.drug),
                "dose": item.dose,
                "frequency": item.frequency,
                "route": item.route,
                "duration_days": item.duration_days,
                "quantity": item.quantity,
                "instructions": item.instructions or None,
                "dispensed": item.dispensed_quantity,
                "remaining": item.remaining if open_ else 0,
            }
            for item in prescription.items.all()
        ],
        "created_by": prescription.created_by,
        "created_at": _local(prescription.created_at, zone),
        "cancelled_at": _local(prescription.cancelled_at, zone) if prescription.cancelled_at else None,
        "cancellation_reason": prescription.cancellation_reason or None,
    }


# --- Dispenses


class DispenseLine(TypedDict):
    id: Annotated[str, Format.UUID]
    line_id: Annotated[str, Format.UUID, Deprecated("id")]
    drug: DrugRef
    batch_number: str
    expiry_date: DateText
    quantity: int
    returned_quantity: Annotated[int, Doc("Units of this line brought back so far.")]
    unit_price: Annotated[
        Decimal,
        Money,
        Doc("The batch's MRP per unit, GST included: what a billed dispense's invoice line adds up to per unit."),
    ]
    amount: Annotated[Decimal, Money, Doc("quantity x unit_price.")]
    prescription_item_id: Annotated[str | None, Format.UUID]


class DispenseReturnLine(TypedDict):
    line_id: Annotated[str, Format.UUID]
    quantity: int


class DispenseReturn(TypedDict):
    id: Annotated[str, Format.UUID]
    return_id: Annotated[str, Format.UUID, Deprecated("id")]
    reason: str
    returned_by: str
    at: Annotated[str, Format.DATE_TIME]
    lines: list[DispenseReturnLine]


class Dispense(TypedDict):
    """A dispense as the API returns it and `dispense.completed` carries it."""

    id: Annotated[str, Format.UUID]
    dispense_id: Annotated[str, Format.UUID, Deprecated("id")]
    dispense_number: Annotated[str, Doc("Per branch and calendar year, gap-free: BLR-DSP-2026-000123.")]
    branch_id: Annotated[str, Format.UUID]
    patient: Annotated[PharmacyPatient | None, Doc("Null for an over-the-counter sale to a walk-in.")]
    prescription_id: Annotated[str | None, Format.UUID]
    prescription_number: str | None
    invoice_id: Annotated[str | None, Format.UUID, Doc("The draft invoice the drugs were billed on (bill: true).")]
    lines: Annotated[list[DispenseLine], Doc("One per batch drawn from, in the order of the request's items.")]
    total: Annotated[Decimal, Money, Doc("The sum of the lines' amounts.")]
    returns: list[DispenseReturn]
    dispensed_by: str
    created_at: Annotated[str, Format.DATE_TIME, Doc("With the branch's UTC offset.")]


def dispense_representation(dispense: models.Dispense) -> Dispense:
    """Expects what pharmacy.selectors loads (branch, patient, prescription, lines with drug and batch, returns
    with their lines)."""
    zone = dispense.branch.zone
    lines: list[DispenseLine] = [
        {
            "id": str(line.id),
            "line_id": str(line.id),
            "drug": drug_ref(line.drug),
            "batch_number": line.batch.batch_number,
            "expiry_date": line.batch.expiry_date.isoformat(),
            "quantity": line.quantity,
            "returned_quantity": line.returned_quantity,
            "unit_price": line.unit_price,
            "amount": round_money(line.unit_price * line.quantity),
            "prescription_item_id": str(line.prescription_item_id) if line.prescription_item_id else None,
        }
        for line in dispense.lines.all()
    ]
    prescription = dispense.prescription
    return {
        "id": str(dispense.id),
        "dispense_id": str(dispense.id),
        "dispense_number": dispense.dispense_number,
        "branch_id": str(dispense.branch_id),
        "patient": _patient(dispense.patient) if dispense.patient else None,
        "prescription_id": str(prescription.id) if prescription else None,
        "prescription_number": prescription.prescription_number if prescription else None,
        "invoice_id": str(dispense.invoice_id) if dispense.invoice_id else None,
        "lines": lines,
        "total": sum((line["amount"] for line in lines), Decimal("0.00")),
        "returns": [
            {
                "id": str(back.id),
                "return_id": str(back.id),
                "reason": back.reason,
                "returned_by": back.returned_by,
                "at": _local(back.at, zone),
                "lines": [{"line_id": str(part.line_id), "quantity": part.quantity} for part in back.lines.all()],
            }
            for back in dispense.returns.all()
        ],
        "dispensed_by": dispense.dispensed_by,
        "created_at": _local(dispense.created_at, zone),
    }
