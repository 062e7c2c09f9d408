"""Pharmacy (docs/api-rules.md §14): the drug catalogue with reorder levels per branch, stock held in batches
per branch that changes only through the append-only movement ledger, prescriptions, dispenses with their
returns, and the register of Schedule H1 and X dispenses.

PostgreSQL keeps the books (migration 0001): inserting a movement applies its quantity to its batch's
quantity_on_hand (a trigger), the batch's CHECK refuses a negative on-hand (so an oversell aborts the
insert), a batch's on-hand changes in no other way, and movements are never updated nor deleted.
"""

from __future__ import annotations

import uuid

from django.db import models
from django.db.models import F, Q

from appointments.models import Appointment
from billing.models import Invoice
from clinic.lib.tax import HSN_SAC_PATTERN, STATUTORY_RATES
from clinic.models import Branch, BranchYearCounter, Doctor, TimeStampedModel
from clinic.visibility import BranchScopedQuerySet
from patients.models import Medication, Patient

# An absurd quantity in one request or line: more than any pharmacy holds of one drug.
MAX_QUANTITY = 100_000


class DrugForm(models.TextChoices):
    TABLET = "tablet"
    CAPSULE = "capsule"
    SYRUP = "syrup"
    SUSPENSION = "suspension"
    INJECTION = "injection"
    OINTMENT = "ointment"
    CREAM = "cream"
    DROPS = "drops"
    INHALER = "inhaler"
    POWDER = "powder"
    OTHER = "other"


class Schedule(models.TextChoices):
    """The Drugs and Cosmetics Rules schedule: OTC needs no prescription; H, H1 and X do, and H1 and X
    dispenses are entered in the register."""

    OTC = "OTC", "OTC (over the counter)"
    H = "H", "Schedule H"
    H1 = "H1", "Schedule H1"
    X = "X", "Schedule X"


PRESCRIPTION_SCHEDULES = (Schedule.H, Schedule.H1, Schedule.X)
REGISTER_SCHEDULES = (Schedule.H1, Schedule.X)


