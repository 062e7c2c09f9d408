"""Writes of the pharmacy (docs/api-rules.md §14): stock receipts, adjustments, transfers and expiry write-offs,
prescriptions, dispenses (first expiry first out, optionally billed) and their returns.

Stock changes only by inserting movements into the ledger; PostgreSQL applies them to the batches (see
pharmacy.models). Each write takes its row locks in the order pharmacy.locks states, checks every rule on
the locked rows, and only then writes, so a refused request changes nothing.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date, timedelta
from decimal import Decimal

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Case, F, Value, When
from django.utils import timezone

from appointments.models import Appointment
from billing import services as billing_services
from billing.models import Invoice
from clinic.db import related_known, violated_constraint
from clinic.errors import FieldError, InvalidState
from clinic.lib.tax import TaxCategory, inclusive_price_line
from clinic.models import Branch, Department, Doctor
from patients import services as patient_services
from patients.models import Patient
from pharmacy import events, locks, numbering, selectors
from pharmacy.errors import (
    BatchExpired,
    ExceedsDispensed,
    ExceedsPrescription,
    InsufficientStock,
    NotPrescribed,
    PrescriptionRequired,
)
from pharmacy.models import (
    MAX_QUANTITY,
    PRESCRIPTION_SCHEDULES,
    REGISTER_SCHEDULES,
    Batch,
    ControlledDrugEntry,
    Dispense,
    DispenseLine,
    DispenseReturn,
    DispenseReturnLine,
    Drug,
    ExpiryWarning,
    MovementKind,
    Prescription,
    PrescriptionItem,
    PrescriptionStatus,
    StockMovement,
)
from pharmacy.representations import local_today

MAX_ITEMS = 20
# The department pharmacy invoice lines are booked to (created on first use).
PHARMACY_DEPARTMENT = "Pharmacy"


@dataclass(frozen=True)
class PrescribedItem:
    drug: Drug
    dose: str
    frequency: str
    route: str
    duration_days: int
    quantity: int
    instructions: str = ""


@dataclass(frozen=True)
class DispenseItem:
    drug: Drug
    quantity: int
    batch_number: str | None = None  # None: first expiry first out


@dataclass(frozen=True)
class ReturnItem:
    line_id: uuid.UUID
    quantity: int


def _quantity_problem(quantity: int, *, signed: bool = False) -> str | None:
    if isinstance(quantity, bool) or not isinstance(quantity, int):
        return "A whole number of units."
    if quantity == 0 or (quantity < 0 and not signed):
        return "Must not be zero." if signed else "Must be at least 1."
    if abs(quantity) > MAX_QUANTITY:
        return f"At most {MAX_QUANTITY} units."
    return None


# --- The ledger


def _insert_movements(movements: list[StockMovement], batches: Sequence[Batch]) -> list[StockMovement]:
    """Insert ledger lines; PostgreSQL applies each to its batch. The in-memory batches are brought level.
    A negative on-hand (which the locks already rule out) is refused by the batch's CHECK."""
    try:
        created = StockMovement.objects.bulk_create(movements)
    except IntegrityError as exc:
        if violated_constraint(exc) == "batch_quantity_not_negative":
            raise InsufficientStock("Not enough stock on hand.", drug="", available=0) from exc
        raise
    by_id = {batch.pk: batch for batch in batches}
    for movement in created:
        by_id[movement.batch_id].quantity_on_hand += movement.quantity
    return created


def _on_hand(batches: Iterable[Batch], drug: Drug, today: date) -> int:
    """Non-expired units of `drug` among locked batches (of one branch)."""
    return sum(b.quantity_on_hand for b in batches if b.drug_id == drug.pk and b.expiry_date > today)


def _publish_crossings(*, branch: Branch, changes: Sequence[tuple[Drug, int, int]]) -> None:
    """stock.below_reorder for each (drug, on-hand before, after) whose non-expired stock went from its level
    or above to below it: once per crossing, since the next change starts below. One query for the levels,
    none when nothing went down."""
    fell = [(drug, before, after) for drug, before, after in changes if after < before]
    if not fell:
        return
    levels = selectors.reorder_levels_get(branch_id=branch.id, drug_ids=[drug.pk for drug, _, _ in fell])
    for drug, before, after in fell:
        level = levels.get(drug.pk)
        if level is not None and before >= level > after:
            events.stock_publish(events.STOCK_BELOW_REORDER, selectors.stock_level_of(branch=branch, drug=drug))


