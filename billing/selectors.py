"""Reads of invoices and the financial summary, always through the calling client's branch restriction
(visible_invoices): a client limited to some branches sees only the invoices of those branches."""

from __future__ import annotations

import calendar
import uuid
from datetime import date, timedelta
from decimal import Decimal
from functools import cache
from typing import Any

from django.db import connection
from django.db.models import Prefetch, Q, QuerySet, prefetch_related_objects

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
from clinic.models import Branch, Department
from clinic.query_plans import prefetched, server_binding_cursor
from clinic.visibility import client_branch_ids
from integrations.models import ApiClient
from patients.models import Patient


def visible_invoices(client: ApiClient) -> QuerySet[Invoice]:
    return Invoice.objects.visible_to(client)


def _credit_notes() -> QuerySet[CreditNote]:
    lines = CreditNoteLine.objects.order_by("position", "id")
    return CreditNote.objects.order_by("created_at", "id").prefetch_related(Prefetch("lines", queryset=lines))


def _detailed(invoice: Invoice | None) -> Invoice | None:
    """The invoice (read with its branch and patient) with everything its detail shows: its lines with their
    departments, its payments, its credit notes with their lines and its refunds, each in display order. A
    relation whose total on the invoice is zero has no rows (every row's amount is positive, a constraint of
    each table): it is attached empty, without a query."""
    if invoice is None:
        return None
    lookups: list[Prefetch[Any]] = [
        Prefetch("line_items", queryset=LineItem.objects.select_related("department").order_by("position", "id"))
    ]
    related: tuple[tuple[str, Decimal, QuerySet[Any]], ...] = (
        ("payments", invoice.paid, Payment.objects.order_by("recorded_at", "id")),
        ("credit_notes", invoice.credited, _credit_notes()),
        ("refunds", invoice.refunded, Refund.objects.order_by("recorded_at", "id")),
    )
    for relation, total, rows in related:
        if total:
            lookups.append(Prefetch(relation, queryset=rows))
        else:
            prefetched(invoice, relation, [])
    prefetch_related_objects([invoice], *lookups)
    return invoice


def invoice_detail_load(invoice_id: uuid.UUID) -> Invoice:
    """An invoice with everything its detail shows, whatever its branch: for the events its own writes
    publish (billing.events), never for a client's request."""
    invoice = _detailed(Invoice.objects.select_related("branch", "patient").filter(id=invoice_id).first())
    if invoice is None:
        raise Invoice.DoesNotExist(f"No invoice {invoice_id}.")
    return invoice


def invoice_get(*, client: ApiClient, invoice_id: str, detail: bool = True) -> Invoice:
    """By UUID; 404 when unknown, malformed or at a branch the client may not see (no existence oracle).
    With `detail`, everything the detail shows (_detailed)."""
    try:
        key = uuid.UUID(invoice_id)
    except ValueError:
        raise NotFound(f"No invoice {invoice_id!r}.") from None
    invoice = visible_invoices(client).filter(id=key).select_related("branch", "patient").first()
    if detail:
        invoice = _detailed(invoice)
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
    """The financial summary of docs/api-rules.md §11 and §12 over [date_from, date_to], from the rollups
    of the client's branches (or of `branch_id`, when the client may see it).

    Billed invoices are the finalized, partially paid and paid ones dated in the range. total_billed sums
    their grand totals; total_outstanding their balances as they stand now. total_collected and
    collection_by_mode count the payments dated in the range (cash received in the period, whatever the
    date of the invoice it settles). revenue_by_department sums the taxable amounts of the billed
    invoices' lines by department name, in name order."""
    branches: frozenset[uuid.UUID] | None = client_branch_ids(client)
    if branch_id is not None:
        if not Branch.objects.visible_to(client).filter(id=branch_id).exists():
            raise FieldError({"branch_id": f"No branch {branch_id} available to this client."})
        branches = frozenset({branch_id})
    # Each figure sums the rollups of its range (billing.models, migration 0004), kept exact by triggers in
    # the transaction of every change: a query sees in its snapshot what aggregating the rows would. One
    # statement, prepared on the server (the ORM compiled six on every request, most of its CPU).
    values: dict[str, Any] = {**rollup_ranges(date_from, date_to), "day": RollupPeriod.DAY, "month": RollupPeriod.MONTH}
    if branches is not None:
        values["branches"] = sorted(branches)
    with server_binding_cursor(connection) as cursor:
        cursor.execute(_summary_statement(restricted=branches is not None), values)
        billed, outstanding, credited, refunded, modes, departments = cursor.fetchone()
    by_mode = {mode: Decimal("0.00") for mode in Payment.Mode.values}
    by_mode.update((mode, Decimal(total)) for mode, total in modes)
    return {
        "total_billed": billed,
        "total_collected": sum(by_mode.values(), Decimal("0.00")),
        "total_outstanding": outstanding,
        "total_credited": credited,
        "total_refunded": refunded,
        "collection_by_mode": by_mode,
        # A department is listed when it has a billed line in the range, even one worth 0.00 (rows whose
        # invoices were all cancelled count none); by name.
        "revenue_by_department": dict(sorted((name, Decimal(total)) for name, total in departments)),
    }


