"""Billing: the service catalogue, GST invoices with their line items, payments, and the per-branch per-year
invoice number counters. Money is Decimal with two places; the invariants live in PostgreSQL."""

from __future__ import annotations

import uuid
from decimal import Decimal

from django.db import models
from django.db.models import F, Q

from clinic.models import Branch, Department, TimeStampedModel
from patients.models import Patient

ZERO = Decimal("0.00")
# The statuses of an invoice that was issued and stands: what the financial summary counts as billed.
BILLED_STATUSES = ("finalized", "partially_paid", "paid")


def _tax_rate_in_range(field: str) -> Q:
    return Q(**{f"{field}__gte": 0, f"{field}__lte": 100})


class BillableService(TimeStampedModel):
    """An entry of the service catalogue: a consultation, test or procedure with its rate and GST rate.
    Invoice lines copy name, rate and tax rate, so later catalogue changes never alter an invoice."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    code = models.CharField(max_length=30, unique=True, help_text="Stable code used by API clients, e.g. CONS-GEN.")
    name = models.CharField(max_length=200)
    department = models.ForeignKey(Department, on_delete=models.PROTECT, related_name="billable_services")
    rate = models.DecimalField(max_digits=12, decimal_places=2, help_text="Price per unit before tax, in rupees.")
    tax_rate = models.DecimalField(
        max_digits=5, decimal_places=2, default=ZERO, help_text="GST rate in percent (0, 5, 12, 18...)."
    )
    active = models.BooleanField(default=True, help_text="Inactive services cannot be added to new invoices.")

    class Meta:
        ordering = ["code"]
        verbose_name = "catalogue service"
        constraints = [
            models.CheckConstraint(condition=Q(rate__gte=0), name="billableservice_rate_not_negative"),
            models.CheckConstraint(condition=_tax_rate_in_range("tax_rate"), name="billableservice_tax_rate_range"),
            models.CheckConstraint(condition=~Q(code=""), name="billableservice_code_not_empty"),
        ]

    def __str__(self) -> str:
        return f"{self.code} · {self.name}"


class Invoice(TimeStampedModel):
    """A GST invoice of one patient at one branch. Drafts are editable and unnumbered; finalizing assigns
    the number. The stored totals are the exact sums of the line items, kept by billing.services."""

    class Status(models.TextChoices):
        DRAFT = "draft"
        FINALIZED = "finalized"
        PARTIALLY_PAID = "partially_paid"
        PAID = "paid"
        CANCELLED = "cancelled"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    branch = models.ForeignKey(Branch, on_delete=models.PROTECT, related_name="invoices")
    patient = models.ForeignKey(Patient, on_delete=models.PROTECT, related_name="invoices")
    date = models.DateField(help_text="Invoice date (branch-local); its financial year decides the number series.")
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.DRAFT)
    # NULL, not "": drafts have no number, and the per-branch unique constraint must let many drafts be.
    invoice_number = models.CharField(max_length=40, null=True, blank=True, editable=False)  # noqa: DJ001
    financial_year = models.CharField(  # noqa: DJ001
        max_length=7, null=True, blank=True, editable=False, help_text="e.g. 2026-27"
    )
    # Fixed when the invoice is created: the patient's state against the branch's (CONTRACT section 8).
    place_of_supply = models.CharField(max_length=100, editable=False)
    interstate = models.BooleanField(default=False, editable=False, help_text="IGST instead of CGST + SGST.")
    sub_total = models.DecimalField(max_digits=14, decimal_places=2, default=ZERO, editable=False)
    discount = models.DecimalField(max_digits=14, decimal_places=2, default=ZERO, editable=False)
    taxable = models.DecimalField(max_digits=14, decimal_places=2, default=ZERO, editable=False)
    cgst = models.DecimalField(max_digits=14, decimal_places=2, default=ZERO, editable=False)
    sgst = models.DecimalField(max_digits=14, decimal_places=2, default=ZERO, editable=False)
    igst = models.DecimalField(max_digits=14, decimal_places=2, default=ZERO, editable=False)
    tax = models.DecimalField(max_digits=14, decimal_places=2, default=ZERO, editable=False)
    grand_total = models.DecimalField(max_digits=14, decimal_places=2, default=ZERO, editable=False)
    paid = models.DecimalField(max_digits=14, decimal_places=2, default=ZERO, editable=False)
    finalized_at = models.DateTimeField(null=True, blank=True, editable=False)
    cancelled_at = models.DateTimeField(null=True, blank=True, editable=False)
    cancellation_reason = models.CharField(max_length=500, blank=True, editable=False)

    class Meta:
        ordering = ["-date", "-created_at", "id"]
        indexes = [
            models.Index(fields=["branch", "-date", "-created_at"], name="invoice_branch_date"),
            models.Index(fields=["patient", "-date"], name="invoice_patient_date"),
            models.Index(fields=["-date", "-created_at"], name="invoice_date"),
            # The financial summary reads billed invoices of a date range without visiting the table.
            models.Index(
                fields=["date", "branch"],
                name="invoice_billed_date",
                include=["grand_total", "paid"],
                condition=Q(status__in=BILLED_STATUSES),
            ),
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(status__in=["draft", "finalized", "partially_paid", "paid", "cancelled"]),
                name="invoice_status_valid",
            ),
            models.UniqueConstraint(fields=["branch", "invoice_number"], name="invoice_number_unique_per_branch"),
            # Drafts have no number; every finalized, partly or fully paid invoice has one (with its year).
            # A cancelled invoice keeps the number it had (cancelled finalized) or none (cancelled draft).
            models.CheckConstraint(
                condition=(Q(status="draft", invoice_number__isnull=True) | ~Q(status="draft"))
                & (Q(invoice_number__isnull=False) | ~Q(status__in=["finalized", "partially_paid", "paid"])),
                name="invoice_number_iff_not_draft",
            ),
            models.CheckConstraint(
                condition=Q(invoice_number__isnull=True, financial_year__isnull=True)
                | Q(invoice_number__isnull=False, financial_year__isnull=False),
                name="invoice_number_has_year",
            ),
            models.CheckConstraint(
                condition=Q(
                    sub_total__gte=0,
                    discount__gte=0,
                    taxable__gte=0,
                    cgst__gte=0,
                    sgst__gte=0,
                    igst__gte=0,
                    tax__gte=0,
                    grand_total__gte=0,
                    paid__gte=0,
                ),
                name="invoice_amounts_not_negative",
            ),
            models.CheckConstraint(
                condition=Q(taxable=F("sub_total") - F("discount"))
                & Q(tax=F("cgst") + F("sgst") + F("igst"))
                & Q(grand_total=F("taxable") + F("tax")),
                name="invoice_totals_add_up",
            ),
            models.CheckConstraint(condition=Q(paid__lte=F("grand_total")), name="invoice_paid_at_most_total"),
            models.CheckConstraint(
                condition=Q(interstate=True, cgst=0, sgst=0) | Q(interstate=False, igst=0),
                name="invoice_igst_xor_cgst_sgst",
            ),
            # Money moves only on finalized invoices, and the status says how much.
            models.CheckConstraint(
                condition=Q(status__in=["draft", "finalized", "cancelled"], paid=0)
                | Q(status="partially_paid", paid__gt=0, paid__lt=F("grand_total"))
                | Q(status="paid", paid=F("grand_total")),
                name="invoice_status_matches_paid",
            ),
            models.CheckConstraint(
                condition=~Q(status="cancelled") | (Q(cancelled_at__isnull=False) & ~Q(cancellation_reason="")),
                name="invoice_cancelled_has_reason",
            ),
        ]

    def __str__(self) -> str:
        return self.invoice_number or f"Draft {str(self.id)[:8]}"

    @property
    def balance(self) -> Decimal:
        return self.grand_total - self.paid

    @property
    def is_editable(self) -> bool:
        return self.status == self.Status.DRAFT


class LineItem(models.Model):
    """One billed service. Name, rate and tax rate are copied (from the catalogue entry when there is one);
    the computed figures follow billing.tax and are written by the services only."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    invoice = models.ForeignKey(Invoice, on_delete=models.PROTECT, related_name="line_items")
    position = models.PositiveSmallIntegerField(default=0, help_text="Order of the line on the invoice.")
    service = models.ForeignKey(
        BillableService, on_delete=models.PROTECT, null=True, blank=True, related_name="line_items"
    )
    service_name = models.CharField(max_length=200)
    department = models.ForeignKey(Department, on_delete=models.PROTECT, related_name="invoice_line_items")
    quantity = models.DecimalField(max_digits=10, decimal_places=3, default=Decimal(1))
    rate = models.DecimalField(max_digits=12, decimal_places=2)
    discount = models.DecimalField(max_digits=12, decimal_places=2, default=ZERO)
    tax_rate = models.DecimalField(max_digits=5, decimal_places=2, default=ZERO)
    taxable_amount = models.DecimalField(max_digits=14, decimal_places=2, default=ZERO, editable=False)
    cgst = models.DecimalField(max_digits=14, decimal_places=2, default=ZERO, editable=False)
    sgst = models.DecimalField(max_digits=14, decimal_places=2, default=ZERO, editable=False)
    igst = models.DecimalField(max_digits=14, decimal_places=2, default=ZERO, editable=False)
    amount = models.DecimalField(max_digits=14, decimal_places=2, default=ZERO, editable=False)
    # Copies of the invoice's branch, date and "billed" (finalized, partially paid or paid), so the summary's
    # revenue by department is one index-only scan of the lines, without a join to every invoice. Kept by
    # triggers (migration 0004) whatever writes the rows; the services set them too, for the objects in hand.
    branch = models.ForeignKey(Branch, on_delete=models.PROTECT, related_name="+", editable=False, db_index=False)
    invoice_date = models.DateField(editable=False)
    billed = models.BooleanField(default=False, editable=False)

    class Meta:
        ordering = ["invoice", "position", "id"]
        indexes = [
            # Revenue by department of some branches, and of all branches.
            models.Index(
                fields=["branch", "invoice_date"],
                name="lineitem_billed_branch_date",
                include=["department", "taxable_amount"],
                condition=Q(billed=True),
            ),
            models.Index(
                fields=["invoice_date"],
                name="lineitem_billed_date",
                include=["department", "taxable_amount"],
                condition=Q(billed=True),
            ),
        ]
        constraints = [
            models.CheckConstraint(condition=Q(quantity__gt=0), name="lineitem_quantity_positive"),
            models.CheckConstraint(
                condition=Q(rate__gte=0, discount__gte=0, taxable_amount__gte=0, cgst__gte=0, sgst__gte=0, igst__gte=0),
                name="lineitem_amounts_not_negative",
            ),
            models.CheckConstraint(condition=_tax_rate_in_range("tax_rate"), name="lineitem_tax_rate_range"),
            models.CheckConstraint(
                condition=Q(amount=F("taxable_amount") + F("cgst") + F("sgst") + F("igst")),
                name="lineitem_amount_adds_up",
            ),
            models.CheckConstraint(condition=Q(igst=0) | Q(cgst=0, sgst=0), name="lineitem_igst_xor_cgst_sgst"),
            models.CheckConstraint(condition=~Q(service_name=""), name="lineitem_service_name_not_empty"),
        ]

    def __str__(self) -> str:
        return f"{self.service_name} x {self.quantity}"


