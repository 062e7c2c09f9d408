"""Reads of invoices and the financial summary, always through the calling client's branch restriction
(visible_invoices): a client limited to some branches sees only the invoices of those branches."""

from __future__ import annotations

import calendar
import uuid
from collections.abc import Collection
from dataclasses import dataclass
from datetime import date, timedelta
from decimal import Decimal
from functools import cache
from typing import Any, TypeVar, cast

from django.db import connection
from django.db.models import Model, Prefetch, Q, QuerySet, Sum

from billing.models import (
    CollectionRollup,
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
from clinic.lib.rows import columns, loaded, split
from clinic.models import Branch, Department
from clinic.query_plans import prefetched, server_binding_cursor
from clinic.selectors import branch_visible_get
from clinic.visibility import client_branch_ids
from integrations.models import ApiClient
from patients.models import Patient

M = TypeVar("M", bound=Model)


def visible_invoices(client: ApiClient) -> QuerySet[Invoice]:
    return Invoice.objects.visible_to(client)


def _credit_notes() -> QuerySet[CreditNote]:
    lines = CreditNoteLine.objects.order_by("position", "id")
    return CreditNote.objects.order_by("created_at", "id").prefetch_related(Prefetch("lines", queryset=lines))


# Constant statements (docs/architecture.md §6): an invoice's detail answers every GET of it, every write to
# it and every billing event, and composing its reads through the ORM (the head with its branch and patient,
# then prefetch_related over lines, payments, credit notes and refunds) cost about 7 ms of CPU per request
# (bench/results/plans_retired.md). Each is one statement over the models' own tables and columns, the rows
# built as loaded rows (clinic.lib.rows); the client's branch ids are the rule's parameter
# (Invoice.objects.visible_to). tests/billing/test_invoice_statements.py holds them to the ORM reads.
@cache
def _invoice_statements() -> dict[str, str]:
    invoice, line, credit = Invoice._meta, LineItem._meta, CreditNote._meta

    def fk(meta: Any, name: str) -> str:
        return str(meta.get_field(name).column)

    head = (
        f"SELECT {columns(Invoice, 'i')}, {columns(Branch, 'b')}, {columns(Patient, 'p')}"  # noqa: S608 - _meta
        f' FROM "{invoice.db_table}" i JOIN "{Branch._meta.db_table}" b ON b.id = i."{fk(invoice, "branch")}"'
        f' JOIN "{Patient._meta.db_table}" p ON p.id = i."{fk(invoice, "patient")}" WHERE i.id = %s'
    )

    def of_invoice(model: Any, order: str) -> str:
        meta = model._meta
        return (
            f'SELECT {columns(model, "x")} FROM "{meta.db_table}" x'  # noqa: S608 - _meta
            f' WHERE x."{fk(meta, "invoice")}" = %s ORDER BY {order}'
        )

    return {
        "head": head,
        "head at": f'{head} AND i."{fk(invoice, "branch")}" = ANY(%s)',
        "lines": (
            f'SELECT {columns(LineItem, "x")}, {columns(Department, "d")} FROM "{line.db_table}" x'  # noqa: S608
            f' JOIN "{Department._meta.db_table}" d ON d.id = x."{fk(line, "department")}"'
            f' WHERE x."{fk(line, "invoice")}" = %s ORDER BY x.position, x.id'
        ),
        "payments": of_invoice(Payment, "x.recorded_at, x.id"),
        "credit_notes": of_invoice(CreditNote, "x.created_at, x.id"),
        "credit_lines": (
            f'SELECT {columns(CreditNoteLine, "x")} FROM "{CreditNoteLine._meta.db_table}" x'  # noqa: S608
            f' JOIN "{credit.db_table}" c ON c.id = x."{fk(CreditNoteLine._meta, "credit_note")}"'
            f' WHERE c."{fk(credit, "invoice")}" = %s ORDER BY x.position, x.id'
        ),
        "refunds": of_invoice(Refund, "x.recorded_at, x.id"),
    }


def _rows(statement: str, params: list[Any]) -> list[tuple[Any, ...]]:
    with connection.cursor() as cursor:
        cursor.execute(_invoice_statements()[statement], params)
        return cursor.fetchall()


def _invoice_head(invoice_id: uuid.UUID, allowed: frozenset[uuid.UUID] | None) -> Invoice | None:
    """The invoice with its branch and patient, when at one of the `allowed` branches (None: any)."""
    rows = _rows("head", [invoice_id]) if allowed is None else _rows("head at", [invoice_id, list(allowed)])
    if not rows:
        return None
    invoice, branch, patient = split(rows[0], Invoice, Branch, Patient)
    invoice = cast(Invoice, invoice)
    invoice.branch, invoice.patient = cast(Branch, branch), cast(Patient, patient)
    return invoice


def _detailed(invoice: Invoice | None) -> Invoice | None:
    """The invoice (read with its branch and patient) with everything its detail shows: its lines with their
    departments, its payments, its credit notes with their lines and its refunds, each in display order. A
    relation whose total on the invoice is zero has no rows (every row's amount is positive, a constraint of
    each table): it is attached empty, without a query."""
    if invoice is None:
        return None
    lines = []
    for row in _rows("lines", [invoice.pk]):
        line, department = split(row, LineItem, Department)
        cast(LineItem, line).department = cast(Department, department)
        lines.append(line)
    prefetched(invoice, "line_items", lines)
    prefetched(invoice, "payments", _loaded("payments", Payment, invoice) if invoice.paid else [])
    notes = _loaded("credit_notes", CreditNote, invoice) if invoice.credited else []
    if notes:
        by_note: dict[Any, list[Any]] = {note.pk: [] for note in notes}
        for credit_line in _loaded("credit_lines", CreditNoteLine, invoice):
            by_note[credit_line.credit_note_id].append(credit_line)
        for note in notes:
            prefetched(note, "lines", by_note[note.pk])
    prefetched(invoice, "credit_notes", notes)
    prefetched(invoice, "refunds", _loaded("refunds", Refund, invoice) if invoice.refunded else [])
    return invoice


def _loaded(statement: str, model: type[M], invoice: Invoice) -> list[M]:
    return [loaded(model, row) for row in _rows(statement, [invoice.pk])]


def invoice_detail_load(invoice_id: uuid.UUID) -> Invoice:
    """An invoice with everything its detail shows, whatever its branch: for the events its own writes
    publish (billing.events), never for a client's request."""
    invoice = _detailed(_invoice_head(invoice_id, None))
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
    invoice = _invoice_head(key, client_branch_ids(client))
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
        try:
            branch_visible_get(client=client, branch_id=branch_id)
        except NotFound:
            raise FieldError({"branch_id": f"No branch {branch_id} available to this client."}) from None
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


# Dashboard reads: the day's collections (the accounts section of the admin's home page and the collections
# page under Billing > Payments), through the reader's branch restriction like every read above.


@dataclass(frozen=True)
class CollectionRow:
    """Money received, money paid back, and what stays (received - refunded), under one label."""

    label: str
    received: Decimal
    refunded: Decimal

    @property
    def net(self) -> Decimal:
        return self.received - self.refunded


@dataclass(frozen=True)
class DayCollections:
    """The collections of one branch-local day: by payment mode (every mode, in the model's order) and by
    department (those with money, by name), and the totals; both breakdowns add up to the totals."""

    day: date
    by_mode: list[CollectionRow]
    by_department: list[CollectionRow]
    received: Decimal
    refunded: Decimal

    @property
    def net(self) -> Decimal:
        return self.received - self.refunded


_NO_DEPARTMENT = "No department"
_PAISA = Decimal("0.01")


def _rounded(total: Decimal, exact: dict[str, Decimal]) -> dict[str, Decimal]:
    """Exact shares of `total` in whole paise that add up to it (largest remainders get the odd paise, ties by
    name); what no share covers (money on an invoice without lines) is "No department"."""
    exact = dict(exact)
    unplaced = total - sum(exact.values(), Decimal(0))
    if unplaced.quantize(_PAISA) > 0:
        exact[_NO_DEPARTMENT] = exact.get(_NO_DEPARTMENT, Decimal(0)) + unplaced
    floors = {key: value.quantize(_PAISA, rounding="ROUND_FLOOR") for key, value in exact.items()}
    left = int((total - sum(floors.values(), Decimal(0))) / _PAISA)
    for key in sorted(exact, key=lambda k: (floors[k] - exact[k], k))[: max(left, 0)]:
        floors[key] += _PAISA
    return floors


def _of_branches(rollup: QuerySet[Any], client: Any, branch_ids: Collection[uuid.UUID] | None) -> QuerySet[Any]:
    """A rollup's rows at the reader's branches (rollups have no visible_to: the same rule, on their branch
    column), narrowed to `branch_ids` when given."""
    allowed = client_branch_ids(client)
    if allowed is not None:
        rollup = rollup.filter(branch_id__in=allowed)
    if branch_ids is not None:
        rollup = rollup.filter(branch_id__in=branch_ids)
    return rollup


def collections_of_day(*, client: Any, day: date, branch_ids: Collection[uuid.UUID] | None = None) -> DayCollections:
    """The payments and refunds dated `day` (each branch's own local day: both dates are recorded as the
    branch's day) at the reader's branches, or at those of `branch_ids` the reader may see.

    Received by mode is read from the day rows of the payment rollup; refunds by mode from the refunds.
    A payment counts for the departments of its invoice in proportion to the invoice's line amounts (money
    is received per invoice, not per line), and a refund is taken off the same way: those shares are kept
    per day, branch and department by CollectionRollup, and the day's are rounded to the paisa once here,
    so that departments add up to the totals. Every read goes through a (day or branch, date) index: tens of
    rows, however many payments the day holds."""
    refunds = Refund.objects.visible_to(client).filter(refund_date=day)
    rollup = _of_branches(PaymentRollup.objects.filter(period=RollupPeriod.DAY, period_start=day), client, branch_ids)
    shares = _of_branches(CollectionRollup.objects.filter(day=day), client, branch_ids)
    if branch_ids is not None:
        refunds = refunds.filter(branch_id__in=branch_ids)
    received = dict(rollup.values("payment_mode").annotate(total=Sum("amount")).values_list("payment_mode", "total"))
    refunded = dict(refunds.values("payment_mode").annotate(total=Sum("amount")).values_list("payment_mode", "total"))
    labels = dict(Payment.Mode.choices)
    zero = Decimal("0.00")
    by_mode = [
        CollectionRow(str(labels[mode]), received.get(mode, zero), refunded.get(mode, zero))
        for mode in Payment.Mode.values
    ]
    total_in = sum((row.received for row in by_mode), zero)
    total_out = sum((row.refunded for row in by_mode), zero)
    by_department = shares.values_list("flow", "department__name").annotate(total=Sum("amount")).order_by()
    paid_in: dict[str, Decimal] = {}
    paid_out: dict[str, Decimal] = {}
    for flow, name, total in by_department:
        (paid_in if flow == CollectionRollup.Flow.RECEIVED else paid_out)[name] = total
    departments_in = _rounded(total_in, paid_in) if total_in else {}
    departments_out = _rounded(total_out, paid_out) if total_out else {}
    names = sorted(set(departments_in) | set(departments_out))
    return DayCollections(
        day=day,
        by_mode=by_mode,
        by_department=[
            CollectionRow(name, departments_in.get(name, zero), departments_out.get(name, zero)) for name in names
        ],
        received=total_in,
        refunded=total_out,
    )