def _publish_crossing(*, branch: Branch, drug: Drug, before: int, after: int) -> None:
    _publish_crossings(branch=branch, changes=[(drug, before, after)])


def _batch_of(batches: Iterable[Batch], drug: Drug, batch_number: str) -> Batch | None:
    return next((b for b in batches if b.drug_id == drug.pk and b.batch_number == batch_number), None)


def _batch_ensure(
    *, branch: Branch, drug: Drug, batch_number: str, expiry_date: date, unit_cost: Decimal, mrp: Decimal
) -> None:
    """Create the batch (empty) unless it exists; concurrent creators of one batch both succeed."""
    Batch.objects.bulk_create(
        [
            Batch(
                branch=branch,
                drug=drug,
                batch_number=batch_number,
                expiry_date=expiry_date,
                unit_cost=unit_cost,
                mrp=mrp,
                received_at=timezone.now(),
            )
        ],
        ignore_conflicts=True,
    )


# --- Stock


@transaction.atomic
def stock_receive(
    *,
    branch: Branch,
    drug: Drug,
    batch_number: str,
    expiry_date: date,
    quantity: int,
    unit_cost: Decimal,
    mrp: Decimal,
    actor: str,
) -> StockMovement:
    """Receive `quantity` units of a batch at the branch: the batch is created (empty) when new, then a
    receipt movement adds the units. A known batch must keep its expiry date and MRP (400 otherwise); its
    unit cost stays the first receipt's. The expiry date must be after today at the branch."""
    errors: dict[str, str] = {}
    batch_number = batch_number.strip()
    if not drug.active:
        errors["drug"] = f"The drug {drug.code} is no longer active."
    if not batch_number:
        errors["batch_number"] = "Required."
    if expiry_date <= local_today(branch.zone):
        errors["expiry_date"] = "Must be after today at the branch: expired stock is not received."
    if (problem := _quantity_problem(quantity)) is not None:
        errors["quantity"] = problem
    if unit_cost < 0:
        errors["unit_cost"] = "Must not be negative."
    if mrp < 0:
        errors["mrp"] = "Must not be negative."
    if errors:
        raise FieldError(errors)
    _batch_ensure(
        branch=branch, drug=drug, batch_number=batch_number, expiry_date=expiry_date, unit_cost=unit_cost, mrp=mrp
    )
    batches = locks.batches_lock(branch_drugs=[(branch.id, drug.id)])
    batch = _batch_of(batches, drug, batch_number)
    assert batch is not None  # ensured above
    if batch.expiry_date != expiry_date:
        errors["expiry_date"] = f"The batch {batch_number} expires on {batch.expiry_date:%Y-%m-%d}."
    if batch.mrp != mrp:
        errors["mrp"] = f"The batch {batch_number} has the MRP {batch.mrp}."
    if errors:
        raise FieldError(errors)
    (movement,) = _insert_movements(
        [StockMovement(batch=batch, kind=MovementKind.RECEIPT, quantity=quantity, actor=actor, at=timezone.now())],
        batches,
    )
    return movement


