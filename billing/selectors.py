"""Reads of invoices and the financial summary, always through the calling client's branch restriction
(visible_invoices): a client limited to some branches sees only the invoices of those branches."""

from __future__ import annotations

import calendar
import uuid
from datetime import date
from decimal import Decimal
from typing import Any

from django.db.models import DecimalField, Prefetch, Q, QuerySet, Sum, Value
from django.db.models.functions import Coalesce

from billing.models import (
    CreditNote,
    CreditNoteLine,
    CreditRollup,
    Invoice,
    InvoiceRollup,
    LineItem,
    LineRollup,
    Payment,
    PaymentRollup,
    Refund,
    RefundRollup,
    RollupPeriod,
)
from clinic.errors import FieldError, NotFound
from clinic.models import Department
from clinic.selectors import client_branch_ids
from integrations.models import ApiClient
from patients.models import Patient

_ZERO = Value(Decimal("0.00"), output_field=DecimalField(max_digits=16, decimal_places=2))


def visible_invoices(client: ApiClient) -> QuerySet[Invoice]:
    """The one access chokepoint for invoices."""
    invoices = Invoice.objects.all()
    allowed = client_branch_ids(client)
    if allowed is not None:
        invoices = invoices.filter(branch_id__in=allowed)
    return invoices


def _credit_notes() -> QuerySet[CreditNote]:
    lines = CreditNoteLine.objects.order_by("position", "id")
    return CreditNote.objects.order_by("created_at", "id").prefetch_related(Prefetch("lines", queryset=lines))


def _with_detail(invoices: QuerySet[Invoice]) -> QuerySet[Invoice]:
    """Everything the detail shows, in 6 queries: the invoice with branch and patient, its lines with their
    departments, its payments, its credit notes and their lines, and its refunds."""
    return invoices.select_related("branch", "patient").prefetch_related(
        Prefetch("line_items", queryset=LineItem.objects.select_related("department").order_by("position", "id")),
        Prefetch("payments", queryset=Payment.objects.order_by("recorded_at", "id")),
        Prefetch("credit_notes", queryset=_credit_notes()),
        Prefetch("refunds", queryset=Refund.objects.order_by("recorded_at", "id")),
    )


def invoice_detail_load(invoice_id: uuid.UUID) -> Invoice:
    """An invoice with everything its detail shows, whatever its branch: for the events its own writes
    publish (billing.events), never for a client's request."""
    return _with_detail(Invoice.objects.filter(id=invoice_id)).get()


def invoice_get(*, client: ApiClient, invoice_id: str, detail: bool = True) -> Invoice:
    """By UUID; 404 when unknown, malformed or at a branch the client may not see (no existence oracle).
    With `detail`, everything the detail shows (_with_detail)."""
    try:
        key = uuid.UUID(invoice_id)
    except ValueError:
        raise NotFound(f"No invoice {invoice_id!r}.") from None
    invoices = visible_invoices(client).filter(id=key)
    invoices = _with_detail(invoices) if detail else invoices.select_related("branch", "patient")
    invoice = invoices.first()
    if invoice is None:
        raise NotFound(f"No invoice {invoice_id!r}.")
    return invoice


def invoice_list(
    *,
    client: ApiClient,
    patient: Patient | None = None,
    status: str | None = None,
    date_from: date | None = None,
    date_to: date | None = None,
    branch_id: uuid.UUID | None = None,
) -> QuerySet[Invoice]:
    """Visible invoices, newest invoice date first, then most recently created, then id. Filters naming
    a patient or branch are checked by the caller (billing.api.serializers.InvoiceListParams)."""
    invoices = visible_invoices(client).select_related("patient")
    if patient is not None:
        invoices = invoices.filter(patient=patient)
    if status is not None:
        invoices = invoices.filter(status=status)
    if date_from is not None:
        invoices = invoices.filter(date__gte=date_from)
    if date_to is not None:
        invoices = invoices.filter(date__lte=date_to)
    if branch_id is not None:
        invoices = invoices.filter(branch_id=branch_id)
    return invoices.order_by("-date", "-created_at", "id")


