"""Credit notes and refunds under concurrency, with real threads on their own PostgreSQL connections: never
more credited than an invoice holds, never more refunded than was paid, and credit note numbers consecutive
without gaps or repeats, also when some issuing transactions roll back."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.db import transaction
from django.utils import timezone

from billing import services
from billing.models import CreditNote, CreditNoteNumberCounter, Invoice, Refund
from billing.numbering import financial_year
from tests.billing.factories import INVOICES, make_invoice, pay
from tests.billing.test_concurrency import THREADS, Rollback, api_post
from tests.helpers import all_at_once

pytestmark = pytest.mark.django_db(transaction=True)

D = Decimal


@pytest.fixture
def invoice(blr, patient, medicine):
    """Finalized, one line of 1000.00 at 18 %: 1180.00."""
    return make_invoice(branch=blr, patient=patient, department=medicine)


def test_20_concurrent_credit_notes_of_100_on_a_line_of_1000_accept_exactly_10(writer, invoice):
    line_id = str(invoice.line_items.get().id)
    work = [
        api_post(
            writer,
            f"{INVOICES}/{invoice.id}/credit-notes",
            {"reason": f"r{n}", "lines": [{"line_id": line_id, "amount": 100}]},
        )
        for n in range(THREADS)
    ]

    results = all_at_once(work)

    assert sorted(status for status, _ in results) == [201] * 10 + [400] * 10, results
    stored = Invoice.objects.get()
    assert stored.credited == sum(CreditNote.objects.values_list("total", flat=True), D(0)) == stored.grand_total
    assert (stored.net_total, stored.balance, stored.status) == (D("0.00"), D("0.00"), "paid")
    numbers = sorted(int(n[-5:]) for n in CreditNote.objects.values_list("credit_note_number", flat=True))
    assert numbers == list(range(1, 11))
    # Each 201 reported the invoice as its own note left it: 118.00, 236.00, ... credited, each once.
    credited = sorted(data["invoice"]["credited"] for status, data in results if status == 201)
    assert credited == [float(D("118.00") * k) for k in range(1, 11)]


def test_concurrent_credit_notes_across_invoices_of_a_branch_number_consecutively_despite_rollbacks(
    blr, patient, medicine
):
    invoices = [make_invoice(branch=blr, patient=patient, department=medicine) for _ in range(THREADS)]

    def issue(invoice: Invoice, roll_back: bool):
        def call() -> str:
            try:
                with transaction.atomic():
                    note = services.credit_note_issue(
                        invoice=invoice,
                        reason="x",
                        lines=[services.CreditLineInput(line_id=invoice.line_items.get().id, amount=D("1"))],
                    )
                    if roll_back:
                        raise Rollback
                    return note.credit_note_number
            except Rollback:
                return "rolled back"

        return call

    results = all_at_once([issue(invoice, n % 4 == 0) for n, invoice in enumerate(invoices)])

    numbers = sorted(int(r[-5:]) for r in results if r != "rolled back")
    assert numbers == list(range(1, 16))  # 5 of 20 rolled back: their numbers were given back, none skipped
    year = financial_year(timezone.localdate())
    assert CreditNoteNumberCounter.objects.get(branch=blr, financial_year=year).last_number == 15
    assert CreditNote.objects.count() == 15


def test_20_concurrent_refunds_of_100_against_1180_paid_accept_exactly_11(writer, invoice):
    pay(invoice, "1180.00")
    work = [
        api_post(
            writer, f"{INVOICES}/{invoice.id}/refunds", {"amount": 100, "payment_mode": "upi", "reference": f"R{n}"}
        )
        for n in range(THREADS)
    ]

    results = all_at_once(work)

    assert sorted(status for status, _ in results) == [201] * 11 + [400] * 9, results
    stored = Invoice.objects.get()
    assert stored.refunded == sum(Refund.objects.values_list("amount", flat=True), D(0)) == D("1100.00")
    assert stored.refunded <= stored.paid
    assert (stored.status, stored.balance) == ("partially_paid", D("1100.00"))


def test_a_payment_racing_a_credit_note_never_overpays(writer, invoice):
    """The credit note and the payment of the whole balance race: whichever comes second sees the first."""
    line_id = str(invoice.line_items.get().id)
    work = [
        api_post(writer, f"{INVOICES}/{invoice.id}/payments", {"amount": 1180, "payment_mode": "cash"}),
        api_post(
            writer,
            f"{INVOICES}/{invoice.id}/credit-notes",
            {"reason": "x", "lines": [{"line_id": line_id, "amount": 500}]},
        ),
    ]

    results = all_at_once(work)

    stored = Invoice.objects.get()
    assert stored.net_paid <= stored.grand_total
    assert stored.balance + stored.net_paid - stored.refund_due == stored.net_total
    statuses = [status for status, _ in results]
    # The credit note always succeeds; the payment succeeds only when it came first (then a refund is due).
    assert statuses[1] == 201
    if statuses[0] == 201:
        assert stored.refund_due == D("590.00")
    else:
        assert statuses[0] == 400
        assert stored.paid == D("0.00")