@transaction.atomic
def stock_adjust(
    *, branch: Branch, drug: Drug, batch_number: str, quantity: int, reason: str, actor: str
) -> StockMovement:
    """Correct a batch's on-hand by a signed, non-zero `quantity` (a count, breakage); `reason` is required.
    Taking out more than the batch holds is 409 insufficient_stock."""
    errors: dict[str, str] = {}
    reason = reason.strip()
    if not reason:
        errors["reason"] = "Say why the stock is adjusted."
    if (problem := _quantity_problem(quantity, signed=True)) is not None:
        errors["quantity"] = problem
    if errors:
        raise FieldError(errors)
    batches = locks.batches_lock(branch_drugs=[(branch.id, drug.id)])
    batch = _batch_of(batches, drug, batch_number)
    if batch is None:
        raise FieldError({"batch_number": f"No batch {batch_number!r} of {drug.code} at this branch."})
    if batch.quantity_on_hand + quantity < 0:
        raise InsufficientStock(
            f"The batch {batch_number} holds {batch.quantity_on_hand} units.",
            drug=drug.code,
            available=batch.quantity_on_hand,
        )
    today = local_today(branch.zone)
    before = _on_hand(batches, drug, today)
    (movement,) = _insert_movements(
        [
            StockMovement(
                batch=batch,
                kind=MovementKind.ADJUSTMENT,
                quantity=quantity,
                reason=reason,
                actor=actor,
                at=timezone.now(),
            )
        ],
        batches,
    )
    _publish_crossing(branch=branch, drug=drug, before=before, after=_on_hand(batches, drug, today))
    return movement


@transaction.atomic
def stock_transfer(
    *, batch: Batch, to_branch: Branch, quantity: int, actor: str, reason: str = ""
) -> tuple[StockMovement, StockMovement]:
    """Move units of a batch to another branch in one transaction: a transfer_out here and a transfer_in into
    the batch of the same number and expiry there (created when new), paired by one transfer id."""
    source = batch.branch
    if (problem := _quantity_problem(quantity)) is not None:
        raise FieldError({"quantity": problem})
    if to_branch.pk == source.pk:
        raise FieldError({"to_branch": "The batch is already at this branch."})
    drug = batch.drug
    _batch_ensure(
        branch=to_branch,
        drug=drug,
        batch_number=batch.batch_number,
        expiry_date=batch.expiry_date,
        unit_cost=batch.unit_cost,
        mrp=batch.mrp,
    )
    batches = locks.batches_lock(branch_drugs=[(source.id, drug.id), (to_branch.id, drug.id)])
    here = next(b for b in batches if b.pk == batch.pk)
    there = next(b for b in batches if b.branch_id == to_branch.pk and b.batch_number == batch.batch_number)
    if there.expiry_date != here.expiry_date:
        raise FieldError({"to_branch": f"The batch {batch.batch_number} there has another expiry date."})
    if here.quantity_on_hand < quantity:
        raise InsufficientStock(
            f"The batch {batch.batch_number} holds {here.quantity_on_hand} units.",
            drug=drug.code,
            available=here.quantity_on_hand,
        )
    today = local_today(source.zone)
    before = _on_hand([b for b in batches if b.branch_id == source.pk], drug, today)
    transfer_id, now = uuid.uuid4(), timezone.now()
    out, into = _insert_movements(
        [
            StockMovement(
                batch=here,
                kind=MovementKind.TRANSFER_OUT,
                quantity=-quantity,
                reason=reason,
                actor=actor,
                at=now,
                transfer_id=transfer_id,
            ),
            StockMovement(
                batch=there,
                kind=MovementKind.TRANSFER_IN,
                quantity=quantity,
                reason=reason,
                actor=actor,
                at=now,
                transfer_id=transfer_id,
            ),
        ],
        batches,
    )
    after = _on_hand([b for b in batches if b.branch_id == source.pk], drug, today)
    _publish_crossing(branch=source, drug=drug, before=before, after=after)
    return out, into


@transaction.atomic
def batch_write_off_expired(*, batch: Batch, actor: str, reason: str = "Expired") -> StockMovement:
    """Write off everything an expired batch holds (a staff action). 409 invalid_state when the batch has
    not expired at its branch, or holds nothing."""
    branch, drug = batch.branch, batch.drug
    batches = locks.batches_lock(branch_drugs=[(branch.id, drug.id)])
    locked = next(b for b in batches if b.pk == batch.pk)
    today = local_today(branch.zone)
    if locked.expiry_date > today:
        raise InvalidState(f"The batch {locked.batch_number} has not expired (expiry {locked.expiry_date}).")
    if locked.quantity_on_hand == 0:
        raise InvalidState(f"The batch {locked.batch_number} holds nothing to write off.")
    before = _on_hand(batches, drug, today)
    (movement,) = _insert_movements(
        [
            StockMovement(
                batch=locked,
                kind=MovementKind.EXPIRY_WRITE_OFF,
                quantity=-locked.quantity_on_hand,
                reason=reason.strip() or "Expired",
                actor=actor,
                at=timezone.now(),
            )
        ],
        batches,
    )
    _publish_crossing(branch=branch, drug=drug, before=before, after=_on_hand(batches, drug, today))
    return movement