class Payment(models.Model):
    """Money received against a finalized invoice. Never updated or deleted: a trigger refuses both."""

    class Mode(models.TextChoices):
        CASH = "cash"
        CARD = "card"
        UPI = "upi", "UPI"
        NEFT = "neft", "NEFT"
        CHEQUE = "cheque"
        ONLINE = "online"
        INSURANCE = "insurance"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    invoice = models.ForeignKey(Invoice, on_delete=models.PROTECT, related_name="payments")
    amount = models.DecimalField(max_digits=12, decimal_places=2)
    payment_mode = models.CharField(max_length=20, choices=Mode.choices)
    reference = models.CharField(
        max_length=100, blank=True, help_text="External transaction reference; required for every mode but cash."
    )
    payment_date = models.DateField(help_text="The branch-local day the money was received.")
    recorded_at = models.DateTimeField(auto_now_add=True)
    recorded_by = models.CharField(max_length=200, blank=True, help_text='"api:<client>", "staff:<user>" or "system".')
    # The invoice's branch, set on insert by a trigger (migration 0004): collections by branch without a join.
    branch = models.ForeignKey(Branch, on_delete=models.PROTECT, related_name="+", editable=False, db_index=False)

    class Meta:
        ordering = ["recorded_at", "id"]
        indexes = [
            # Collections of some branches, and of all branches.
            models.Index(
                fields=["branch", "payment_date"], name="payment_branch_date", include=["amount", "payment_mode"]
            ),
            models.Index(fields=["payment_date"], name="payment_date", include=["amount", "payment_mode"]),
        ]
        constraints = [
            models.CheckConstraint(condition=Q(amount__gt=0), name="payment_amount_positive"),
            models.CheckConstraint(
                condition=Q(payment_mode__in=["cash", "card", "upi", "neft", "cheque", "online", "insurance"]),
                name="payment_mode_valid",
            ),
            models.CheckConstraint(
                condition=Q(payment_mode="cash") | ~Q(reference=""), name="payment_reference_unless_cash"
            ),
            models.UniqueConstraint(
                fields=["invoice", "payment_mode", "reference"],
                condition=~Q(payment_mode="cash"),
                name="payment_unique_reference_per_invoice",
                violation_error_message="This invoice already has a payment with this mode and reference.",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.amount} {self.payment_mode} {self.reference}".strip()


# The financial summary's rollups (migration 0004): invoices, lines and payments summed per branch and day,
# and again per branch and calendar month, so a summary reads one row per whole month in its range and day
# rows only for the (at most two) partial months at its ends: tens of rows per branch, department and mode,
# however many invoices they hold. PostgreSQL keeps them, by statement-level triggers with transition
# tables, in the transaction of every change to the rows they sum; nothing in Django writes them. A query
# therefore sees in its snapshot exactly what aggregating the rows would.
#
# Contention: a change adds to its rows with INSERT ... ON CONFLICT DO UPDATE, which locks them until
# commit. So the payments of one branch queue one behind the other: on the month row of their invoices'
# dates, and on the day and month rows of their own date and mode. Each waits only for the end of the one
# before it (the invoice's UPDATE and the COMMIT, 3 ms at p50 on a loaded 2-core box; longer with an
# Idempotency-Key, whose record is written in the same transaction): some hundreds of payments per second
# and branch, against a clinic's few per minute at its busiest counters. Other branches never wait.
# Finalizations and cancellations take their invoice's rows too, but the finalizations of a branch
# already queue on its invoice number counter. Should a branch ever need more, the way out is insert-only
# delta rows folded in by a periodic task, at the price of that task.


class RollupPeriod(models.TextChoices):
    DAY = "day"
    MONTH = "month"


class RollupRow(models.Model):
    """What the three rollups share: the branch and the period (a day, or a calendar month starting on
    period_start). No CHECK constraints: PostgreSQL checks the row an upsert proposes, here a delta (a
    cancellation's is negative), before it finds the row to add it to."""

    branch = models.ForeignKey(Branch, on_delete=models.PROTECT, related_name="+", db_index=False)
    period = models.CharField(max_length=5, choices=RollupPeriod.choices)
    period_start = models.DateField(help_text="The day, or the first day of the month.")

    class Meta:
        abstract = True


class InvoiceRollup(RollupRow):
    """Billed (finalized, partially paid or paid) invoices dated in the period: the sums of their grand
    totals and of what has been paid on them so far."""

    pk = models.CompositePrimaryKey("branch_id", "period", "period_start")
    billed = models.DecimalField(max_digits=18, decimal_places=2, default=ZERO)
    paid = models.DecimalField(max_digits=18, decimal_places=2, default=ZERO)

    class Meta:
        indexes = [models.Index(fields=["period", "period_start"], name="invoicerollup_period")]

    def __str__(self) -> str:
        return f"{self.branch_id} {self.period} {self.period_start}: {self.billed} billed, {self.paid} paid"


class LineRollup(RollupRow):
    """Lines of one department on billed invoices dated in the period: how many, and the sum of their taxable
    amounts. The count says whether the department appears in a summary (a line may be worth 0.00)."""

    pk = models.CompositePrimaryKey("branch_id", "period", "period_start", "department_id")
    department = models.ForeignKey(Department, on_delete=models.PROTECT, related_name="+", db_index=False)
    lines = models.IntegerField(default=0)
    taxable = models.DecimalField(max_digits=18, decimal_places=2, default=ZERO)

    class Meta:
        indexes = [models.Index(fields=["period", "period_start"], name="linerollup_period")]

    def __str__(self) -> str:
        return f"{self.branch_id} {self.period} {self.period_start} {self.department_id}: {self.taxable}"


class PaymentRollup(RollupRow):
    """Payments in one mode dated in the period, summed."""

    pk = models.CompositePrimaryKey("branch_id", "period", "period_start", "payment_mode")
    payment_mode = models.CharField(max_length=20, choices=Payment.Mode.choices)
    amount = models.DecimalField(max_digits=18, decimal_places=2, default=ZERO)

    class Meta:
        indexes = [models.Index(fields=["period", "period_start"], name="paymentrollup_period")]

    def __str__(self) -> str:
        return f"{self.branch_id} {self.period} {self.period_start} {self.payment_mode}: {self.amount}"


class InvoiceNumberCounter(models.Model):
    """The last invoice number issued by a branch in a financial year (billing.numbering)."""

    id = models.BigAutoField(primary_key=True)
    branch = models.ForeignKey(Branch, on_delete=models.CASCADE, related_name="+")
    financial_year = models.CharField(max_length=7, help_text="e.g. 2026-27")
    last_number = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["branch", "financial_year"], name="invoice_counter_per_branch_year")
        ]

    def __str__(self) -> str:
        return f"{self.branch_id} {self.financial_year}: {self.last_number}"
