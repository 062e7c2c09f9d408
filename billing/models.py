"""Billing: the service catalogue, GST invoices with their line items, payments, and the per-branch per-year
invoice number counters. Money is Decimal with two places; the invariants live in PostgreSQL."""

from __future__ import annotations

import uuid
from decimal import Decimal

from django.db import models
from django.db.models import F, Q

from clinic.lib.tax import HSN_SAC_PATTERN, UNTAXED_CATEGORIES, TaxCategory
from clinic.models import Branch, Department, TimeStampedModel
from clinic.visibility import BranchScopedQuerySet
from patients.models import Patient

ZERO = Decimal("0.00")
# The statuses of an invoice that was issued and stands: what the financial summary counts as billed.
BILLED_STATUSES = ("finalized", "partially_paid", "paid")


def _tax_rate_in_range(field: str) -> Q:
    return Q(**{f"{field}__gte": 0, f"{field}__lte": 100})


def _hsn_sac_field(help_text: str) -> models.CharField:
    return models.CharField("HSN/SAC", max_length=8, blank=True, db_default="", default="", help_text=help_text)


def _tax_category_field() -> models.CharField:
    # The database default too: rows written by SQL (generate_scale_data's COPY) need not name it.
    return models.CharField(
        max_length=10, choices=TaxCategory.choices, default=TaxCategory.EXEMPT, db_default=TaxCategory.EXEMPT
    )


def _tax_detail_constraints(prefix: str) -> list[models.BaseConstraint]:
    """Untaxed categories carry rate 0, taxable ones a positive rate; HSN/SAC is 4, 6 or 8 digits or blank.
    (Which positive rates are statutory is checked when a row is written: old lines keep the rate they had.)"""
    return [
        models.CheckConstraint(
            condition=Q(tax_category=TaxCategory.TAXABLE, tax_rate__gt=0)
            | Q(tax_category__in=UNTAXED_CATEGORIES, tax_rate=0),
            name=f"{prefix}_tax_category_matches_rate",
        ),
        models.CheckConstraint(
            condition=Q(hsn_sac="") | Q(hsn_sac__regex=HSN_SAC_PATTERN), name=f"{prefix}_hsn_sac_digits"
        ),
    ]


