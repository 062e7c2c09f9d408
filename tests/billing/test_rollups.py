"""The financial summary's rollups (billing.models InvoiceRollup, LineRollup, PaymentRollup; migration 0004):
after any mix of finalizations, cancellations, payments and raw SQL they equal an aggregation of the
invoices, lines and payments from scratch; a rolled-back or refused change leaves them as they were;
concurrent payments on the same rows leave them exact; and the summary read from them equals the one
aggregated from the rows, for ranges across month and financial-year boundaries."""

from __future__ import annotations

import calendar
import contextlib
import random
import uuid
from collections.abc import Callable
from datetime import date, timedelta
from decimal import Decimal
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command
from django.db import IntegrityError, connection, transaction
from django.db.models import Q, Sum
from django.test.utils import CaptureQueriesContext

from billing import selectors, services
from billing.models import BILLED_STATUSES, CollectionRollup, CreditNote, Invoice, LineItem, Payment, Refund
from clinic.errors import Conflict, FieldError
from tests.billing.factories import INVOICES, line, make_invoice, pay, post_json
from tests.billing.test_concurrency import THREADS, all_at_once, api_post
from tests.factories import ApiClientFactory, BranchFactory, DepartmentFactory
from tests.helpers import sql_rows
from tests.patients.factories import PatientFactory

pytestmark = pytest.mark.django_db

D = Decimal
ONE_DAY = timedelta(days=1)
MODES = ["cash", "card", "upi", "neft", "cheque", "online", "insurance"]
# Mostly the end of the financial year (31 March / 1 April), and days of the months on either side.
DAYS = [date(2026, 3, 31), date(2026, 4, 1)] * 4 + [
    date(2026, 2, 28),
    date(2026, 3, 1),
    date(2026, 3, 15),
    date(2026, 3, 30),
    date(2026, 4, 2),
    date(2026, 4, 30),
    date(2026, 5, 1),
    date(2026, 6, 17),
]

# Every row a rollup should hold, from the invoices, lines and payments themselves: (rollup, branch, period,
# first day, department or mode, figures...). Rows whose figures are all zero are left out on both sides:
# a rollup keeps a row at zero once everything it counted was cancelled.
FROM_SCRATCH = """
SELECT 'invoice', branch_id, period, start, '', sum(grand_total),
       sum(GREATEST(grand_total - credited - paid + refunded, 0))
  FROM billing_invoice
 CROSS JOIN LATERAL (VALUES ('day', date), ('month', date_trunc('month', date::timestamp)::date)) p (period, start)
 WHERE status IN ('finalized', 'partially_paid', 'paid') GROUP BY 2, 3, 4
HAVING sum(grand_total) <> 0 OR sum(GREATEST(grand_total - credited - paid + refunded, 0)) <> 0
UNION ALL
SELECT 'line', i.branch_id, period, start, l.department_id::text, count(*), sum(l.taxable_amount)
  FROM billing_lineitem l JOIN billing_invoice i ON i.id = l.invoice_id
 CROSS JOIN LATERAL (VALUES ('day', i.date), ('month', date_trunc('month', i.date::timestamp)::date)) p (period, start)
 WHERE i.status IN ('finalized', 'partially_paid', 'paid') GROUP BY 2, 3, 4, 5
UNION ALL
SELECT 'payment', i.branch_id, period, start, m.payment_mode, sum(m.amount), 0
  FROM billing_payment m JOIN billing_invoice i ON i.id = m.invoice_id
 CROSS JOIN LATERAL (VALUES ('day', m.payment_date),
                            ('month', date_trunc('month', m.payment_date::timestamp)::date)) p (period, start)
 GROUP BY 2, 3, 4, 5
UNION ALL
SELECT 'credit', branch_id, period, start, '', sum(total), 0
  FROM billing_creditnote
 CROSS JOIN LATERAL (VALUES ('day', date), ('month', date_trunc('month', date::timestamp)::date)) p (period, start)
 GROUP BY 2, 3, 4
UNION ALL
SELECT 'refund', branch_id, period, start, '', sum(amount), 0
  FROM billing_refund
 CROSS JOIN LATERAL (VALUES ('day', refund_date),
                            ('month', date_trunc('month', refund_date::timestamp)::date)) p (period, start)
 GROUP BY 2, 3, 4
"""
KEPT = """
SELECT 'invoice', branch_id, period, period_start, '', billed, outstanding FROM billing_invoicerollup
UNION ALL
SELECT 'line', branch_id, period, period_start, department_id::text, lines, taxable FROM billing_linerollup
UNION ALL
SELECT 'payment', branch_id, period, period_start, payment_mode, amount, 0 FROM billing_paymentrollup
UNION ALL
SELECT 'credit', branch_id, period, period_start, '', amount, 0 FROM billing_creditrollup
UNION ALL
SELECT 'refund', branch_id, period, period_start, '', amount, 0 FROM billing_refundrollup
"""