def stock_expiring_publish(*, within_days: int | None = None) -> int:
    """One `stock.expiring` per drug and branch with a batch holding stock that expires within `within_days`
    (default PHARMACY_EXPIRY_WARNING_DAYS) days of today at the branch, at most once a day per drug and branch
    (ExpiryWarning), so a second run of the day publishes nothing; returns how many were published."""
    days = settings.PHARMACY_EXPIRY_WARNING_DAYS if within_days is None else within_days
    keys: dict[tuple[uuid.UUID, uuid.UUID], tuple[Branch, Drug]] = {}
    for batch in selectors.batches_expiring(within_days=days):
        keys.setdefault((batch.branch_id, batch.drug_id), (batch.branch, batch.drug))
    published = 0
    for branch, drug in keys.values():
        with transaction.atomic():
            _, first = ExpiryWarning.objects.get_or_create(drug=drug, branch=branch, day=local_today(branch.zone))
            if first:
                events.stock_publish(events.STOCK_EXPIRING, selectors.stock_level_of(branch=branch, drug=drug))
                published += 1
    return published


# --- Prescriptions


def _prescription_problems(
    *,
    branch: Branch,
    patient: Patient,
    doctor: Doctor,
    items: Sequence[PrescribedItem],
    appointment: Appointment | None,
) -> dict[str, str]:
    errors: dict[str, str] = {}
    if not patient.is_active:
        errors["patient_id"] = "This patient record is inactive (merged or erroneous)."
    if not branch.is_active:
        errors["branch_id"] = f"The branch {branch.code} is closed."
    if not doctor.is_active or not doctor.branches.filter(id=branch.id).exists():
        errors["doctor_id"] = f"{doctor.name} does not work at the branch {branch.code}."
    if appointment is not None and (appointment.patient_id != patient.id or appointment.branch_id != branch.id):
        errors["appointment_id"] = "Not an appointment of this patient at this branch."
    if not items:
        errors["items"] = "Prescribe at least one drug."
    elif len(items) > MAX_ITEMS:
        errors["items"] = f"At most {MAX_ITEMS} drugs per prescription."
    seen: set[object] = set()
    for index, item in enumerate(items):
        if item.drug.pk in seen:
            errors[f"items.{index}.drug"] = f"The drug {item.drug.code} is prescribed twice."
        elif not item.drug.active:
            errors[f"items.{index}.drug"] = f"The drug {item.drug.code} is no longer active."
        seen.add(item.drug.pk)
        if not 1 <= item.duration_days <= 365:
            errors[f"items.{index}.duration_days"] = "From 1 to 365 days."
        if (problem := _quantity_problem(item.quantity)) is not None:
            errors[f"items.{index}.quantity"] = problem
    return errors


@transaction.atomic
def prescription_create(
    *,
    branch: Branch,
    patient: Patient,
    doctor: Doctor,
    items: Sequence[PrescribedItem],
    appointment: Appointment | None = None,
    created_by: str,
) -> Prescription:
    """Write a prescription: the branch's next number of the year (branch-local date), one item per drug, and
    each drug a current medication in the patient's profile for the course (duration_days from today).
    400 (FieldError) naming every bad field; nothing is written then."""
    errors = _prescription_problems(branch=branch, patient=patient, doctor=doctor, items=items, appointment=appointment)
    if errors:
        raise FieldError(errors)
    today = local_today(branch.zone)
    number = numbering.next_prescription_number(branch_id=branch.id, year=today.year)
    prescription = Prescription.objects.create(
        branch=branch,
        patient=patient,
        doctor=doctor,
        appointment=appointment,
        prescription_number=numbering.format_prescription_number(branch.code, today.year, number),
        created_by=created_by,
    )
    rows = []
    for position, item in enumerate(items):
        medication = patient_services.medication_start(
            patient=patient,
            name=item.drug.display_name,
            dosage=item.dose,
            frequency=item.frequency,
            start_date=today,
            end_date=today + timedelta(days=item.duration_days - 1),
        )
        rows.append(
            PrescriptionItem(
                prescription=prescription,
                position=position,
                drug=item.drug,
                dose=item.dose,
                frequency=item.frequency,
                route=item.route,
                duration_days=item.duration_days,
                quantity=item.quantity,
                instructions=item.instructions,
                medication=medication,
            )
        )
    PrescriptionItem.objects.bulk_create(rows)
    events.prescription_publish(events.PRESCRIPTION_CREATED, prescription)
    return prescription


