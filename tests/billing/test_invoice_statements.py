"""billing.selectors reads an invoice's detail with constant statements (the head with its branch and patient,
its lines with their departments, payments, credit notes with their lines, refunds); each must load what the
ORM reads they stand for load, row for row and field for field, in the same order, for every kind of client:
an invoice with two lines, two payments, two credit notes of two lines and a refund, a draft with nothing
but lines, and one of another branch that a limited client must not find."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.db.models import Prefetch, prefetch_related_objects
from django.forms.models import model_to_dict
from django.utils import timezone

from billing import services
from billing.models import CreditNote, CreditNoteLine, Invoice, LineItem, Payment, Refund
from billing.selectors import invoice_detail_load, invoice_get
from clinic.errors import NotFound
from tests.billing.factories import line, make_invoice, pay
from tests.factories import ApiClientFactory, DepartmentFactory

pytestmark = pytest.mark.django_db
D = Decimal


def orm_detail(client: Any, invoice_id: Any) -> Invoice | None:
    """The reads the statements stand for (billing.selectors before them): the head through the rule, then
    prefetch_related over everything the detail shows."""
    invoices = Invoice.objects.all() if client is None else Invoice.objects.visible_to(client)
    invoice = invoices.filter(id=invoice_id).select_related("branch", "patient").first()
    if invoice is None:
        return None
    notes = CreditNote.objects.order_by("created_at", "id").prefetch_related(
        Prefetch("lines", queryset=CreditNoteLine.objects.order_by("position", "id"))
    )
    prefetch_related_objects(
        [invoice],
        Prefetch("line_items", queryset=LineItem.objects.select_related("department").order_by("position", "id")),
        Prefetch("payments", queryset=Payment.objects.order_by("recorded_at", "id")),
        Prefetch("credit_notes", queryset=notes),
        Prefetch("refunds", queryset=Refund.objects.order_by("recorded_at", "id")),
    )
    return invoice


def fields(instance: Any) -> dict[str, Any]:
    return {**model_to_dict(instance), "pk": instance.pk, "db": instance._state.db, "adding": instance._state.adding}


def everything(invoice: Invoice) -> dict[str, Any]:
    """Every row the detail shows, with every field, in order."""
    return {
        "invoice": fields(invoice),
        "branch": fields(invoice.branch),
        "patient": fields(invoice.patient),
        "lines": [(fields(item), fields(item.department)) for item in invoice.line_items.all()],
        "payments": [fields(payment) for payment in invoice.payments.all()],
        "credit_notes": [
            (fields(note), [fields(part) for part in note.lines.all()]) for note in invoice.credit_notes.all()
        ],
        "refunds": [fields(refund) for refund in invoice.refunds.all()],
    }


@pytest.fixture
def invoices(blr: Any, mum: Any, patient: Any, visitor: Any) -> list[Invoice]:
    medicine, lab = DepartmentFactory(name="Medicine"), DepartmentFactory(name="Laboratory")
    full = make_invoice(
        branch=blr,
        patient=patient,
        lines=[line(medicine), line(lab, rate="400.00", quantity="3", name="CBC")],
        on=timezone.localdate() - timedelta(days=2),
    )
    pay(full, "1000.00", mode="upi", reference="UPI-1")
    pay(full, "1596.00", mode="cash")
    first, second = full.line_items.order_by("position")
    for reason in ("Overcharged", "Test not done"):
        services.credit_note_issue(
            invoice=full,
            reason=reason,
            lines=[
                services.CreditLineInput(line_id=first.id, amount=D("100.00")),
                services.CreditLineInput(line_id=second.id, quantity=D("1")),
            ],
        )
    services.refund_record(invoice=full, amount=D("200.00"), payment_mode="cash")
    draft = make_invoice(branch=blr, patient=patient, lines=[line(medicine)], finalize=False)
    elsewhere = make_invoice(branch=mum, patient=visitor, lines=[line(lab)])
    return [full, draft, elsewhere]


def test_the_statements_load_what_the_orm_reads_do(invoices: list[Invoice], blr: Any, mum: Any):
    full = Invoice.objects.get(pk=invoices[0].pk)
    assert (full.paid, full.credited, full.refunded) != (0, 0, 0)
    assert full.credit_notes.count() == 2
    found = missing = 0
    for client in (ApiClientFactory(), ApiClientFactory(branches=[blr]), ApiClientFactory(branches=[mum]), None):
        for invoice in invoices:
            expected = orm_detail(client, invoice.id)
            if client is None:
                got = invoice_detail_load(invoice.id)
            elif expected is None:
                with pytest.raises(NotFound):
                    invoice_get(client=client, invoice_id=str(invoice.id))
                with pytest.raises(NotFound):
                    invoice_get(client=client, invoice_id=str(invoice.id), detail=False)
                missing += 1
                continue
            else:
                got = invoice_get(client=client, invoice_id=str(invoice.id))
                head = invoice_get(client=client, invoice_id=str(invoice.id), detail=False)
                assert (fields(head), fields(head.branch), fields(head.patient)) == (
                    fields(expected),
                    fields(expected.branch),
                    fields(expected.patient),
                )
            assert expected is not None
            assert everything(got) == everything(expected)
            found += 1
    assert (found, missing) == (9, 3)