def kept() -> set[tuple[Any, ...]]:
    """The rollups' rows with something in them."""
    return {row for row in sql_rows(KEPT) if row[5] != 0 or row[6] != 0}


def kept_exactly() -> set[tuple[Any, ...]]:
    """Every row of the rollups, zeros included: what must not move when nothing was committed."""
    return sql_rows(KEPT) | set(
        CollectionRollup.objects.values_list("day", "branch_id", "flow", "department_id", "amount")
    )


def collections_from_scratch() -> dict[tuple[Any, ...], Decimal]:
    """The day's collections by department (billing 0008), worked out here in Python from the payments,
    refunds and lines: each money row spread over its invoice's lines in proportion to their amounts."""
    lines: dict[uuid.UUID, list[tuple[uuid.UUID, Decimal]]] = {}
    for invoice_id, department_id, amount in LineItem.objects.values_list("invoice_id", "department_id", "amount"):
        lines.setdefault(invoice_id, []).append((department_id, amount))
    grand_totals = dict(Invoice.objects.values_list("id", "grand_total"))
    shares: dict[tuple[Any, ...], Decimal] = {}
    money = [
        ("received", Payment.objects.values_list("invoice_id", "payment_date", "branch_id", "amount")),
        ("refunded", Refund.objects.values_list("invoice_id", "refund_date", "branch_id", "amount")),
    ]
    for flow, rows in money:
        for invoice_id, day, branch_id, amount in rows:
            for department_id, line_amount in lines.get(invoice_id, []) if grand_totals[invoice_id] else []:
                key = (day, branch_id, flow, department_id)
                shares[key] = shares.get(key, D(0)) + amount * line_amount / grand_totals[invoice_id]
    return shares


def assert_collections_exact() -> None:
    """The collection rollup holds 12 places of each unrounded share: equal to the shares worked out from
    scratch to within 1e-9 (a day's figures are rounded to the paisa from them)."""
    expected = collections_from_scratch()
    kept_rows = {
        row[:4]: row[4]
        for row in CollectionRollup.objects.values_list("day", "branch_id", "flow", "department_id", "amount")
    }
    for key in set(expected) | {key for key, amount in kept_rows.items() if amount}:
        assert abs(kept_rows.get(key, D(0)) - expected.get(key, D(0))) < D("1e-9"), key


def assert_exact() -> None:
    expected = sql_rows(FROM_SCRATCH)
    assert expected, "nothing billed: the comparison would prove nothing"
    actual = kept()
    assert actual - expected == set()
    assert expected - actual == set()
    assert_collections_exact()