@cache
def _summary_statement(*, restricted: bool) -> str:
    """The summary's five figures, the collection by mode and the revenue by department name in one row.
    Sums of numeric(18, 2) keep two places, and an empty sum is the literal 0.00, as the ORM's Coalesce gave;
    the grouped sums come as text, read back with Decimal (exact). Identifiers from the models' metadata."""
    quote = connection.ops.quote_name
    periods = (
        "((period = %(month)s AND period_start BETWEEN %(months_from)s AND %(months_to)s)"
        " OR (period = %(day)s AND (period_start BETWEEN %(head_from)s AND %(head_to)s"
        " OR period_start BETWEEN %(tail_from)s AND %(tail_to)s)))"
    )
    branch = " AND branch_id = ANY(%(branches)s)" if restricted else ""

    def rows(model: type[Any]) -> str:
        return f"FROM {quote(model._meta.db_table)} WHERE {periods}{branch}"

    department = quote(Department._meta.db_table)
    return f"""
SELECT invoices.billed, invoices.outstanding, credits.amount, refunds.amount,
  ARRAY(SELECT ARRAY[payment_mode, sum(amount)::text] {rows(PaymentRollup)} GROUP BY payment_mode),
  ARRAY(SELECT ARRAY[d.name, lines.total::text]
        FROM (SELECT department_id, sum(taxable) AS total {rows(LineRollup)}
              GROUP BY department_id HAVING sum(lines) > 0) lines
        JOIN {department} d ON d.id = lines.department_id)
FROM (SELECT coalesce(sum(billed), 0.00) AS billed, coalesce(sum(outstanding), 0.00) AS outstanding
      {rows(InvoiceRollup)}) invoices,
  (SELECT coalesce(sum(amount), 0.00) AS amount {rows(CreditRollup)}) credits,
  (SELECT coalesce(sum(amount), 0.00) AS amount {rows(RefundRollup)}) refunds
"""  # noqa: S608 - identifiers from the models; every value is a parameter


def _month_start(index: int) -> date:
    return date(index // 12, index % 12 + 1, 1)


# A range of period starts that holds none (BETWEEN a later and an earlier day).
_NO_DAYS = (date(1, 1, 2), date(1, 1, 1))


def rollup_ranges(date_from: date, date_to: date) -> dict[str, date]:
    """The rollup rows that make up [date_from, date_to] exactly, each day once, as three inclusive ranges
    of period_start: the month rows of the calendar months wholly inside it (months_from..months_to), and
    the day rows of the days before those months (head) and after them (tail); a range not needed holds
    nothing. A range within one month (or two partial ones) is all day rows. (Months are counted as
    year * 12 + month - 1, so that no date past date.max is ever formed.)"""
    first_month = date_from.year * 12 + date_from.month - 1 + (date_from.day > 1)
    last_day_of_month = calendar.monthrange(date_to.year, date_to.month)[1]
    last_month = date_to.year * 12 + date_to.month - 1 - (date_to.day < last_day_of_month)
    if first_month > last_month:
        months, head, tail = _NO_DAYS, (date_from, date_to), _NO_DAYS
    else:
        months_from = _month_start(first_month)
        months = (months_from, _month_start(last_month))
        head = (date_from, months_from - timedelta(days=1)) if date_from < months_from else _NO_DAYS
        tail = (date_to.replace(day=1), date_to) if date_to.day < last_day_of_month else _NO_DAYS
    return {
        "months_from": months[0],
        "months_to": months[1],
        "head_from": head[0],
        "head_to": head[1],
        "tail_from": tail[0],
        "tail_to": tail[1],
    }


def rollup_periods(date_from: date, date_to: date) -> Q:
    """rollup_ranges as a filter of the rollup models (the ranges that hold something)."""
    ranges = rollup_ranges(date_from, date_to)
    parts = [
        Q(period=period, period_start__gte=ranges[f"{name}_from"], period_start__lte=ranges[f"{name}_to"])
        for period, name in ((RollupPeriod.MONTH, "months"), (RollupPeriod.DAY, "head"), (RollupPeriod.DAY, "tail"))
        if ranges[f"{name}_from"] <= ranges[f"{name}_to"]
    ]
    periods = parts[0]
    for part in parts[1:]:
        periods |= part
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