@transaction.atomic
def prescription_cancel(*, prescription: Prescription, reason: str) -> Prescription:
    """active -> cancelled with a reason (400 without one); its drugs leave the patient's current medications.
    What was already dispensed stays dispensed. 409 invalid_state unless active."""
    reason = reason.strip()
    if not reason:
        raise FieldError({"reason": "Say why the prescription is cancelled."})
    locked = locks.prescription_lock(prescription_id=prescription.pk)
    if locked.status != PrescriptionStatus.ACTIVE:
        raise InvalidState(
            f"Cannot cancel a prescription that is {locked.status}; it must be active.", current_status=locked.status
        )
    locked.status = PrescriptionStatus.CANCELLED
    locked.cancelled_at = timezone.now()
    locked.cancellation_reason = reason
    locked.save(update_fields=["status", "cancelled_at", "cancellation_reason", "updated_at"])
    # The profile shows medications ending today or later (patients.selectors): ended yesterday, it is gone.
    ended = timezone.localdate() - timedelta(days=1)
    for item in locked.items.select_related("medication").filter(medication__isnull=False):
        assert item.medication is not None
        patient_services.medication_end(medication=item.medication, end_date=ended)
    return locked


# --- Dispenses


def _dispense_problems(
    *,
    branch: Branch,
    items: Sequence[DispenseItem],
    prescription: Prescription | None,
    patient: Patient | None,
    bill: bool,
) -> dict[str, str]:
    errors: dict[str, str] = {}
    if not branch.is_active:
        errors["branch_id"] = f"The branch {branch.code} is closed."
    if prescription is not None and prescription.branch_id != branch.id:
        errors["prescription_id"] = "A prescription is dispensed at its own branch."
    if prescription is not None and patient is not None and prescription.patient_id != patient.pk:
        errors["patient_id"] = "Not the prescription's patient."
    elif patient is not None and not patient.is_active:
        errors["patient_id"] = "This patient record is inactive (merged or erroneous)."
    elif bill and patient is None and prescription is None:
        errors["patient_id"] = "Required to bill the dispense."
    if not items:
        errors["items"] = "Dispense at least one drug."
    elif len(items) > MAX_ITEMS:
        errors["items"] = f"At most {MAX_ITEMS} drugs per dispense."
    seen: set[object] = set()
    for index, item in enumerate(items):
        if item.drug.pk in seen:
            errors[f"items.{index}.drug"] = f"The drug {item.drug.code} is named twice."
        elif not item.drug.active:
            errors[f"items.{index}.drug"] = f"The drug {item.drug.code} is no longer active."
        seen.add(item.drug.pk)
        if (problem := _quantity_problem(item.quantity)) is not None:
            errors[f"items.{index}.quantity"] = problem
    return errors


@dataclass
class _Draw:
    """Units to take from one batch for one item."""

    item: DispenseItem
    batch: Batch
    quantity: int
    prescription_item: PrescriptionItem | None