def aggregated(date_from: date, date_to: date, branch_ids: set[Any] | None) -> dict[str, Any]:
    """The summary as the selector computed it before the rollups: by aggregating invoices, lines (joined to
    their invoices, not through the copies) and payments in the range."""
    invoices = Invoice.objects.filter(date__gte=date_from, date__lte=date_to, status__in=BILLED_STATUSES)
    payments = Payment.objects.filter(payment_date__gte=date_from, payment_date__lte=date_to)
    lines = LineItem.objects.filter(
        invoice__status__in=BILLED_STATUSES, invoice__date__gte=date_from, invoice__date__lte=date_to
    )
    if branch_ids is not None:
        invoices = invoices.filter(branch_id__in=branch_ids)
        payments = payments.filter(invoice__branch_id__in=branch_ids)
        lines = lines.filter(invoice__branch_id__in=branch_ids)
    billed = sum((i.grand_total for i in invoices), D("0.00"))
    credits = CreditNote.objects.filter(date__gte=date_from, date__lte=date_to)
    refunds = Refund.objects.filter(refund_date__gte=date_from, refund_date__lte=date_to)
    if branch_ids is not None:
        credits = credits.filter(invoice__branch_id__in=branch_ids)
        refunds = refunds.filter(invoice__branch_id__in=branch_ids)
    by_mode = dict.fromkeys(MODES, D("0.00"))
    by_mode.update(payments.order_by().values_list("payment_mode").annotate(total=Sum("amount")))
    revenue = lines.order_by().values_list("department__name").annotate(total=Sum("taxable_amount"))
    return {
        "total_billed": billed,
        "total_collected": sum(by_mode.values(), D("0.00")),
        "total_outstanding": sum((i.balance for i in invoices), D("0.00")),
        "total_credited": sum((n.total for n in credits), D("0.00")),
        "total_refunded": sum((r.amount for r in refunds), D("0.00")),
        "collection_by_mode": by_mode,
        "revenue_by_department": dict(sorted(revenue)),
    }


class Population:
    """Branches, departments and patients, and the invoices made so far, for a random mix of changes."""

    def __init__(self, rng: random.Random, branches: list[Any]) -> None:
        self.rng = rng
        self.branches = branches
        self.departments = [DepartmentFactory(name=name) for name in ("Cardiology", "Dermatology", "Radiology")]
        self.patients = [
            PatientFactory(registration_branch=branch, address_state=state)
            for branch in branches
            for state in ("Karnataka", "Maharashtra")
        ]
        self.references = 0

    def lines(self) -> list[services.LineInput]:
        rng = self.rng
        return [
            line(
                rng.choice(self.departments),
                rate=rng.choice(["0.00", "99.99", "1000.00", "2500.50"]),  # a 0.00 line still lists its department
                tax_rate=rng.choice(["0", "5", "18"]),
                quantity=rng.choice(["1", "2", "0.5"]),
            )
            for _ in range(rng.randint(1, 3))
        ]

    def invoice(self, *, finalize: bool) -> Invoice:
        return make_invoice(
            branch=self.rng.choice(self.branches),
            patient=self.rng.choice(self.patients),
            lines=self.lines(),
            finalize=finalize,
            on=self.rng.choice(DAYS),
        )

    def pay(self, invoice: Invoice) -> None:
        fresh = Invoice.objects.get(pk=invoice.pk)
        if fresh.status not in ("finalized", "partially_paid") or fresh.balance <= 0:
            return
        amount = fresh.balance if self.rng.random() < 0.4 else max(D("0.01"), (fresh.balance / 3).quantize(D("0.01")))
        mode = self.rng.choice(MODES)
        self.references += 1
        on = fresh.date + timedelta(days=self.rng.choice([0, 0, 1, 30]))
        pay(fresh, str(amount), mode=mode, reference="" if mode == "cash" else f"R{self.references}", on=on)

    def change(self, invoices: list[Invoice]) -> None:
        """One random change: a new invoice (draft or finalized), a draft edited or finalized, an invoice
        cancelled, or a payment."""
        rng = self.rng
        roll = rng.random()
        if roll < 0.3 or not invoices:
            invoices.append(self.invoice(finalize=rng.random() < 0.7))
            return
        invoice = Invoice.objects.get(pk=rng.choice(invoices).pk)
        if invoice.status == "draft" and roll < 0.45:
            services.invoice_update(invoice=invoice, invoice_date=rng.choice(DAYS), line_items=self.lines())
        elif invoice.status == "draft" and roll < 0.6:
            services.invoice_finalize(invoice=invoice)
        elif invoice.status in ("draft", "finalized") and not invoice.credited and roll < 0.7:
            services.invoice_cancel(invoice=invoice, reason="generated")
        elif invoice.status in BILLED_STATUSES and roll < 0.8:
            self.credit_or_refund(invoice)
        else:
            self.pay(invoice)

    def credit_or_refund(self, invoice: Invoice) -> None:
        """A credit note on one line (in full or 1.00 of it), or a refund of what was paid, when possible."""
        rng = self.rng
        if invoice.net_paid > 0 and rng.random() < 0.4:
            self.references += 1
            amount = invoice.refund_due or min(invoice.net_paid, D("50.00"))
            services.refund_record(invoice=invoice, amount=amount, payment_mode="upi", reference=f"F{self.references}")
            return
        line = rng.choice(list(invoice.line_items.all()))
        amount = None if rng.random() < 0.5 else D("1.00")
        # Nothing (or less than 1.00) left on that line is a refused request, which changes nothing.
        with contextlib.suppress(FieldError):
            services.credit_note_issue(
                invoice=invoice, reason="generated", lines=[services.CreditLineInput(line_id=line.id, amount=amount)]
            )