def billing_summary(
    *, client: ApiClient, date_from: date, date_to: date, branch_id: uuid.UUID | None = None
) -> dict[str, Any]:
    """The financial summary of CONTRACT sections 8 and 13 over [date_from, date_to]: five aggregate
    queries, and one for the names of the departments found.

    Billed invoices are the finalized, partially paid and paid ones dated in the range. total_billed sums
    their grand totals; total_outstanding their balances as they stand now. total_collected and
    collection_by_mode count the payments dated in the range (cash received in the period, whatever the
    date of the invoice it settles). revenue_by_department sums the taxable amounts of the billed
    invoices' lines by department name, in name order."""
    branches: frozenset[uuid.UUID] | None = client_branch_ids(client)
    if branch_id is not None:
        if branches is not None and branch_id not in branches:
            raise FieldError({"branch_id": f"No branch {branch_id} available to this client."})
        branches = frozenset({branch_id})
    # Each figure sums the rollups of its range (billing.models, migration 0004), kept exact by triggers in
    # the transaction of every change: a query sees in its snapshot what aggregating the rows would.
    periods = rollup_periods(date_from, date_to)
    invoices = InvoiceRollup.objects.filter(periods)
    payments = PaymentRollup.objects.filter(periods)
    lines = LineRollup.objects.filter(periods)
    if branches is not None:
        invoices = invoices.filter(branch_id__in=branches)
        payments = payments.filter(branch_id__in=branches)
        lines = lines.filter(branch_id__in=branches)
    credits = CreditRollup.objects.filter(periods)
    refunds = RefundRollup.objects.filter(periods)
    if branches is not None:
        credits = credits.filter(branch_id__in=branches)
        refunds = refunds.filter(branch_id__in=branches)
    totals = invoices.aggregate(
        total_billed=Coalesce(Sum("billed"), _ZERO),
        total_outstanding=Coalesce(Sum("outstanding"), _ZERO),
    )
    total_credited = credits.aggregate(total=Coalesce(Sum("amount"), _ZERO))["total"]
    total_refunded = refunds.aggregate(total=Coalesce(Sum("amount"), _ZERO))["total"]
    by_mode = {mode: Decimal("0.00") for mode in Payment.Mode.values}
    for row in payments.order_by().values("payment_mode").annotate(total=Sum("amount")):
        by_mode[row["payment_mode"]] = row["total"]
    # A department is listed when it has a billed line in the range, even one worth 0.00 (rows whose
    # invoices were all cancelled count none). Named afterwards: no join to the departments per row.
    by_department = dict(
        lines.order_by()
        .values("department_id")
        .annotate(total=Sum("taxable"), line_count=Sum("lines"))
        .filter(line_count__gt=0)
        .values_list("department_id", "total")
    )
    names = dict(Department.objects.filter(id__in=by_department).values_list("id", "name")) if by_department else {}
    return {
        "total_billed": totals["total_billed"],
        "total_collected": sum(by_mode.values(), Decimal("0.00")),
        "total_outstanding": totals["total_outstanding"],
        "total_credited": total_credited,
        "total_refunded": total_refunded,
        "collection_by_mode": by_mode,
        "revenue_by_department": dict(sorted((names[key], total) for key, total in by_department.items())),
    }


def _month_start(index: int) -> date:
    return date(index // 12, index % 12 + 1, 1)


def rollup_periods(date_from: date, date_to: date) -> Q:
    """The rollup rows that make up [date_from, date_to] exactly, each day once: the calendar months wholly
    inside it from the month rows, the days before and after those months from the day rows. (Months are
    counted as year * 12 + month - 1, so that no date past date.max is ever formed.)"""
    first_month = date_from.year * 12 + date_from.month - 1 + (date_from.day > 1)
    last_day_of_month = calendar.monthrange(date_to.year, date_to.month)[1]
    last_month = date_to.year * 12 + date_to.month - 1 - (date_to.day < last_day_of_month)
    day = RollupPeriod.DAY
    if first_month > last_month:
        return Q(period=day, period_start__gte=date_from, period_start__lte=date_to)
    months_from = _month_start(first_month)
    periods = Q(period=RollupPeriod.MONTH, period_start__gte=months_from, period_start__lte=_month_start(last_month))
    if date_from < months_from:
        periods |= Q(period=day, period_start__gte=date_from, period_start__lt=months_from)
    if date_to.day < last_day_of_month:
        periods |= Q(period=day, period_start__gte=date_to.replace(day=1), period_start__lte=date_to)
    return periods


def credit_note_list(*, invoice: Invoice) -> QuerySet[CreditNote]:
    """The credit notes of an invoice the caller has already read through the client's restriction, oldest
    first, with their lines."""
    return _credit_notes().filter(invoice=invoice)


def credit_note_get(*, invoice: Invoice, credit_note_id: str) -> CreditNote:
    """A credit note of an invoice already read through the client's restriction; 404 when unknown,
    malformed or of another invoice."""
    try:
        key = uuid.UUID(credit_note_id)
    except ValueError:
        raise NotFound(f"No credit note {credit_note_id!r} on this invoice.") from None
    note = credit_note_list(invoice=invoice).filter(id=key).first()
    if note is None:
        raise NotFound(f"No credit note {credit_note_id!r} on this invoice.")
    return note