class BillableService(TimeStampedModel):
    """An entry of the service catalogue: a consultation, test or procedure with its rate and GST rate.
    Invoice lines copy name, rate and tax rate, so later catalogue changes never alter an invoice."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    code = models.CharField(max_length=30, unique=True, help_text="Stable code used by API clients, e.g. CONS-GEN.")
    name = models.CharField(max_length=200)
    department = models.ForeignKey(Department, on_delete=models.PROTECT, related_name="billable_services")
    rate = models.DecimalField(max_digits=12, decimal_places=2, help_text="Price per unit before tax, in rupees.")
    tax_rate = models.DecimalField(
        max_digits=5, decimal_places=2, default=ZERO, help_text="GST rate in percent: 0 unless taxable (5, 12, 18...)."
    )
    tax_category = _tax_category_field()
    hsn_sac = _hsn_sac_field("SAC for a service (9993xx for healthcare), HSN for goods; 4, 6 or 8 digits.")
    active = models.BooleanField(default=True, help_text="Inactive services cannot be added to new invoices.")

    class Meta:
        ordering = ["code"]
        verbose_name = "catalogue service"
        constraints = [
            models.CheckConstraint(condition=Q(rate__gte=0), name="billableservice_rate_not_negative"),
            models.CheckConstraint(condition=_tax_rate_in_range("tax_rate"), name="billableservice_tax_rate_range"),
            models.CheckConstraint(condition=~Q(code=""), name="billableservice_code_not_empty"),
            *_tax_detail_constraints("billableservice"),
        ]

    def __str__(self) -> str:
        return f"{self.code} · {self.name}"


class InvoiceQuerySet(BranchScopedQuerySet["Invoice"]):
    pass


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
    # Fixed when the invoice is created: the patient's state against the branch's (docs/api-rules.md §11).
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
    paid = models.DecimalField(
        max_digits=14, decimal_places=2, default=ZERO, editable=False, help_text="Sum of the payments (gross)."
    )
    credited = models.DecimalField(
        max_digits=14,
        decimal_places=2,
        default=ZERO,
        db_default=ZERO,
        editable=False,
        help_text="Sum of the credit notes' totals.",
    )
    refunded = models.DecimalField(
        max_digits=14, decimal_places=2, default=ZERO, db_default=ZERO, editable=False, help_text="Sum of the refunds."
    )
    finalized_at = models.DateTimeField(null=True, blank=True, editable=False)
    cancelled_at = models.DateTimeField(null=True, blank=True, editable=False)
    cancellation_reason = models.CharField(max_length=500, blank=True, editable=False)

    objects = InvoiceQuerySet.as_manager()

    class Meta:
        ordering = ["-date", "-created_at", "id"]
        indexes = [
            models.Index(fields=["branch", "-date", "-created_at"], name="invoice_branch_date"),
            # The admin list filtered by status at a branch (an accountant's "finalized", awaiting payment): its
            # capped count and its first page, newest first, from the index (docs/staff.md §10).
            models.Index(fields=["branch", "status", "-date", "-created_at"], name="invoice_branch_status_date"),
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
                    credited__gte=0,
                    refunded__gte=0,
                ),
                name="invoice_amounts_not_negative",
            ),
            models.CheckConstraint(
                condition=Q(taxable=F("sub_total") - F("discount"))
                & Q(tax=F("cgst") + F("sgst") + F("igst"))
                & Q(grand_total=F("taxable") + F("tax")),
                name="invoice_totals_add_up",
            ),
            # Credit notes never exceed the invoice, refunds never what was paid, and what stays paid never
            # the total (a payment is at most the balance).
            models.CheckConstraint(
                condition=Q(credited__lte=F("grand_total"), refunded__lte=F("paid"))
                & Q(paid__lte=F("grand_total") + F("refunded")),
                name="invoice_credited_refunded_bounded",
            ),
            models.CheckConstraint(
                condition=Q(interstate=True, cgst=0, sgst=0) | Q(interstate=False, igst=0),
                name="invoice_igst_xor_cgst_sgst",
            ),
            # Money moves only on issued invoices, and the status says how much is settled: with net paid =
            # paid - refunded and net total = grand_total - credited, finalized has nothing net paid,
            # partially_paid some but less than the net total, paid (settled) at least the net total.
            models.CheckConstraint(
                condition=Q(status__in=["draft", "cancelled"], paid=0, refunded=0, credited=0)
                | Q(status="finalized", paid=F("refunded"))
                | Q(
                    status="partially_paid",
                    paid__gt=F("refunded"),
                    paid__lt=F("grand_total") - F("credited") + F("refunded"),
                )
                | Q(status="paid", paid__gte=F("grand_total") - F("credited") + F("refunded")),
                name="invoice_status_matches_settlement",
            ),
            models.CheckConstraint(
                condition=~Q(status="cancelled") | (Q(cancelled_at__isnull=False) & ~Q(cancellation_reason="")),
                name="invoice_cancelled_has_reason",
            ),
        ]

    def __str__(self) -> str:
        return self.invoice_number or f"Draft {str(self.id)[:8]}"

    @property
    def net_total(self) -> Decimal:
        """The grand total less the credit notes."""
        return self.grand_total - self.credited

    @property
    def net_paid(self) -> Decimal:
        """What the patient has paid and not had back."""
        return self.paid - self.refunded

    @property
    def balance(self) -> Decimal:
        """Left to collect: never negative (docs/api-rules.md §12)."""
        return max(ZERO, self.net_total - self.net_paid)

    @property
    def refund_due(self) -> Decimal:
        """Owed back to the patient (paid, then credited, not yet refunded): never negative."""
        return max(ZERO, self.net_paid - self.net_total)

    @property
    def is_editable(self) -> bool:
        return self.status == self.Status.DRAFT


class LineItem(models.Model):
    """One billed service. Name, rate and tax rate are copied (from the catalogue entry when there is one);
    the computed figures follow clinic.lib.tax and are written by the services only."""

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
    tax_category = _tax_category_field()
    hsn_sac = _hsn_sac_field("Copied from the catalogue entry, or as sent; blank when neither names one.")
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
            *_tax_detail_constraints("lineitem"),
        ]

    def __str__(self) -> str:
        return f"{self.service_name} x {self.quantity}"


class PaymentQuerySet(BranchScopedQuerySet["Payment"]):
    pass


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

    objects = PaymentQuerySet.as_manager()

    class Meta:
        ordering = ["recorded_at", "id"]
        indexes = [
            models.Index(fields=["recorded_at", "id"], name="payment_recorded_order"),  # the admin list, newest first
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


def _money_column(help_text: str = "") -> models.DecimalField:
    return models.DecimalField(max_digits=14, decimal_places=2, default=ZERO, editable=False, help_text=help_text)


class CreditNoteQuerySet(BranchScopedQuerySet["CreditNote"]):
    pass


class CreditNote(models.Model):
    """A GST credit note against an issued invoice (docs/api-rules.md §12): it reduces what the invoice asks,
    line by line, with the tax each line carried; the invoice's own lines never change. Numbered per branch
    per financial year of its date in its own gap-free series (BLR/CN/2026-27/00001). Never updated or
    deleted (a trigger refuses both, as for payments)."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    invoice = models.ForeignKey(Invoice, on_delete=models.PROTECT, related_name="credit_notes")
    branch = models.ForeignKey(Branch, on_delete=models.PROTECT, related_name="+", editable=False, db_index=False)
    credit_note_number = models.CharField(max_length=40, editable=False)
    financial_year = models.CharField(max_length=7, editable=False, help_text="e.g. 2026-27")
    date = models.DateField(help_text="Branch-local day of issue; its financial year decides the number series.")
    reason = models.CharField(max_length=500)
    taxable = _money_column()
    cgst = _money_column()
    sgst = _money_column()
    igst = _money_column()
    tax = _money_column()
    total = _money_column("taxable + tax: what the invoice's net total goes down by.")
    created_at = models.DateTimeField(auto_now_add=True)
    created_by = models.CharField(max_length=200, blank=True, help_text='"api:<client>", "staff:<user>" or "system".')

    objects = CreditNoteQuerySet.as_manager()

    class Meta:
        ordering = ["created_at", "id"]
        indexes = [
            models.Index(fields=["created_at", "id"], name="creditnote_created_order"),  # the admin list, newest first
            models.Index(fields=["invoice", "created_at"], name="creditnote_invoice"),
            models.Index(fields=["branch", "date"], name="creditnote_branch_date", include=["total"]),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["branch", "credit_note_number"], name="creditnote_number_unique_per_branch"
            ),
            models.CheckConstraint(
                condition=Q(taxable__gte=0, cgst__gte=0, sgst__gte=0, igst__gte=0, total__gt=0),
                name="creditnote_amounts_positive",
            ),
            models.CheckConstraint(
                condition=Q(tax=F("cgst") + F("sgst") + F("igst")) & Q(total=F("taxable") + F("tax")),
                name="creditnote_totals_add_up",
            ),
            models.CheckConstraint(condition=~Q(reason=""), name="creditnote_reason_not_empty"),
        ]

    def __str__(self) -> str:
        return self.credit_note_number


