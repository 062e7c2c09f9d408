"""Invariants PostgreSQL keeps by itself: the copies of branch, date and "billed" on lines and payments
that the summary reads, whatever writes the rows."""

from __future__ import annotations

import uuid
from datetime import date

import pytest
from django.db import IntegrityError, connection, transaction

from billing import services
from billing.models import Invoice, LineItem, Payment
from tests.billing.factories import line, make_invoice, pay

pytestmark = pytest.mark.django_db


def copies(invoice: Invoice) -> set[tuple]:
    return set(LineItem.objects.filter(invoice=invoice).values_list("branch_id", "invoice_date", "billed"))


def test_lines_follow_their_invoice_through_edits_finalization_and_cancellation(blr, patient, medicine):
    draft = make_invoice(branch=blr, patient=patient, department=medicine, finalize=False, on=date(2026, 11, 1))
    services.line_item_add(invoice=draft, item=line(medicine, rate="10.00"))
    assert copies(draft) == {(blr.id, date(2026, 11, 1), False)}

    services.invoice_update(invoice=draft, invoice_date=date(2026, 11, 2))
    assert copies(draft) == {(blr.id, date(2026, 11, 2), False)}

    services.invoice_finalize(invoice=draft)
    assert copies(draft) == {(blr.id, date(2026, 11, 2), True)}

    services.invoice_cancel(invoice=draft, reason="Wrong patient")
    assert copies(draft) == {(blr.id, date(2026, 11, 2), False)}


def test_a_line_written_with_raw_sql_takes_its_invoices_values(blr, mum, patient, medicine):
    invoice = make_invoice(branch=blr, patient=patient, department=medicine, on=date(2026, 11, 2))
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO billing_lineitem (id, invoice_id, position, service_name, department_id, quantity, rate, "
            "discount, tax_rate, taxable_amount, cgst, sgst, igst, amount, branch_id, invoice_date, billed) "
            "VALUES (%s, %s, 9, 'Raw', %s, 1, 0, 0, 0, 0, 0, 0, 0, 0, %s, '2000-01-01', false)",
            [uuid.uuid4(), invoice.id, medicine.id, mum.id],
        )
        cursor.execute("UPDATE billing_lineitem SET billed = false, branch_id = %s", [mum.id])

    assert copies(invoice) == {(blr.id, date(2026, 11, 2), True)}


def test_a_payment_takes_its_invoices_branch(blr, mum, patient, medicine):
    invoice = make_invoice(branch=blr, patient=patient, department=medicine)
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO billing_payment (id, invoice_id, amount, payment_mode, reference, payment_date, recorded_at, "
            "recorded_by, branch_id) VALUES (%s, %s, 1, 'cash', '', '2026-11-02', now(), 'sql', %s)",
            [uuid.uuid4(), invoice.id, mum.id],
        )
    pay(invoice, "1.00")

    assert set(Payment.objects.values_list("branch_id", flat=True)) == {blr.id}


def test_the_branch_of_an_invoice_never_changes(blr, mum, patient, medicine):
    invoice = make_invoice(branch=blr, patient=patient, department=medicine)

    with pytest.raises(IntegrityError, match="never changes"), transaction.atomic():
        Invoice.objects.filter(pk=invoice.pk).update(branch=mum)

    assert Invoice.objects.get().branch_id == blr.id
