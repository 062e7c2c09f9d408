"""generate_scale_data's accounting (docs/api-rules.md §12) at small scale: catalogue entries and lines carry a
tax category and HSN/SAC that agree with their rate; credit notes reverse tax exactly as billing.services
does, are numbered per branch and financial year with no gaps and match their counters; `credited` and
`refunded` are the sums of the notes and refunds and the statuses follow billing.services' rules; dates run
forward and never past today; the rollups filled by the triggers during the COPY equal an aggregation from
scratch; and the services and the API carry on from the generated rows."""

from __future__ import annotations

import re
from decimal import Decimal
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command
from django.db import transaction
from django.utils import timezone

from billing import numbering, services
from billing.models import (
    CreditNote,
    CreditNoteLine,
    CreditNoteNumberCounter,
    Invoice,
    LineItem,
)
from clinic.lib.tax import HSN_SAC_PATTERN, STATUTORY_RATES, LineTax, credit_line_tax
from tests.billing.factories import INVOICES, post_json
from tests.helpers import IST, sql_rows

pytestmark = pytest.mark.django_db

D = Decimal
TODAY = "2026-11-21"
SMALL = ["--patients", "300", "--invoices", "3000", "--doctors", "6", "--branches", "4"]

# Every row the summary's rollups should hold, from the rows themselves: (rollup, branch, period, first day,
# department or mode, figures...). Rows whose figures are all zero are left out on both sides.
FROM_SCRATCH = """
SELECT 'invoice', branch_id, period, start, '', sum(grand_total),
       sum(GREATEST(grand_total - credited - paid + refunded, 0))
  FROM billing_invoice
 CROSS JOIN LATERAL (VALUES ('day', date), ('month', date_trunc('month', date::timestamp)::date)) p (period, start)
 WHERE status IN ('finalized', 'partially_paid', 'paid') GROUP BY 2, 3, 4
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
SELECT 'credit', i.branch_id, period, start, '', sum(c.total), 0
  FROM billing_creditnote c JOIN billing_invoice i ON i.id = c.invoice_id
 CROSS JOIN LATERAL (VALUES ('day', c.date), ('month', date_trunc('month', c.date::timestamp)::date)) p (period, start)
 GROUP BY 2, 3, 4
UNION ALL
SELECT 'refund', i.branch_id, period, start, '', sum(r.amount), 0
  FROM billing_refund r JOIN billing_invoice i ON i.id = r.invoice_id
 CROSS JOIN LATERAL (VALUES ('day', r.refund_date),
                            ('month', date_trunc('month', r.refund_date::timestamp)::date)) p (period, start)
 GROUP BY 2, 3, 4
"""
ACCOUNTING_CHECKSUM = """
SELECT md5(string_agg(concat_ws(',', c.id, c.credit_note_number, c.date, c.created_at, c.total, l.line_id, l.amount,
                                l.quantity), ';' ORDER BY c.id, l.id))
       || md5((SELECT string_agg(concat_ws(',', id, amount, payment_mode, reference, refund_date), ';' ORDER BY id)
                 FROM billing_refund))
  FROM billing_creditnote c JOIN billing_creditnoteline l ON l.credit_note_id = c.id
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


def generate(*extra: str) -> str:
    out = StringIO()
    call_command("generate_scale_data", *SMALL, *extra, stdout=out)
    return out.getvalue()


def scalar(sql: str) -> Any:
    (row,) = sql_rows(sql) or {(None,)}
    return row[0]


def nonzero(rows: set[tuple[Any, ...]]) -> set[tuple[Any, ...]]:
    return {row for row in rows if row[5] != 0 or row[6] != 0}


@pytest.fixture
def generated() -> str:
    return generate("--seed", "4", "--today", TODAY)


def test_catalogue_and_lines_carry_a_tax_category_and_hsn_sac_that_agree_with_the_rate(generated: str) -> None:
    for table in ("billing_billableservice", "billing_lineitem", "billing_creditnoteline"):
        rows = sql_rows(f"SELECT DISTINCT tax_category, tax_rate, hsn_sac FROM {table}")  # noqa: S608
        assert rows, table
        for category, rate, code in rows:
            assert re.fullmatch(HSN_SAC_PATTERN, code), (table, code)
            if category == "taxable":
                assert rate in STATUTORY_RATES, (table, rate)
            else:
                assert (category, rate) == ("exempt", 0), table
                assert code.startswith("9993"), (table, code)  # healthcare services
    # Healthcare is exempt; the goods and the cosmetic procedures are taxable, each at its rate.
    assert sql_rows("SELECT DISTINCT tax_category, tax_rate, hsn_sac FROM billing_billableservice "
                    "WHERE tax_category = 'taxable'") == {("taxable", D("5.00"), "300590"),
                                                          ("taxable", D("18.00"), "999722")}  # fmt: skip
    assert sql_rows("SELECT DISTINCT hsn_sac FROM billing_billableservice WHERE tax_category = 'exempt'") == {
        ("999312",),
        ("999314",),
        ("999316",),
    }
    assert scalar("SELECT count(*) FROM billing_lineitem l JOIN billing_billableservice s ON s.id = l.service_id "
                  "WHERE (l.tax_category, l.tax_rate, l.hsn_sac) <> (s.tax_category, s.tax_rate, s.hsn_sac)") == 0  # fmt: skip
    assert scalar("SELECT count(DISTINCT tax_category) FROM billing_lineitem") == 2


def test_credited_and_refunded_are_the_sums_and_the_status_follows_the_settlement_rules(generated: str) -> None:
    assert (
        scalar("""
        SELECT count(*) FROM billing_invoice i
         WHERE i.credited <> coalesce((SELECT sum(total) FROM billing_creditnote c WHERE c.invoice_id = i.id), 0)
            OR i.refunded <> coalesce((SELECT sum(amount) FROM billing_refund r WHERE r.invoice_id = i.id), 0)
            OR i.paid <> coalesce((SELECT sum(amount) FROM billing_payment p WHERE p.invoice_id = i.id), 0)""")
        == 0
    )
    # billing.services._settle: nothing left to collect is paid, some net payment partially_paid, else finalized.
    assert (
        scalar("""
        SELECT count(*) FROM billing_invoice WHERE status IN ('finalized', 'partially_paid', 'paid') AND status <> CASE
            WHEN GREATEST(grand_total - credited - (paid - refunded), 0) = 0 THEN 'paid'
            WHEN paid - refunded > 0 THEN 'partially_paid' ELSE 'finalized' END""")
        == 0
    )
    assert scalar("SELECT count(*) FROM billing_invoice WHERE status NOT IN " "('finalized', 'partially_paid', 'paid')"
                  " AND (credited, refunded, paid) <> (0, 0, 0)") == 0  # fmt: skip
    billed = scalar("SELECT count(*) FROM billing_invoice WHERE status IN ('finalized', 'partially_paid', 'paid')")
    credited = scalar("SELECT count(DISTINCT invoice_id) FROM billing_creditnote")
    assert 0.01 * billed < credited < 0.03 * billed
    assert scalar("SELECT max(n) FROM (SELECT count(*) n FROM billing_creditnote GROUP BY invoice_id) c") == 1
    # Paid then credited: most were refunded what they were owed, some still are owed (refund_due > 0).
    assert scalar("SELECT count(*) FROM billing_invoice WHERE credited > 0 AND refunded > 0") > 0
    assert scalar("SELECT count(*) FROM billing_invoice WHERE paid - refunded > grand_total - credited") > 0
    # Refunds with no credit note reopen a paid invoice (partially_paid, or finalized when all went back).
    reopened = sql_rows("SELECT status FROM billing_invoice WHERE refunded > 0 AND credited = 0")
    assert reopened
    assert {status for (status,) in reopened} <= {"partially_paid", "finalized"}
    # Credited in full with nothing paid: settled (billing.services._settle), as the constraint allows.
    assert scalar("SELECT count(*) FROM billing_invoice WHERE credited = grand_total AND status <> 'paid'") == 0


def test_credit_note_lines_reverse_tax_as_the_services_do_and_copy_the_invoice_line(generated: str) -> None:
    credit_lines = list(CreditNoteLine.objects.select_related("line", "credit_note__invoice"))
    assert len(credit_lines) > 40
    kinds = set()
    for credit in credit_lines:
        line: LineItem = credit.line
        assert credit.credit_note.invoice_id == line.invoice_id
        assert (credit.service_name, credit.hsn_sac, credit.tax_category, credit.tax_rate) == (
            line.service_name,
            line.hsn_sac,
            line.tax_category,
            line.tax_rate,
        )
        remaining = LineTax(line.taxable_amount, D("0.00"), line.taxable_amount, line.cgst, line.sgst, line.igst)
        expected = credit_line_tax(
            taxable=credit.taxable_amount,
            tax_rate=line.tax_rate,
            interstate=credit.credit_note.invoice.interstate,
            remaining=remaining,
        )
        assert (credit.cgst, credit.sgst, credit.igst, credit.amount) == (
            expected.cgst,
            expected.sgst,
            expected.igst,
            expected.amount,
        )
        assert D("0.00") < credit.taxable_amount <= line.taxable_amount
        if credit.quantity is not None:  # the whole line
            assert (credit.quantity, credit.taxable_amount) == (line.quantity, line.taxable_amount)
        kinds.add(("whole" if credit.quantity is not None else "amount", line.tax_category))
    assert {("whole", "exempt"), ("amount", "exempt")} <= kinds
    assert any(category == "taxable" for _, category in kinds)
    assert (
        scalar("""
        SELECT count(*) FROM billing_creditnote c JOIN (
            SELECT credit_note_id, sum(taxable_amount) taxable, sum(cgst) cgst, sum(sgst) sgst, sum(igst) igst,
                   sum(amount) amount, count(*) n FROM billing_creditnoteline GROUP BY 1) l ON l.credit_note_id = c.id
         WHERE (c.taxable, c.cgst, c.sgst, c.igst, c.total) <> (l.taxable, l.cgst, l.sgst, l.igst, l.amount)
            OR l.n NOT BETWEEN 1 AND 2""")
        == 0
    )
    assert scalar("SELECT count(*) FROM billing_creditnote c WHERE NOT EXISTS "
                  "(SELECT 1 FROM billing_creditnoteline l WHERE l.credit_note_id = c.id)") == 0  # fmt: skip


def test_credit_notes_are_numbered_in_order_of_issue_without_gaps_and_match_the_counters(generated: str) -> None:
    assert (
        scalar("""
        SELECT count(*) FROM (
            SELECT branch_id, financial_year, count(*) n, min(split_part(credit_note_number, '/', 4)::int) lo,
                   max(split_part(credit_note_number, '/', 4)::int) hi
              FROM billing_creditnote GROUP BY 1, 2) s
         FULL JOIN billing_creditnotenumbercounter c USING (branch_id, financial_year)
         WHERE s.lo IS DISTINCT FROM 1 OR s.hi IS DISTINCT FROM s.n OR c.last_number IS DISTINCT FROM s.hi""")
        == 0
    )
    notes = list(CreditNote.objects.select_related("branch").order_by("branch_id", "credit_note_number"))
    years = set()
    for note in notes:
        year = numbering.financial_year(note.date)
        assert note.financial_year == year
        number = int(note.credit_note_number.rsplit("/", 1)[1])
        assert note.credit_note_number == numbering.format_credit_note_number(note.branch.code, year, number)
        years.add(year)
    assert len(years) >= 2
    # Later numbers are never issued on an earlier day, nor before the previous note of the series.
    assert (
        scalar("""
        SELECT count(*) FROM (
            SELECT date, created_at, lag(date) OVER w prev_date, lag(created_at) OVER w prev_at
              FROM billing_creditnote WINDOW w AS (PARTITION BY branch_id, financial_year ORDER BY credit_note_number)
        ) s WHERE date < prev_date OR created_at < prev_at""")
        == 0
    )


def test_credit_notes_and_refunds_come_after_what_they_follow_and_never_after_today(generated: str) -> None:
    assert scalar("""
        SELECT count(*) FROM billing_creditnote c JOIN billing_invoice i ON i.id = c.invoice_id
         WHERE c.date < i.date OR c.date > '2026-11-21' OR c.created_at < i.finalized_at OR c.branch_id <> i.branch_id
            OR c.date < coalesce((SELECT max(payment_date) FROM billing_payment p WHERE p.invoice_id = i.id), i.date)
            OR c.created_at <= coalesce((SELECT max(recorded_at) FROM billing_payment p WHERE p.invoice_id = i.id),
                                        i.finalized_at - interval '1 minute')""") == 0  # fmt: skip
    assert scalar("""
        SELECT count(*) FROM billing_refund r JOIN billing_invoice i ON i.id = r.invoice_id
         WHERE r.refund_date < i.date OR r.refund_date > '2026-11-21' OR r.branch_id <> i.branch_id
            OR r.refund_date < coalesce((SELECT max(date) FROM billing_creditnote c WHERE c.invoice_id = i.id), i.date)
            OR r.recorded_at <= coalesce((SELECT max(created_at) FROM billing_creditnote c WHERE c.invoice_id = i.id),
                                         i.finalized_at)
            OR (r.payment_mode = 'cash') <> (r.reference = '')""") == 0  # fmt: skip


def test_the_rollups_filled_during_the_copy_equal_an_aggregation_from_scratch(generated: str) -> None:
    expected = nonzero(sql_rows(FROM_SCRATCH))
    assert {row[0] for row in expected} == {"invoice", "line", "payment", "credit", "refund"}
    actual = nonzero(sql_rows(KEPT))
    assert actual - expected == set()
    assert expected - actual == set()
    outstanding = scalar("SELECT sum(GREATEST(0, grand_total - credited - paid + refunded)) FROM billing_invoice "
                         "WHERE status IN ('finalized', 'partially_paid', 'paid')")  # fmt: skip
    assert scalar("SELECT sum(outstanding) FROM billing_invoicerollup WHERE period = 'month'") == outstanding
    assert scalar("SELECT sum(amount) FROM billing_creditrollup WHERE period = 'day'") == scalar(
        "SELECT sum(total) FROM billing_creditnote"
    )
    assert scalar("SELECT sum(amount) FROM billing_refundrollup WHERE period = 'month'") == scalar(
        "SELECT sum(amount) FROM billing_refund"
    )


def checksum_of_run(seed: str) -> str:
    """Generate into a savepoint, checksum the credit notes and refunds, roll back."""
    with transaction.atomic():
        generate("--seed", seed, "--today", TODAY)
        value = str(scalar(ACCOUNTING_CHECKSUM))
        transaction.set_rollback(True)
    return value


def test_the_same_seed_gives_the_same_credit_notes_and_refunds() -> None:
    first, again, other = checksum_of_run("9"), checksum_of_run("9"), checksum_of_run("10")
    assert first == again
    assert first != other


def test_the_services_and_the_api_carry_on_from_the_generated_rows(client, token_for) -> None:
    generate("--seed", "5")  # dated up to today, as the services date what they issue
    partial = (
        CreditNoteLine.objects.filter(quantity__isnull=True, tax_category="exempt")
        .select_related("credit_note__invoice__branch", "line")
        .order_by("credit_note__credit_note_number")
        .first()
    )
    assert partial is not None
    invoice, line = partial.credit_note.invoice, partial.line
    year = numbering.financial_year(timezone.localtime(timezone.now(), IST).date())
    counter = CreditNoteNumberCounter.objects.filter(branch=invoice.branch, financial_year=year).first()
    last = counter.last_number if counter else 0

    note = services.credit_note_issue(
        invoice=invoice, reason="The rest of the line", lines=[services.CreditLineInput(line_id=line.id)]
    )

    assert note.credit_note_number == numbering.format_credit_note_number(invoice.branch.code, year, last + 1)
    assert note.taxable == line.taxable_amount - partial.taxable_amount
    assert note.total == line.amount - partial.amount
    invoice.refresh_from_db()
    assert invoice.credited == partial.credit_note.total + note.total
    if invoice.refund_due:
        refund = services.refund_record(invoice=invoice, amount=invoice.refund_due, payment_mode="cash")
        invoice.refresh_from_db()
        assert (refund.amount, invoice.refund_due, invoice.balance, invoice.status) == (
            refund.amount,
            D("0.00"),
            D("0.00"),
            "paid",
        )

    # The bench's request: 10 rupees of taxable value off a line of a billed invoice with no credit note.
    target = (
        LineItem.objects.filter(invoice__status__in=["finalized", "partially_paid", "paid"], taxable_amount__gte=10)
        .exclude(invoice__credit_notes__isnull=False)
        .select_related("invoice__branch")
        .order_by("id")
        .first()
    )
    assert target is not None
    response = post_json(
        client,
        token_for(["billing:read", "billing:write"]),
        f"{INVOICES}/{target.invoice_id}/credit-notes",
        {"reason": "Bench", "lines": [{"line_id": str(target.id), "amount": 10}]},
    )
    assert response.status_code == 201, response.content
    issued = Invoice.objects.get(id=target.invoice_id)
    assert issued.credited == CreditNote.objects.get(invoice=issued).total >= D("10.00")