class Drug(TimeStampedModel):
    """A drug of the catalogue (the same at every branch), dispensed in whole `unit`s."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    code = models.CharField(max_length=30, unique=True, help_text="Stable code API clients name, e.g. PARA500.")
    generic_name = models.CharField(max_length=200)
    brand_name = models.CharField(max_length=200, blank=True)
    form = models.CharField(max_length=12, choices=DrugForm.choices)
    strength = models.CharField(max_length=60, help_text='e.g. "500 mg", "125 mg/5 ml".')
    hsn_code = models.CharField("HSN code", max_length=8, help_text="4, 6 or 8 digits, e.g. 30049099.")
    gst_rate = models.DecimalField(
        "GST rate (%)", max_digits=5, decimal_places=2, help_text="A statutory rate for goods (5 for most drugs)."
    )
    schedule = models.CharField(max_length=3, choices=Schedule.choices, default=Schedule.OTC)
    unit = models.CharField(max_length=30, help_text='The dispensing unit: "tablet", "ml", "bottle", "vial".')
    mrp = models.DecimalField(
        "default MRP",
        max_digits=12,
        decimal_places=2,
        null=True,
        blank=True,
        help_text="Per unit; batches carry their own.",
    )
    active = models.BooleanField(default=True, help_text="Inactive drugs cannot be prescribed or dispensed.")

    class Meta:
        ordering = ["code"]
        constraints = [
            models.CheckConstraint(condition=Q(code__regex=r"^[A-Z0-9][A-Z0-9-]*$"), name="drug_code_format"),
            models.CheckConstraint(condition=Q(hsn_code__regex=HSN_SAC_PATTERN), name="drug_hsn_code_digits"),
            models.CheckConstraint(condition=Q(gst_rate__in=STATUTORY_RATES), name="drug_gst_rate_statutory"),
            models.CheckConstraint(condition=Q(schedule__in=Schedule.values), name="drug_schedule_valid"),
            models.CheckConstraint(condition=Q(form__in=DrugForm.values), name="drug_form_valid"),
            models.CheckConstraint(condition=~Q(unit=""), name="drug_unit_not_empty"),
            models.CheckConstraint(condition=Q(mrp__isnull=True) | Q(mrp__gte=0), name="drug_mrp_not_negative"),
        ]

    def __str__(self) -> str:
        brand = f" ({self.brand_name})" if self.brand_name else ""
        return f"{self.code} · {self.generic_name} {self.strength}{brand}"

    @property
    def display_name(self) -> str:
        """What a medication list and an invoice line show: "Paracetamol 500 mg tablet"."""
        return f"{self.generic_name} {self.strength} {self.form}"


class ReorderLevel(models.Model):
    """Below this many units of non-expired stock at the branch, the drug is to be reordered."""

    id = models.BigAutoField(primary_key=True)
    drug = models.ForeignKey(Drug, on_delete=models.CASCADE, related_name="reorder_levels")
    branch = models.ForeignKey(Branch, on_delete=models.CASCADE, related_name="+")
    level = models.PositiveIntegerField()

    class Meta:
        ordering = ["drug", "branch"]
        constraints = [
            models.UniqueConstraint(fields=["drug", "branch"], name="reorderlevel_unique_per_drug_branch"),
            models.CheckConstraint(condition=Q(level__gte=0), name="reorderlevel_not_negative"),
        ]

    def __str__(self) -> str:
        return f"{self.drug.code} at {self.branch.code}: {self.level}"


class Batch(TimeStampedModel):
    """A batch of a drug held at a branch. Created with nothing on hand; its quantity_on_hand is the sum of
    its movements, kept by the ledger's trigger and changed in no other way."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    # No single-column indexes: batch_number_unique_per_branch leads with the drug and batch_branch_drug_expiry
    # with the branch, and every index is rewritten each time the ledger moves the on-hand.
    drug = models.ForeignKey(Drug, on_delete=models.PROTECT, related_name="batches", db_index=False)
    branch = models.ForeignKey(Branch, on_delete=models.PROTECT, related_name="drug_batches", db_index=False)
    batch_number = models.CharField(max_length=40)
    expiry_date = models.DateField()
    quantity_on_hand = models.IntegerField(default=0, editable=False)
    unit_cost = models.DecimalField(max_digits=12, decimal_places=2)
    mrp = models.DecimalField("MRP", max_digits=12, decimal_places=2, help_text="Per unit: the dispensing price.")
    received_at = models.DateTimeField()

    class Meta:
        ordering = ["drug", "branch", "expiry_date", "id"]
        verbose_name_plural = "batches"
        indexes = [
            models.Index(fields=["branch", "drug", "expiry_date"], name="batch_branch_drug_expiry"),
            # What the stock list and FEFO read: the batches still holding stock, a small part of them all.
            models.Index(
                fields=["branch", "drug", "expiry_date"], condition=Q(quantity_on_hand__gt=0), name="batch_in_stock"
            ),
        ]
        constraints = [
            models.UniqueConstraint(fields=["drug", "branch", "batch_number"], name="batch_number_unique_per_branch"),
            models.CheckConstraint(condition=Q(quantity_on_hand__gte=0), name="batch_quantity_not_negative"),
            models.CheckConstraint(condition=Q(unit_cost__gte=0), name="batch_unit_cost_not_negative"),
            models.CheckConstraint(condition=Q(mrp__gte=0), name="batch_mrp_not_negative"),
            models.CheckConstraint(condition=~Q(batch_number=""), name="batch_number_not_empty"),
        ]

    def __str__(self) -> str:
        return f"{self.batch_number} (exp. {self.expiry_date:%Y-%m-%d})"


class PrescriptionStatus(models.TextChoices):
    ACTIVE = "active"
    COMPLETED = "completed"
    CANCELLED = "cancelled"