@pytest.fixture
def population(blr, mum) -> Population:
    return Population(random.Random(7), [blr, mum, BranchFactory(code="DEL", state="Delhi")])


def test_after_a_random_mix_of_changes_the_rollups_equal_an_aggregation_from_scratch(population):
    invoices: list[Invoice] = []
    for step in range(400):
        population.change(invoices)
        if step % 50 == 49:
            assert_exact()

    statuses = set(Invoice.objects.values_list("status", flat=True))
    assert statuses == {"draft", "finalized", "partially_paid", "paid", "cancelled"}
    assert CreditNote.objects.count() >= 10
    assert Refund.objects.count() >= 5
    assert Payment.objects.count() > 30
    assert_exact()
    # Both periods, on both sides of the financial year's end, for every branch.
    assert {(row[1], row[2], row[3]) for row in kept() if row[0] == "invoice"} >= {
        (branch.id, period, start)
        for branch in population.branches
        for period, start in [("day", date(2026, 3, 31)), ("day", date(2026, 4, 1)), ("month", date(2026, 3, 1))]
    }


def test_the_summary_from_the_rollups_equals_the_aggregation_of_the_rows(population):
    blr, mum, delhi = population.branches
    # Something billed and paid at every branch on every day, so that no day of a range can go missing unseen.
    invoices = [
        make_invoice(branch=branch, patient=population.patients[0], lines=population.lines(), on=day)
        for branch in population.branches
        for day in sorted(set(DAYS))
    ]
    for invoice in invoices:
        if invoice.grand_total >= 1:
            pay(invoice, "1.00", on=invoice.date)
    for _ in range(150):
        population.change(invoices)
    everything = ApiClientFactory(allowed_scopes=["billing:read"])
    two_branches = ApiClientFactory(allowed_scopes=["billing:read"], branches=[blr, delhi])
    ranges = [
        (date(2026, 3, 31), date(2026, 4, 1)),  # the financial year's last and first day
        (date(2026, 3, 1), date(2026, 3, 31)),  # one whole month
        (date(2026, 3, 31), date(2026, 3, 31)),
        (date(2026, 4, 1), date(2026, 4, 30)),
        (date(2026, 3, 2), date(2026, 5, 1)),  # a day short of a month at each end
        (date(2026, 2, 28), date(2026, 4, 30)),
        (date(2026, 1, 1), date(2026, 12, 31)),
        (date(2025, 4, 1), date(2026, 3, 31)),  # a financial year
        (date(2026, 4, 1), date(2027, 3, 31)),
    ]
    rng = random.Random(3)
    for _ in range(15):
        first = date(2026, 2, 1) + timedelta(days=rng.randint(0, 150))
        ranges.append((first, first + timedelta(days=rng.randint(0, 120))))

    for date_from, date_to in ranges:
        for api_client, branch_id, branch_ids in [
            (everything, None, None),
            (everything, mum.id, {mum.id}),
            (two_branches, None, {blr.id, delhi.id}),
        ]:
            summary = selectors.billing_summary(
                client=api_client, date_from=date_from, date_to=date_to, branch_id=branch_id
            )
            assert summary == aggregated(date_from, date_to, branch_ids), (date_from, date_to, branch_ids)
    whole = selectors.billing_summary(client=everything, date_from=date(2026, 1, 1), date_to=date(2026, 12, 31))
    assert whole["total_billed"] > 0
    assert len(whole["revenue_by_department"]) == 3