def _draws(
    *,
    items: Sequence[DispenseItem],
    batches: list[Batch],
    prescribed: dict[object, PrescriptionItem] | None,
    today: date,
) -> list[_Draw]:
    """Which batches each item takes from, first expiry first unless a batch is named; raises the first
    refusal (409, or a 400 naming an unknown batch) before anything is written."""
    draws: list[_Draw] = []
    for index, item in enumerate(items):
        drug = item.drug
        source = None
        if prescribed is None:
            if drug.schedule in PRESCRIPTION_SCHEDULES:
                raise PrescriptionRequired(
                    f"{drug.code} is a Schedule {drug.schedule} drug: dispensed against a prescription only.",
                    drug=drug.code,
                )
        else:
            source = prescribed.get(drug.pk)
            if source is None:
                raise NotPrescribed(f"{drug.code} is not on the prescription.", drug=drug.code)
            if item.quantity > source.remaining:
                raise ExceedsPrescription(
                    f"The prescription allows {source.remaining} more units of {drug.code}.",
                    drug=drug.code,
                    remaining=source.remaining,
                )
        if item.batch_number is not None:
            batch = _batch_of(batches, drug, item.batch_number)
            if batch is None:
                raise FieldError({f"items.{index}.batch": f"No batch {item.batch_number!r} of {drug.code} here."})
            if batch.expiry_date <= today:
                raise BatchExpired(
                    f"The batch {batch.batch_number} of {drug.code} expired on {batch.expiry_date:%Y-%m-%d}.",
                    drug=drug.code,
                    batch=batch.batch_number,
                )
            if batch.quantity_on_hand < item.quantity:
                raise InsufficientStock(
                    f"The batch {batch.batch_number} of {drug.code} holds {batch.quantity_on_hand} units.",
                    drug=drug.code,
                    available=batch.quantity_on_hand,
                )
            draws.append(_Draw(item, batch, item.quantity, source))
            continue
        usable = [b for b in batches if b.drug_id == drug.pk and b.expiry_date > today and b.quantity_on_hand > 0]
        available = sum(b.quantity_on_hand for b in usable)
        if available < item.quantity:
            raise InsufficientStock(
                f"{available} units of {drug.code} are on hand (expired batches apart).",
                drug=drug.code,
                available=available,
            )
        wanted = item.quantity
        for batch in sorted(usable, key=selectors.fefo_key):  # the order the admin suggests
            taken = min(wanted, batch.quantity_on_hand)
            draws.append(_Draw(item, batch, taken, source))
            wanted -= taken
            if wanted == 0:
                break
    return draws


def _pharmacy_department() -> Department:
    # get_or_create inserts in a savepoint and reads again on an IntegrityError: two first dispenses at once
    # meet at department_name_unique_ci (case-insensitive, as the lookup) and share the one row.
    department, _ = Department.objects.get_or_create(
        name__iexact=PHARMACY_DEPARTMENT, defaults={"name": PHARMACY_DEPARTMENT}
    )
    return department


def _bill(*, branch: Branch, patient: Patient, lines: Sequence[DispenseLine]) -> Invoice:
    """One invoice line per drug and price (quantity, HSN, GST rate, taxable goods; the MRP is what the patient
    pays per unit, GST included: clinic.lib.tax.inclusive_price_line) on the patient's open draft at the branch
    (the latest), or a new draft; only through billing.services."""
    department = _pharmacy_department()
    grouped: dict[tuple[object, Decimal], tuple[Drug, int]] = {}
    for line in lines:
        key = (line.drug_id, line.unit_price)
        drug, quantity = grouped.get(key, (line.drug, 0))
        grouped[key] = (drug, quantity + line.quantity)
    inputs: list[billing_services.LineInput] = []
    for (_, price), (drug, quantity) in grouped.items():
        # MRP includes GST: the patient pays the MRP, of which the line's taxable value and tax are parts.
        priced = inclusive_price_line(unit_price=price, quantity=Decimal(quantity), tax_rate=drug.gst_rate)
        inputs.append(
            billing_services.LineInput(
                service_name=f"{drug.display_name} ({drug.code})"[:200],
                department=department,
                rate=priced.rate,
                discount=priced.discount,
                tax_rate=drug.gst_rate,
                quantity=Decimal(quantity),
                tax_category=TaxCategory.TAXABLE,
                hsn_sac=drug.hsn_code,
            )
        )
    return billing_services.invoice_draft_lines_add(branch=branch, patient=patient, lines=inputs)