class PrescriptionQuerySet(BranchScopedQuerySet["Prescription"]):
    pass


class Prescription(TimeStampedModel):
    """A doctor's prescription for a patient at a branch, numbered per branch and calendar year
    (`BLR-RX-2026-000001`). `completed` once every item is fully dispensed."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    # Indexed by prescription_branch_created and prescription_patient_created, which lead with them.
    branch = models.ForeignKey(Branch, on_delete=models.PROTECT, related_name="prescriptions", db_index=False)
    patient = models.ForeignKey(Patient, on_delete=models.PROTECT, related_name="prescriptions", db_index=False)
    doctor = models.ForeignKey(Doctor, on_delete=models.PROTECT, related_name="prescriptions")
    appointment = models.ForeignKey(
        Appointment, on_delete=models.PROTECT, null=True, blank=True, related_name="prescriptions"
    )
    prescription_number = models.CharField(max_length=40, editable=False)
    status = models.CharField(max_length=10, choices=PrescriptionStatus.choices, default=PrescriptionStatus.ACTIVE)
    created_by = models.CharField(max_length=200, blank=True, help_text='"api:<client>" or "staff:<user>".')
    cancelled_at = models.DateTimeField(null=True, blank=True, editable=False)
    cancellation_reason = models.CharField(max_length=500, blank=True, editable=False)

    objects = PrescriptionQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "id"]
        indexes = [
            models.Index(F("created_at").desc(), "id", name="prescription_created_order"),  # the admin list
            models.Index(fields=["branch", "-created_at"], name="prescription_branch_created"),
            models.Index(fields=["patient", "-created_at"], name="prescription_patient_created"),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["branch", "prescription_number"], name="prescription_number_unique_per_branch"
            ),
            models.CheckConstraint(condition=Q(status__in=PrescriptionStatus.values), name="prescription_status_valid"),
            models.CheckConstraint(
                condition=~Q(status=PrescriptionStatus.CANCELLED)
                | (Q(cancelled_at__isnull=False) & ~Q(cancellation_reason="")),
                name="prescription_cancelled_has_reason",
            ),
        ]

    def __str__(self) -> str:
        return self.prescription_number


class PrescriptionItemQuerySet(BranchScopedQuerySet["PrescriptionItem"]):
    branch_path = "prescription__branch_id"


class PrescriptionItem(models.Model):
    """One drug of a prescription. `dispensed_quantity` is what was dispensed against it less what came back,
    kept by the dispense and return services under the prescription's row lock; PostgreSQL refuses it above
    `quantity`, so a prescription is never overdispensed."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    prescription = models.ForeignKey(Prescription, on_delete=models.PROTECT, related_name="items")
    position = models.PositiveSmallIntegerField(default=0)
    drug = models.ForeignKey(Drug, on_delete=models.PROTECT, related_name="prescription_items")
    dose = models.CharField(max_length=50, help_text='e.g. "1 tablet".')
    frequency = models.CharField(max_length=50, help_text='e.g. "three times a day".')
    route = models.CharField(max_length=50, help_text='e.g. "oral".')
    duration_days = models.PositiveSmallIntegerField()
    quantity = models.PositiveIntegerField(help_text="Units of the drug's dispensing unit.")
    instructions = models.CharField(max_length=500, blank=True)
    dispensed_quantity = models.PositiveIntegerField(default=0, editable=False)
    medication = models.OneToOneField(
        Medication,
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        editable=False,
        related_name="prescription_item",
        help_text="The patient's current medication this item shows as (patients.services.medication_start).",
    )

    objects = PrescriptionItemQuerySet.as_manager()

    class Meta:
        ordering = ["prescription", "position", "id"]
        constraints = [
            models.UniqueConstraint(fields=["prescription", "drug"], name="prescriptionitem_drug_once"),
            models.CheckConstraint(
                condition=Q(duration_days__gte=1, duration_days__lte=365), name="prescriptionitem_duration_days_range"
            ),
            models.CheckConstraint(
                condition=Q(quantity__gt=0, quantity__lte=MAX_QUANTITY), name="prescriptionitem_quantity_range"
            ),
            models.CheckConstraint(
                condition=Q(dispensed_quantity__gte=0, dispensed_quantity__lte=F("quantity")),
                name="prescriptionitem_dispensed_within_quantity",
            ),
        ]

    def __str__(self) -> str:
        # The drug's code, never its UUID: staff read these labels (issue 37).
        return f"{self.drug.code} x {self.quantity}"

    @property
    def remaining(self) -> int:
        return self.quantity - self.dispensed_quantity


