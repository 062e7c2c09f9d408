"""Payments and finalizations under concurrency, with real threads on their own PostgreSQL connections:
the paid sum never exceeds the total, and invoice numbers stay consecutive without gaps or repeats, also
when some finalizing transactions roll back."""

from __future__ import annotations

from collections.abc import Callable
from datetime import date
from decimal import Decimal
from typing import Any

import pytest
from django.db import transaction
from django.test import Client

from billing import services
from billing.models import Invoice, InvoiceNumberCounter, Payment
from tests.billing.factories import INVOICES, make_invoice, post_json
from tests.helpers import all_at_once

pytestmark = pytest.mark.django_db(transaction=True)

THREADS = 20


class Rollback(Exception):
    """Raised inside a finalizing transaction to force it to roll back after it took a number."""


def api_post(token: str, url: str, payload: dict[str, Any]) -> Callable[[], tuple[int, dict[str, Any]]]:
    def call() -> tuple[int, dict[str, Any]]:
        response = post_json(Client(), token, url, payload)
        return response.status_code, response.json()

    return call


@pytest.fixture
def invoice(blr, patient, medicine):
    """Finalized, grand total 1180.00."""
    return make_invoice(branch=blr, patient=patient, department=medicine, on=date(2026, 11, 2))


def test_20_concurrent_payments_of_100_against_1180_accept_exactly_11(writer, invoice):
    url = f"{INVOICES}/{invoice.id}/payments"
    work = [
        api_post(writer, url, {"amount": 100, "payment_mode": "upi", "reference": f"UPI-{n}"}) for n in range(THREADS)
    ]

    results = all_at_once(work)

    statuses = sorted(status for status, _ in results)
    assert statuses == [201] * 11 + [400] * 9, results
    refused = [data for status, data in results if status == 400]
    assert all(data["errors"][0]["field"] == "amount" for data in refused)
    stored = Invoice.objects.get()
    accepted = sum(Payment.objects.values_list("amount", flat=True), Decimal(0))
    assert accepted == stored.paid == Decimal("1100.00") <= stored.grand_total
    assert (stored.status, stored.balance) == ("partially_paid", Decimal("80.00"))
    # Each 201 reported the state its own payment left: 100, 200, ... 1100 paid, each once.
    reported = sorted(data["invoice"]["paid"] for status, data in results if status == 201)
    assert reported == [100.0 * n for n in range(1, 12)]


def test_20_concurrent_payments_that_add_up_to_the_total_all_succeed_and_the_invoice_is_paid(writer, invoice):
    url = f"{INVOICES}/{invoice.id}/payments"
    work = [
        api_post(writer, url, {"amount": 59, "payment_mode": "card", "reference": f"C-{n}"}) for n in range(THREADS)
    ]

    results = all_at_once(work)

    assert [status for status, _ in results] == [201] * THREADS, results
    stored = Invoice.objects.get()
    assert (stored.status, stored.paid, stored.balance) == ("paid", Decimal("1180.00"), Decimal("0.00"))
    assert sum(1 for _, data in results if data["invoice"]["status"] == "paid") == 1


def test_20_concurrent_payments_with_one_reference_record_it_once(writer, invoice):
    url = f"{INVOICES}/{invoice.id}/payments"
    work = [api_post(writer, url, {"amount": 10, "payment_mode": "neft", "reference": "NEFT-1"})] * THREADS

    results = all_at_once(work)

    assert sorted(status for status, _ in results) == [201] + [409] * (THREADS - 1)
    assert {data["code"] for status, data in results if status == 409} == {"duplicate_payment"}
    assert Payment.objects.count() == 1
    assert Invoice.objects.get().paid == Decimal("10.00")


def test_a_payment_racing_a_cancellation_never_leaves_a_paid_cancelled_invoice(writer, invoice):
    base = f"{INVOICES}/{invoice.id}"
    work = [
        api_post(writer, f"{base}/payments", {"amount": 10, "payment_mode": "cash"}),
        api_post(writer, f"{base}/cancel", {"reason": "Raised twice"}),
    ] * 5

    results = all_at_once(work)

    stored = Invoice.objects.get()
    codes = sorted(status for status, _ in results)
    if stored.status == "cancelled":
        assert (stored.paid, Payment.objects.count(), codes) == (Decimal("0.00"), 0, [200] + [409] * 9)
    else:
        assert stored.status == "partially_paid"
        assert stored.paid == Decimal(10) * Payment.objects.count()
        assert codes.count(200) == 0


def test_20_concurrent_finalizations_in_one_branch_take_consecutive_numbers(writer, blr, patient, medicine):
    make_invoice(branch=blr, patient=patient, department=medicine, on=date(2026, 11, 1))  # takes 00001
    drafts = [
        make_invoice(branch=blr, patient=patient, department=medicine, finalize=False, on=date(2026, 11, 2))
        for _ in range(THREADS)
    ]

    results = all_at_once([api_post(writer, f"{INVOICES}/{d.id}/finalize", {}) for d in drafts])

    assert [status for status, _ in results] == [200] * THREADS, results
    numbers = sorted(Invoice.objects.values_list("invoice_number", flat=True))
    assert numbers == [f"BLR/2026-27/{n:05d}" for n in range(1, THREADS + 2)]
    assert InvoiceNumberCounter.objects.get(branch=blr, financial_year="2026-27").last_number == THREADS + 1


def test_20_concurrent_finalizations_of_one_draft_number_it_once(writer, blr, patient, medicine):
    draft = make_invoice(branch=blr, patient=patient, department=medicine, finalize=False)

    results = all_at_once([api_post(writer, f"{INVOICES}/{draft.id}/finalize", {})] * THREADS)

    assert sorted(status for status, _ in results) == [200] + [409] * (THREADS - 1)
    assert Invoice.objects.get().invoice_number == "BLR/2026-27/00001"
    assert InvoiceNumberCounter.objects.get().last_number == 1


def test_finalizations_that_roll_back_leave_no_gap(blr, patient, medicine):
    drafts = [
        make_invoice(branch=blr, patient=patient, department=medicine, finalize=False, on=date(2026, 11, 2))
        for _ in range(THREADS)
    ]

    def finalize(invoice: Invoice, roll_back: bool) -> Callable[[], str]:
        def call() -> str:
            with transaction.atomic():
                numbered = services.invoice_finalize(invoice=invoice)
                if roll_back:
                    raise Rollback(numbered.invoice_number)
            return str(numbered.invoice_number)

        return call

    results = all_at_once([finalize(d, roll_back=n % 2 == 1) for n, d in enumerate(drafts)])

    committed = sorted(r for r in results if isinstance(r, str))
    assert len(committed) == THREADS // 2
    assert all(isinstance(r, Rollback) for r in results if not isinstance(r, str))
    assert committed == [f"BLR/2026-27/{n:05d}" for n in range(1, THREADS // 2 + 1)]
    assert Invoice.objects.filter(status="draft").count() == THREADS // 2
    assert InvoiceNumberCounter.objects.get().last_number == THREADS // 2
    # The next finalization continues the series.
    nxt = services.invoice_finalize(invoice=Invoice.objects.filter(status="draft").first())
    assert nxt.invoice_number == f"BLR/2026-27/{THREADS // 2 + 1:05d}"