@transaction.atomic
def dispense_record(
    *,
    branch: Branch,
    items: Sequence[DispenseItem],
    prescription: Prescription | None = None,
    patient: Patient | None = None,
    bill: bool = False,
    dispensed_by: str,
) -> Dispense:
    """Hand over drugs at the branch: from the named batch, or first expiry first out across the branch's
    non-expired batches; never an expired batch. Against a prescription (of this branch, active) each drug
    must be on it and within its remaining quantity; without one, Schedule H, H1 and X drugs are refused.
    H1 and X lines are entered in the register. With `bill`, the drugs go on the patient's draft invoice.
    Refusals: 400 naming fields; 409 prescription_required, not_prescribed, exceeds_prescription,
    batch_expired, insufficient_stock (with `available`), invalid_state (a prescription not active)."""
    if prescription is not None and patient is None:
        patient = prescription.patient
    errors = _dispense_problems(branch=branch, items=items, prescription=prescription, patient=patient, bill=bill)
    if errors:
        raise FieldError(errors)
    prescribed: dict[object, PrescriptionItem] | None = None
    if prescription is not None:
        prescription = locks.prescription_lock(prescription_id=prescription.pk)
        if prescription.status != PrescriptionStatus.ACTIVE:
            raise InvalidState(
                f"The prescription is {prescription.status}: nothing more is dispensed against it.",
                current_status=prescription.status,
            )
        prescribed = {row.drug_id: row for row in prescription.items.all()}
    batches = locks.batches_lock(
        branch_drugs=[(branch.id, item.drug.pk) for item in items],
        holding_stock=True,
        batch_numbers=[item.batch_number for item in items if item.batch_number is not None],
    )
    today = local_today(branch.zone)
    before = {item.drug.pk: _on_hand(batches, item.drug, today) for item in items}
    draws = _draws(items=items, batches=batches, prescribed=prescribed, today=today)

    number = numbering.next_dispense_number(branch_id=branch.id, year=today.year)
    dispense = Dispense.objects.create(
        branch=branch,
        patient=patient,
        prescription=prescription,
        dispense_number=numbering.format_dispense_number(branch.code, today.year, number),
        dispensed_by=dispensed_by,
    )
    lines = DispenseLine.objects.bulk_create(
        DispenseLine(
            dispense=dispense,
            position=position,
            drug=draw.item.drug,
            batch=draw.batch,
            quantity=draw.quantity,
            unit_price=draw.batch.mrp,
            prescription_item=draw.prescription_item,
        )
        for position, draw in enumerate(draws)
    )
    now = timezone.now()
    _insert_movements(
        [
            StockMovement(
                batch=draw.batch,
                kind=MovementKind.DISPENSE,
                quantity=-draw.quantity,
                actor=dispensed_by,
                at=now,
                dispense_line=line,
            )
            for draw, line in zip(draws, lines, strict=True)
        ],
        batches,
    )
    if prescription is not None:
        _prescription_dispensed(prescription, {item.drug.pk: item.quantity for item in items})
        controlled = [
            (d, line) for d, line in zip(draws, lines, strict=True) if d.item.drug.schedule in REGISTER_SCHEDULES
        ]
        ControlledDrugEntry.objects.bulk_create(
            ControlledDrugEntry(
                branch=branch,
                date=today,
                dispense=dispense,
                dispense_line=line,
                dispense_number=dispense.dispense_number,
                patient_id=prescription.patient_id,
                prescriber_id=prescription.doctor_id,
                prescription_number=prescription.prescription_number,
                drug=draw.item.drug,
                schedule=draw.item.drug.schedule,
                batch=draw.batch,
                quantity=draw.quantity,
            )
            for draw, line in controlled
        )
    if bill:
        assert patient is not None  # checked by _dispense_problems
        dispense.invoice = _bill(branch=branch, patient=patient, lines=lines)
        dispense.save(update_fields=["invoice", "updated_at"])
    # What its representation shows, as just written: the event and the response read nothing back.
    dispense.branch, dispense.patient, dispense.prescription = branch, patient, prescription
    related_known(dispense, "lines", lines)
    related_known(dispense, "returns", [])
    events.dispense_publish(events.DISPENSE_COMPLETED, dispense)
    _publish_crossings(
        branch=branch,
        changes=[(item.drug, before[item.drug.pk], _on_hand(batches, item.drug, today)) for item in items],
    )
    return dispense