def days_covered(periods: Q) -> list[date]:
    """The days the rollup rows selected by `periods` sum, each as often as it is counted."""
    if periods.connector == Q.OR:
        return [day for child in periods.children for day in days_covered(child)]
    lookups = dict(periods.children)
    first = lookups["period_start__gte"]
    last = lookups["period_start__lte"] if "period_start__lte" in lookups else lookups["period_start__lt"] - ONE_DAY
    starts = [first + n * ONE_DAY for n in range((last - first).days + 1)]
    if lookups["period"] == "day":
        return starts
    return [  # month rows start on the 1st
        start.replace(day=day)
        for start in starts
        if start.day == 1
        for day in range(1, calendar.monthrange(start.year, start.month)[1] + 1)
    ]


def test_the_periods_of_a_range_cover_each_of_its_days_exactly_once():
    rng = random.Random(11)
    starts = [date(2025, 12, 31), date(2026, 1, 1), date(2026, 2, 28), date(2028, 2, 29), date(2026, 3, 31)]
    cases = [(start, start + timedelta(days=length)) for start in starts for length in (0, 1, 27, 28, 30, 31, 365)]
    for _ in range(300):
        first = date(2025, 1, 1) + timedelta(days=rng.randint(0, 1500))
        cases.append((first, first + timedelta(days=rng.randint(0, 800))))

    # The ends of the calendar: no date past date.max (or before date.min) is formed.
    cases += [(date(9999, 11, 15), date.max), (date(9999, 12, 1), date.max), (date.min, date(1, 2, 3))]

    for date_from, date_to in cases:
        expected = [date_from + n * ONE_DAY for n in range((date_to - date_from).days + 1)]
        assert sorted(days_covered(selectors.rollup_periods(date_from, date_to))) == expected, (date_from, date_to)


def test_the_summary_of_all_time_adds_up(blr, patient, medicine):
    invoice = make_invoice(branch=blr, patient=patient, department=medicine, on=date(2026, 3, 31))
    pay(invoice, "80.00", on=date(2026, 4, 1))
    api_client = ApiClientFactory(allowed_scopes=["billing:read"])

    summary = selectors.billing_summary(client=api_client, date_from=date.min, date_to=date.max)

    assert summary == aggregated(date.min, date.max, None)
    assert (summary["total_billed"], summary["total_collected"]) == (D("1180.00"), D("80.00"))


def test_the_summary_reads_only_the_rollups_and_the_department_names(blr, patient, medicine):
    invoice = make_invoice(branch=blr, patient=patient, department=medicine, on=date(2026, 3, 31))
    pay(invoice, "10.00", on=date(2026, 4, 1))
    api_client = ApiClientFactory(allowed_scopes=["billing:read"])

    with CaptureQueriesContext(connection) as captured:
        summary = selectors.billing_summary(client=api_client, date_from=date(2026, 3, 15), date_to=date(2026, 5, 31))

    assert summary["total_billed"] == D("1180.00")
    assert summary["total_outstanding"] == D("1170.00")
    assert summary["revenue_by_department"] == {"General Medicine": D("1000.00")}
    sql = " ".join(query["sql"] for query in captured.captured_queries)
    for table in ("billing_invoice", "billing_lineitem", "billing_payment"):
        assert f'"{table}"' not in sql