class DispenseQuerySet(BranchScopedQuerySet["Dispense"]):
    pass


class Dispense(TimeStampedModel):
    """Drugs handed over at a branch, numbered per branch and calendar year (`BLR-DSP-2026-000001`): against
    a prescription (then for its patient), or over the counter with or without a patient."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    # Indexed by dispense_branch_created and dispense_patient_created, which lead with them.
    branch = models.ForeignKey(Branch, on_delete=models.PROTECT, related_name="dispenses", db_index=False)
    patient = models.ForeignKey(
        Patient, on_delete=models.PROTECT, null=True, blank=True, related_name="dispenses", db_index=False
    )
    prescription = models.ForeignKey(
        Prescription, on_delete=models.PROTECT, null=True, blank=True, related_name="dispenses"
    )
    dispense_number = models.CharField(max_length=40, editable=False)
    invoice = models.ForeignKey(
        Invoice, on_delete=models.PROTECT, null=True, blank=True, related_name="dispenses", editable=False
    )
    dispensed_by = models.CharField(max_length=200, blank=True, help_text='"api:<client>" or "staff:<user>".')

    objects = DispenseQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "id"]
        indexes = [
            models.Index(F("created_at").desc(), "id", name="dispense_created_order"),  # the admin list
            models.Index(fields=["branch", "-created_at"], name="dispense_branch_created"),
            models.Index(fields=["patient", "-created_at"], name="dispense_patient_created"),
        ]
        constraints = [
            models.UniqueConstraint(fields=["branch", "dispense_number"], name="dispense_number_unique_per_branch"),
            models.CheckConstraint(
                condition=Q(prescription__isnull=True) | Q(patient__isnull=False),
                name="dispense_prescription_has_patient",
            ),
            models.CheckConstraint(
                condition=Q(invoice__isnull=True) | Q(patient__isnull=False), name="dispense_invoice_has_patient"
            ),
        ]

    def __str__(self) -> str:
        return self.dispense_number


class DispenseLineQuerySet(BranchScopedQuerySet["DispenseLine"]):
    branch_path = "dispense__branch_id"


class DispenseLine(models.Model):
    """Units of one batch handed over, at the batch's MRP. `returned_quantity` is kept by the return service
    under the dispense's lock; PostgreSQL refuses more back than went out."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    dispense = models.ForeignKey(Dispense, on_delete=models.PROTECT, related_name="lines")
    position = models.PositiveSmallIntegerField(default=0)
    drug = models.ForeignKey(Drug, on_delete=models.PROTECT, related_name="+")
    batch = models.ForeignKey(Batch, on_delete=models.PROTECT, related_name="dispense_lines")
    quantity = models.PositiveIntegerField()
    unit_price = models.DecimalField(max_digits=12, decimal_places=2, help_text="The batch's MRP.")
    prescription_item = models.ForeignKey(
        PrescriptionItem, on_delete=models.PROTECT, null=True, blank=True, related_name="dispense_lines"
    )
    returned_quantity = models.PositiveIntegerField(default=0, editable=False)

    objects = DispenseLineQuerySet.as_manager()

    class Meta:
        ordering = ["dispense", "position", "id"]
        constraints = [
            models.CheckConstraint(condition=Q(quantity__gt=0), name="dispenseline_quantity_positive"),
            models.CheckConstraint(condition=Q(unit_price__gte=0), name="dispenseline_unit_price_not_negative"),
            models.CheckConstraint(
                condition=Q(returned_quantity__gte=0, returned_quantity__lte=F("quantity")),
                name="dispenseline_returned_within_quantity",
            ),
        ]

    def __str__(self) -> str:
        # The drug's code, never its UUID: staff read these labels (issue 37).
        return f"{self.drug.code} x {self.quantity}"