def _prescription_dispensed(prescription: Prescription, change: dict[uuid.UUID, int]) -> None:
    """Add `change` (units by drug id, negative for returns) to the locked prescription's items; the
    prescription is completed once nothing remains, and active again when a return leaves some."""
    units = Case(*(When(drug_id=drug_id, then=Value(n)) for drug_id, n in change.items()), default=Value(0))
    PrescriptionItem.objects.filter(prescription=prescription, drug_id__in=list(change)).update(
        dispensed_quantity=F("dispensed_quantity") + units
    )
    if prescription.status == PrescriptionStatus.CANCELLED:
        return
    remaining = prescription.items.filter(dispensed_quantity__lt=F("quantity")).exists()
    status = PrescriptionStatus.ACTIVE if remaining else PrescriptionStatus.COMPLETED
    if status != prescription.status:
        prescription.status = status
        prescription.save(update_fields=["status", "updated_at"])


@transaction.atomic
def dispense_return(*, dispense: Dispense, items: Sequence[ReturnItem], reason: str, returned_by: str) -> Dispense:
    """Units of a dispense brought back, each into the batch its line came from (even an expired one, to be
    written off), at most what the line dispensed less what already came back (409 exceeds_dispensed). A
    prescription's dispensed quantities go down again. The invoice is left to billing (a credit note)."""
    errors: dict[str, str] = {}
    reason = reason.strip()
    if not reason:
        errors["reason"] = "Say why the drugs come back."
    if not items:
        errors["lines"] = "Return at least one line."
    seen: set[uuid.UUID] = set()
    for index, item in enumerate(items):
        if item.line_id in seen:
            errors[f"lines.{index}.line_id"] = "The line is named twice."
        seen.add(item.line_id)
        if (problem := _quantity_problem(item.quantity)) is not None:
            errors[f"lines.{index}.quantity"] = problem
    if errors:
        raise FieldError(errors)
    prescription = None
    if dispense.prescription_id is not None:
        prescription = locks.prescription_lock(prescription_id=dispense.prescription_id)
    dispense = locks.dispense_lock(dispense_id=dispense.pk)
    lines = {line.pk: line for line in dispense.lines.select_related("drug")}
    for index, item in enumerate(items):
        if item.line_id not in lines:
            errors[f"lines.{index}.line_id"] = "Not a line of this dispense."
    if errors:
        raise FieldError(errors)
    batches = locks.batches_lock(branch_drugs=[(dispense.branch_id, lines[i.line_id].drug_id) for i in items])
    for item in items:
        line = lines[item.line_id]
        returnable = line.quantity - line.returned_quantity
        if item.quantity > returnable:
            raise ExceedsDispensed(
                f"{returnable} units of this line may still come back.", line_id=str(line.pk), returnable=returnable
            )
    back = DispenseReturn.objects.create(dispense=dispense, reason=reason, returned_by=returned_by, at=timezone.now())
    parts = DispenseReturnLine.objects.bulk_create(
        DispenseReturnLine(dispense_return=back, line=lines[item.line_id], quantity=item.quantity) for item in items
    )
    by_id = {batch.pk: batch for batch in batches}
    _insert_movements(
        [
            StockMovement(
                batch=by_id[lines[part.line_id].batch_id],
                kind=MovementKind.RETURN,
                quantity=part.quantity,
                reason=reason,
                actor=returned_by,
                at=back.at,
                return_line=part,
            )
            for part in parts
        ],
        batches,
    )
    change: dict[uuid.UUID, int] = {}
    for item in items:
        line = lines[item.line_id]
        DispenseLine.objects.filter(pk=line.pk).update(returned_quantity=F("returned_quantity") + item.quantity)
        if line.prescription_item_id is not None:
            change[line.drug_id] = change.get(line.drug_id, 0) - item.quantity
    if prescription is not None and change:
        _prescription_dispensed(prescription, change)
    return dispense