def test_a_department_is_listed_for_a_billed_line_of_0_and_dropped_when_its_invoices_are_cancelled(
    blr, patient, medicine, ortho
):
    free = make_invoice(branch=blr, patient=patient, lines=[line(ortho, rate="0.00")], on=date(2026, 3, 31))
    make_invoice(branch=blr, patient=patient, department=medicine, finalize=False, on=date(2026, 3, 31))  # draft
    api_client = ApiClientFactory(allowed_scopes=["billing:read"])

    def revenue() -> dict[str, Decimal]:
        summary = selectors.billing_summary(client=api_client, date_from=date(2026, 3, 1), date_to=date(2026, 3, 31))
        return summary["revenue_by_department"]

    assert revenue() == {"Orthopaedics": D("0.00")}
    services.invoice_cancel(invoice=free, reason="Raised in error")
    assert revenue() == {}
    assert kept() == sql_rows(FROM_SCRATCH) == set()


class Rollback(Exception):
    pass


def test_a_rolled_back_transaction_leaves_the_rollups_unchanged(blr, mum, patient, medicine, ortho):
    paid = make_invoice(branch=blr, patient=patient, department=medicine, on=date(2026, 3, 31))
    pay(paid, "100.00", mode="upi", reference="U1", on=date(2026, 4, 1))
    draft = make_invoice(branch=blr, patient=patient, department=ortho, finalize=False, on=date(2026, 4, 1))
    open_invoice = make_invoice(branch=mum, patient=patient, department=ortho, on=date(2026, 3, 30))
    before = kept_exactly()

    def change_then_fail() -> None:
        with transaction.atomic():
            services.invoice_finalize(invoice=draft)
            pay(paid, "1080.00", mode="card", reference="C1", on=date(2026, 4, 1))
            services.invoice_cancel(invoice=open_invoice, reason="Wrong patient")
            make_invoice(branch=mum, patient=patient, department=medicine, on=date(2026, 3, 31))
            assert kept_exactly() != before  # the transaction sees its own changes
            raise Rollback

    with pytest.raises(Rollback):
        change_then_fail()

    assert kept_exactly() == before
    assert_exact()


def test_a_refused_payment_changes_no_rollup(client, writer, blr, patient, medicine):
    invoice = make_invoice(branch=blr, patient=patient, department=medicine, on=date(2026, 3, 31))
    pay(invoice, "100.00", mode="neft", reference="N1", on=date(2026, 4, 1))
    draft = make_invoice(branch=blr, patient=patient, department=medicine, finalize=False, on=date(2026, 3, 31))
    before = kept_exactly()
    url = f"{INVOICES}/{invoice.id}/payments"

    over = post_json(client, writer, url, {"amount": "1080.01", "payment_mode": "cash"})
    twice = post_json(client, writer, url, {"amount": "1.00", "payment_mode": "neft", "reference": "N1"})
    of_draft = post_json(client, writer, f"{INVOICES}/{draft.id}/payments", {"amount": "1.00", "payment_mode": "cash"})
    with pytest.raises((FieldError, Conflict)):
        pay(invoice, "0.00")

    # Past the service's checks, the database refuses a paid sum above the total: the payment row and its
    # rollup rows go with the statement's transaction.
    def overpay_with_sql() -> None:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(
                "INSERT INTO billing_payment (id, invoice_id, amount, payment_mode, reference, payment_date, "
                "recorded_at, recorded_by, branch_id) "
                "VALUES (%s, %s, 2000, 'cash', '', '2026-04-01', now(), 'sql', %s)",
                [uuid.uuid4(), invoice.id, blr.id],
            )
            cursor.execute("UPDATE billing_invoice SET paid = paid + 2000, status = 'paid' WHERE id = %s", [invoice.id])

    with pytest.raises(IntegrityError, match="invoice_credited_refunded_bounded"):
        overpay_with_sql()

    assert [over.status_code, twice.status_code, of_draft.status_code] == [400, 409, 409]
    assert kept_exactly() == before
    assert Payment.objects.count() == 1