class CreditNoteLine(models.Model):
    """What a credit note takes off one invoice line: a quantity of it, or an amount of its taxable value,
    with the tax reversed at the line's rate. Name, HSN/SAC, category and rate are copied for the document."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    credit_note = models.ForeignKey(CreditNote, on_delete=models.PROTECT, related_name="lines")
    line = models.ForeignKey(LineItem, on_delete=models.PROTECT, related_name="credit_lines")
    position = models.PositiveSmallIntegerField(default=0)
    service_name = models.CharField(max_length=200)
    hsn_sac = _hsn_sac_field("As on the invoice line.")
    tax_category = _tax_category_field()
    tax_rate = models.DecimalField(max_digits=5, decimal_places=2, default=ZERO)
    quantity = models.DecimalField(
        max_digits=10, decimal_places=3, null=True, blank=True, help_text="Units credited; null for an amount credit."
    )
    taxable_amount = _money_column()
    cgst = _money_column()
    sgst = _money_column()
    igst = _money_column()
    amount = _money_column("taxable_amount + cgst + sgst + igst")

    class Meta:
        ordering = ["credit_note", "position", "id"]
        constraints = [
            models.CheckConstraint(condition=Q(quantity__isnull=True) | Q(quantity__gt=0), name="creditline_quantity"),
            models.CheckConstraint(
                condition=Q(taxable_amount__gte=0, cgst__gte=0, sgst__gte=0, igst__gte=0, amount__gt=0),
                name="creditline_amounts_positive",
            ),
            models.CheckConstraint(
                condition=Q(amount=F("taxable_amount") + F("cgst") + F("sgst") + F("igst")),
                name="creditline_amount_adds_up",
            ),
            *_tax_detail_constraints("creditline"),
        ]

    def __str__(self) -> str:
        return f"{self.service_name}: {self.amount}"


class RefundQuerySet(BranchScopedQuerySet["Refund"]):
    pass


class Refund(models.Model):
    """Money paid back to the patient on an invoice: at most what was paid and not yet refunded. Never
    updated or deleted (a trigger refuses both, as for payments)."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    invoice = models.ForeignKey(Invoice, on_delete=models.PROTECT, related_name="refunds")
    branch = models.ForeignKey(Branch, on_delete=models.PROTECT, related_name="+", editable=False, db_index=False)
    amount = models.DecimalField(max_digits=12, decimal_places=2)
    payment_mode = models.CharField(max_length=20, choices=Payment.Mode.choices, help_text="How the money went back.")
    reference = models.CharField(max_length=100, blank=True, help_text="Required for every mode but cash.")
    refund_date = models.DateField(help_text="The branch-local day the money was paid back.")
    recorded_at = models.DateTimeField(auto_now_add=True)
    recorded_by = models.CharField(max_length=200, blank=True, help_text='"api:<client>", "staff:<user>" or "system".')

    objects = RefundQuerySet.as_manager()

    class Meta:
        ordering = ["recorded_at", "id"]
        indexes = [
            models.Index(fields=["recorded_at", "id"], name="refund_recorded_order"),  # the admin list, newest first
            models.Index(fields=["invoice", "recorded_at"], name="refund_invoice"),
            models.Index(fields=["branch", "refund_date"], name="refund_branch_date", include=["amount"]),
        ]
        constraints = [
            models.CheckConstraint(condition=Q(amount__gt=0), name="refund_amount_positive"),
            models.CheckConstraint(
                condition=Q(payment_mode__in=["cash", "card", "upi", "neft", "cheque", "online", "insurance"]),
                name="refund_mode_valid",
            ),
            models.CheckConstraint(
                condition=Q(payment_mode="cash") | ~Q(reference=""), name="refund_reference_unless_cash"
            ),
            models.UniqueConstraint(
                fields=["invoice", "payment_mode", "reference"],
                condition=~Q(payment_mode="cash"),
                name="refund_unique_reference_per_invoice",
            ),
        ]

    def __str__(self) -> str:
        return f"Refund {self.amount} {self.payment_mode} {self.reference}".strip()


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
# before it (the invoice's UPDATE and the COMMIT; longer with an Idempotency-Key, whose record is written in
# the same transaction): some hundreds of payments per second and branch (bench/results/), against a clinic's few per minute at its busiest counters. Other branches never wait.
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
    totals and of their balances as they stand (each never negative, so it is summed as such)."""

    pk = models.CompositePrimaryKey("branch_id", "period", "period_start")
    billed = models.DecimalField(max_digits=18, decimal_places=2, default=ZERO)
    outstanding = models.DecimalField(max_digits=18, decimal_places=2, default=ZERO)

    class Meta:
        indexes = [models.Index(fields=["period", "period_start"], name="invoicerollup_period")]

    def __str__(self) -> str:
        return f"{self.branch_id} {self.period} {self.period_start}: {self.billed} billed, {self.outstanding} due"


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


class CreditRollup(RollupRow):
    """Credit notes dated in the period, summed (their totals)."""

    pk = models.CompositePrimaryKey("branch_id", "period", "period_start")
    amount = models.DecimalField(max_digits=18, decimal_places=2, default=ZERO)

    class Meta:
        indexes = [models.Index(fields=["period", "period_start"], name="creditrollup_period")]

    def __str__(self) -> str:
        return f"{self.branch_id} {self.period} {self.period_start}: {self.amount} credited"


class RefundRollup(RollupRow):
    """Refunds dated in the period, summed."""

    pk = models.CompositePrimaryKey("branch_id", "period", "period_start")
    amount = models.DecimalField(max_digits=18, decimal_places=2, default=ZERO)

    class Meta:
        indexes = [models.Index(fields=["period", "period_start"], name="refundrollup_period")]

    def __str__(self) -> str:
        return f"{self.branch_id} {self.period} {self.period_start}: {self.amount} refunded"


# The day's collections by department (issue 37's accounts page and home page): each payment and refund
# spread over its invoice's departments in proportion to the line amounts, summed per day, branch and
# department, unrounded (12 places; the reader rounds a day's shares to the paisa once, so they add up to
# the totals). Kept like the rollups above, by statement-level triggers on the inserts of payments and
# refunds (migration 0008), so a day reads tens of rows instead of joining its thousands of payments to
# their lines. A payment's shares are fixed when it is recorded: 0008 also refuses any change to the amount
# or department of a line, or to the grand total, of an invoice that is no longer a draft, and payments and
# refunds are only ever recorded against finalized invoices.


class CollectionRollup(models.Model):
    """Money received (payments) or handed back (refunds) on one day at one branch, shared to a department."""

    class Flow(models.TextChoices):
        RECEIVED = "received"
        REFUNDED = "refunded"

    pk = models.CompositePrimaryKey("day", "branch_id", "flow", "department_id")
    day = models.DateField(help_text="The payment's or refund's date: the branch's local day.")
    branch = models.ForeignKey(Branch, on_delete=models.PROTECT, related_name="+", db_index=False)
    flow = models.CharField(max_length=8, choices=Flow.choices)
    department = models.ForeignKey(Department, on_delete=models.PROTECT, related_name="+", db_index=False)
    amount = models.DecimalField(max_digits=30, decimal_places=12, default=ZERO)

    def __str__(self) -> str:
        return f"{self.day} {self.branch_id} {self.flow} {self.department_id}: {self.amount}"


class NumberCounter(models.Model):
    """The last number a branch issued in a financial year, in one series (billing.numbering takes the next
    with clinic.db.counter_next)."""

    id = models.BigAutoField(primary_key=True)
    branch = models.ForeignKey(Branch, on_delete=models.CASCADE, related_name="+")
    financial_year = models.CharField(max_length=7, help_text="e.g. 2026-27")
    last_number = models.PositiveIntegerField(default=0)

    class Meta:
        abstract = True

    def __str__(self) -> str:
        return f"{self.branch_id} {self.financial_year}: {self.last_number}"


class InvoiceNumberCounter(NumberCounter):
    """The invoice number series."""

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["branch", "financial_year"], name="invoice_counter_per_branch_year")
        ]


class CreditNoteNumberCounter(NumberCounter):
    """The credit note number series."""

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["branch", "financial_year"], name="creditnote_counter_per_branch_year")
        ]