class DispenseReturn(models.Model):
    """Units of a dispense brought back, each put back into the batch it came from."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    dispense = models.ForeignKey(Dispense, on_delete=models.PROTECT, related_name="returns")
    reason = models.CharField(max_length=500)
    returned_by = models.CharField(max_length=200, blank=True)
    at = models.DateTimeField()

    class Meta:
        ordering = ["dispense", "at", "id"]
        constraints = [models.CheckConstraint(condition=~Q(reason=""), name="dispensereturn_has_reason")]

    def __str__(self) -> str:
        return f"return of {self.dispense.dispense_number}"


class DispenseReturnLine(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    dispense_return = models.ForeignKey(DispenseReturn, on_delete=models.PROTECT, related_name="lines")
    line = models.ForeignKey(DispenseLine, on_delete=models.PROTECT, related_name="return_lines")
    quantity = models.PositiveIntegerField()

    class Meta:
        ordering = ["dispense_return", "id"]
        constraints = [models.CheckConstraint(condition=Q(quantity__gt=0), name="dispensereturnline_quantity_positive")]

    def __str__(self) -> str:
        return f"{self.line_id} x {self.quantity}"


class MovementKind(models.TextChoices):
    RECEIPT = "receipt"
    DISPENSE = "dispense"
    RETURN = "return"
    ADJUSTMENT = "adjustment"
    EXPIRY_WRITE_OFF = "expiry_write_off"
    TRANSFER_OUT = "transfer_out"
    TRANSFER_IN = "transfer_in"


INCREASING = (MovementKind.RECEIPT, MovementKind.RETURN, MovementKind.TRANSFER_IN)
DECREASING = (MovementKind.DISPENSE, MovementKind.EXPIRY_WRITE_OFF, MovementKind.TRANSFER_OUT)


class StockMovement(models.Model):
    """One line of the append-only stock ledger: a signed quantity of one batch. Inserting it changes the
    batch's on-hand (a trigger); it is never updated nor deleted. A batch's on-hand is the sum of its
    movements."""

    id = models.BigAutoField(primary_key=True)
    batch = models.ForeignKey(Batch, on_delete=models.PROTECT, related_name="movements", db_index=False)  # batch_at
    kind = models.CharField(max_length=20, choices=MovementKind.choices)
    quantity = models.IntegerField(help_text="Signed: positive into stock, negative out of it.")
    reason = models.CharField(max_length=500, blank=True)
    actor = models.CharField(max_length=200, help_text='"api:<client>" or "staff:<user>".')
    at = models.DateTimeField()
    dispense_line = models.ForeignKey(
        DispenseLine, on_delete=models.PROTECT, null=True, blank=True, related_name="movements"
    )
    return_line = models.ForeignKey(
        DispenseReturnLine, on_delete=models.PROTECT, null=True, blank=True, related_name="movements"
    )
    transfer_id = models.UUIDField(null=True, blank=True, help_text="Pairs a transfer's out and in movements.")

    class Meta:
        ordering = ["at", "id"]
        indexes = [
            models.Index(fields=["batch", "at"], name="stockmovement_batch_at"),
            models.Index(fields=["at", "id"], name="stockmovement_at_order"),  # the admin list, newest first
        ]
        constraints = [
            models.CheckConstraint(condition=Q(kind__in=MovementKind.values), name="stockmovement_kind_valid"),
            models.CheckConstraint(
                condition=Q(kind__in=INCREASING, quantity__gt=0)
                | Q(kind__in=DECREASING, quantity__lt=0)
                | (Q(kind=MovementKind.ADJUSTMENT) & ~Q(quantity=0)),
                name="stockmovement_quantity_sign_per_kind",
            ),
            models.CheckConstraint(
                condition=~Q(kind__in=(MovementKind.ADJUSTMENT, MovementKind.EXPIRY_WRITE_OFF)) | ~Q(reason=""),
                name="stockmovement_adjustment_has_reason",
            ),
            models.CheckConstraint(
                condition=~Q(kind__in=(MovementKind.TRANSFER_OUT, MovementKind.TRANSFER_IN))
                | Q(transfer_id__isnull=False),
                name="stockmovement_transfer_has_id",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.quantity:+d} of {self.batch_id}"


class ControlledDrugEntry(models.Model):
    """The register of Schedule H1 and X dispenses (Drugs and Cosmetics Rules): one row per dispense line,
    written in the dispense's transaction."""

    id = models.BigAutoField(primary_key=True)
    branch = models.ForeignKey(Branch, on_delete=models.PROTECT, related_name="+")
    date = models.DateField(help_text="The branch-local date of the dispense.")
    dispense = models.ForeignKey(Dispense, on_delete=models.PROTECT, related_name="register_entries")
    dispense_line = models.OneToOneField(DispenseLine, on_delete=models.PROTECT, related_name="register_entry")
    dispense_number = models.CharField(max_length=40)
    patient = models.ForeignKey(Patient, on_delete=models.PROTECT, related_name="+")
    prescriber = models.ForeignKey(Doctor, on_delete=models.PROTECT, related_name="+")
    prescription_number = models.CharField(max_length=40)
    drug = models.ForeignKey(Drug, on_delete=models.PROTECT, related_name="+")
    schedule = models.CharField(max_length=3, choices=Schedule.choices)
    batch = models.ForeignKey(Batch, on_delete=models.PROTECT, related_name="+")
    quantity = models.PositiveIntegerField()

    class Meta:
        ordering = ["branch", "date", "id"]
        verbose_name = "controlled drug register entry"
        verbose_name_plural = "controlled drug register"
        indexes = [
            models.Index(fields=["branch", "date"], name="controlleddrug_branch_date"),
            models.Index(fields=["date", "id"], name="controlleddrug_date_order"),  # the register, newest first
        ]
        constraints = [
            models.CheckConstraint(condition=Q(schedule__in=REGISTER_SCHEDULES), name="controlleddrug_h1_or_x"),
            models.CheckConstraint(condition=Q(quantity__gt=0), name="controlleddrug_quantity_positive"),
        ]

    def __str__(self) -> str:
        return f"{self.date} {self.dispense_number}"


class ExpiryWarning(models.Model):
    """That `stock.expiring` was published for a drug at a branch on a day (branch-local): the daily task
    publishes once per drug, branch and day however often it runs."""

    id = models.BigAutoField(primary_key=True)
    drug = models.ForeignKey(Drug, on_delete=models.CASCADE, related_name="+")
    branch = models.ForeignKey(Branch, on_delete=models.CASCADE, related_name="+")
    day = models.DateField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["drug", "branch", "day"], name="expirywarning_once_per_day"),
        ]

    def __str__(self) -> str:
        return f"{self.drug_id} at {self.branch_id} on {self.day}"


class PrescriptionCounter(BranchYearCounter):
    class Meta:
        constraints = [models.UniqueConstraint(fields=["branch", "year"], name="prescription_counter_per_branch_year")]


class DispenseCounter(BranchYearCounter):
    class Meta:
        constraints = [models.UniqueConstraint(fields=["branch", "year"], name="dispense_counter_per_branch_year")]