def test_what_a_payment_was_shared_by_is_fixed_once_its_invoice_is_no_longer_a_draft(blr, patient, medicine, ortho):
    lines = [line(medicine), line(ortho, rate="250.00", tax_rate="5")]
    invoice = make_invoice(branch=blr, patient=patient, lines=lines, on=date(2026, 3, 31))
    other = make_invoice(branch=blr, patient=patient, department=medicine, on=date(2026, 3, 31))
    pay(invoice, "100.00", mode="cash", on=date(2026, 4, 1))
    before = kept_exactly()
    changes = [
        ("UPDATE billing_lineitem SET amount = amount + 1 WHERE invoice_id = %s", [invoice.id]),
        ("UPDATE billing_lineitem SET invoice_id = %s WHERE invoice_id = %s", [other.id, invoice.id]),
        ("UPDATE billing_invoice SET grand_total = grand_total + 1 WHERE id = %s", [invoice.id]),
    ]
    for sql, params in changes:
        with pytest.raises(IntegrityError, match="fixed"), transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(sql, params)

    assert kept_exactly() == before
    assert sorted(LineItem.objects.filter(invoice=invoice).values_list("amount", flat=True)) == [
        D("262.50"),
        D("1180.00"),
    ]
    # 100.00 over 1180.00 (General Medicine) and 262.50 (Orthopaedics) of 1442.50.
    shares = dict(CollectionRollup.objects.values_list("department__name", "amount"))
    assert shares == {"General Medicine": D("81.802426343154"), "Orthopaedics": D("18.197573656846")}
    # A draft's lines still change: nothing was recorded against it.
    draft = make_invoice(branch=blr, patient=patient, department=medicine, finalize=False, on=date(2026, 4, 1))
    with connection.cursor() as cursor:
        cursor.execute("UPDATE billing_lineitem SET department_id = %s WHERE invoice_id = %s", [ortho.id, draft.id])
    assert LineItem.objects.get(invoice=draft).department == ortho


def test_changes_written_with_sql_many_rows_at_a_time_are_followed(population):
    invoices: list[Invoice] = []
    for _ in range(80):
        population.change(invoices)
    billed = [population.invoice(finalize=True).id for _ in range(6)]
    with connection.cursor() as cursor:
        # One statement cancels invoices of several branches and days; another pays others in full.
        cursor.execute(
            "UPDATE billing_invoice SET status = 'cancelled', cancelled_at = now(), cancellation_reason = 'sql' "
            "WHERE id = ANY(%s)",
            [billed[:3]],
        )
        cursor.execute(
            "INSERT INTO billing_payment (id, invoice_id, amount, payment_mode, reference, payment_date, recorded_at, "
            "recorded_by, branch_id) SELECT gen_random_uuid(), id, grand_total, 'cash', '', date, now(), 'sql', "
            "branch_id FROM billing_invoice WHERE id = ANY(%s) AND grand_total > 0",
            [billed[3:]],
        )
        cursor.execute(
            "UPDATE billing_invoice SET paid = grand_total, status = 'paid' WHERE id = ANY(%s) AND grand_total > 0",
            [billed[3:]],
        )
    assert_exact()
    # Lines of a billed invoice moved to another department behind the services' back: refused (billing 0008;
    # deleting them is refused by 0005), since payments were shared over the lines as they stood.
    victim = LineItem.objects.filter(billed=True).exclude(department=population.departments[0]).first()
    assert victim is not None
    before = kept_exactly()
    with (
        pytest.raises(IntegrityError, match="its amount, department and invoice are fixed"),
        transaction.atomic(),
        connection.cursor() as cursor,
    ):
        cursor.execute(
            "UPDATE billing_lineitem SET department_id = %s WHERE invoice_id = %s",
            [population.departments[0].id, victim.invoice_id],
        )
    assert LineItem.objects.get(pk=victim.pk).department_id == victim.department_id
    assert kept_exactly() == before

    with connection.cursor() as cursor:
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")  # TRUNCATE refuses pending (deferred) FK checks
        cursor.execute("TRUNCATE billing_payment")
    assert not any(row[0] == "payment" for row in kept_exactly())
    assert_exact()


def test_generated_scale_data_loaded_with_copy_has_exact_rollups():
    out = StringIO()
    call_command(
        "generate_scale_data",
        *["--patients", "200", "--invoices", "400", "--doctors", "6", "--branches", "3", "--today", "2026-11-21"],
        stdout=out,
    )

    assert Invoice.objects.count() == 400
    assert_exact()


@pytest.mark.django_db(transaction=True)
class TestConcurrency:
    """Real threads on their own connections, all adding to the same rollup rows."""

    def test_20_concurrent_payments_of_one_branch_mode_and_day_leave_the_rollups_exact(
        self, writer, blr, patient, medicine
    ):
        invoices = [
            make_invoice(branch=blr, patient=patient, department=medicine, on=date(2026, 3, 31)) for _ in range(THREADS)
        ]
        payload = {"amount": "100.25", "payment_mode": "upi", "payment_date": "2026-04-01"}
        work = [
            api_post(writer, f"{INVOICES}/{invoice.id}/payments", {**payload, "reference": f"U-{n}"})
            for n, invoice in enumerate(invoices)
        ]

        results = all_at_once(work)

        assert [status for status, _ in results] == [201] * THREADS, results
        assert_exact()
        # 20 x 100.25 collected on 1 April, against 20 x 1180.00 billed on 31 March.
        assert kept() == {
            ("invoice", blr.id, "day", date(2026, 3, 31), "", D("23600.00"), D("21595.00")),
            ("invoice", blr.id, "month", date(2026, 3, 1), "", D("23600.00"), D("21595.00")),
            ("line", blr.id, "day", date(2026, 3, 31), str(medicine.id), 20, D("20000.00")),
            ("line", blr.id, "month", date(2026, 3, 1), str(medicine.id), 20, D("20000.00")),
            ("payment", blr.id, "day", date(2026, 4, 1), "upi", D("2005.00"), 0),
            ("payment", blr.id, "month", date(2026, 4, 1), "upi", D("2005.00"), 0),
        }
        # The day's collections by department: all of it to the invoices' one department.
        assert set(CollectionRollup.objects.values_list("day", "branch_id", "flow", "department_id", "amount")) == {
            (date(2026, 4, 1), blr.id, "received", medicine.id, D("2005.00"))
        }

    def test_concurrent_finalizations_cancellations_and_payments_of_one_branch_and_day_leave_the_rollups_exact(
        self, writer, blr, patient, medicine, ortho
    ):
        def invoice(finalize: bool) -> Invoice:
            lines = [line(medicine), line(ortho, rate="250.00", tax_rate="5")]
            return make_invoice(branch=blr, patient=patient, lines=lines, finalize=finalize, on=date(2026, 3, 31))

        drafts = [invoice(False) for _ in range(7)]
        to_cancel = [invoice(True) for _ in range(6)]
        to_pay = [invoice(True) for _ in range(7)]
        work: list[Callable[[], Any]] = [api_post(writer, f"{INVOICES}/{d.id}/finalize", {}) for d in drafts]
        work += [api_post(writer, f"{INVOICES}/{c.id}/cancel", {"reason": "Duplicate"}) for c in to_cancel]
        work += [
            api_post(writer, f"{INVOICES}/{p.id}/payments", {"amount": "50.00", "payment_mode": "cash"}) for p in to_pay
        ]

        results = all_at_once(work)

        assert [status for status, _ in results] == [200] * 13 + [201] * 7, results
        assert_exact()
        summary = selectors.billing_summary(
            client=ApiClientFactory(allowed_scopes=["billing:read"]),
            date_from=date(2026, 3, 31),
            date_to=date(2026, 3, 31),
        )
        assert summary["total_billed"] == 14 * D("1442.50")
        assert summary["total_outstanding"] == 14 * D("1442.50") - 7 * D("50.00")
        assert summary["revenue_by_department"] == {"General Medicine": D("14000.00"), "Orthopaedics": D("3500.00")}
