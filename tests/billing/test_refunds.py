"""Refunds (docs/api-rules.md §12): POST /api/v1/billing/invoices/{id}/refunds, at most paid minus refunded,
immutable, in the detail; the invoice's status follows its balance."""

from __future__ import annotations

from datetime import date, timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from billing import services
from billing.models import Invoice, Refund
from tests.billing.factories import INVOICES, body, get, make_invoice, pay, post_json, snapshot
from tests.helpers import REQUEST_BOOKKEEPING, assert_problem, error_fields, row_counts

pytestmark = pytest.mark.django_db

D = Decimal


def url(invoice: Invoice) -> str:
    return f"{INVOICES}/{invoice.id}/refunds"


@pytest.fixture
def invoice(blr, patient, medicine):
    """Finalized three days ago, 1180.00, paid in full, then 180.00 credited: 180.00 due back to the patient."""
    invoice = make_invoice(
        branch=blr, patient=patient, department=medicine, on=timezone.localdate() - timedelta(days=3)
    )
    pay(invoice, "1180.00", mode="upi", reference="UPI-1")
    services.credit_note_issue(
        invoice=invoice,
        reason="Overcharged",
        lines=[services.CreditLineInput(line_id=invoice.line_items.get().id, amount=D("152.54"))],
    )
    return Invoice.objects.get(pk=invoice.pk)


def test_refunding_what_is_due_settles_the_invoice(client, writer, reader, invoice):
    assert invoice.refund_due == D("180.00")  # 152.54 + 18 % (27.46)

    response = post_json(client, writer, url(invoice), {"amount": 180, "payment_mode": "upi", "reference": "RF-1"})

    assert response.status_code == 201, response.content
    refund = Refund.objects.get()
    assert body(response) == {
        "refund": {
            "id": str(refund.id),
            "amount": D("180.00"),
            "payment_mode": "upi",
            "reference": "RF-1",
            "refund_date": timezone.localdate().isoformat(),
            "recorded_at": body(response)["refund"]["recorded_at"],
        },
        "invoice": {
            "id": str(invoice.id),
            "status": "paid",
            "paid": D("1180.00"),
            "credited": D("180.00"),
            "net_total": D("1000.00"),
            "refunded": D("180.00"),
            "balance": D("0.00"),
            "refund_due": D("0.00"),
        },
    }
    assert refund.recorded_by.startswith("api:")
    detail = body(get(client, reader, f"{INVOICES}/{invoice.id}"))
    assert detail["refunds"] == [body(response)["refund"]]


def test_a_refund_beyond_what_was_due_reopens_the_balance(client, writer, invoice):
    response = post_json(client, writer, url(invoice), {"amount": "500.00", "payment_mode": "cash"})

    assert response.status_code == 201, response.content
    assert body(response)["invoice"] | {"id": None} == {
        "id": None,
        "status": "partially_paid",
        "paid": D("1180.00"),
        "credited": D("180.00"),
        "net_total": D("1000.00"),
        "refunded": D("500.00"),
        "balance": D("320.00"),
        "refund_due": D("0.00"),
    }
    # The patient may pay again: the balance, not the paid sum, bounds a payment.
    again = post_json(client, writer, f"{INVOICES}/{invoice.id}/payments", {"amount": 320, "payment_mode": "cash"})
    assert body(again)["invoice"]["status"] == "paid"
    assert body(again)["invoice"]["paid"] == D("1500.00")


def test_everything_refunded_without_a_credit_makes_the_invoice_finalized_again(client, writer, blr, patient, medicine):
    invoice = make_invoice(branch=blr, patient=patient, department=medicine)
    pay(invoice, "1180.00")

    response = post_json(client, writer, url(invoice), {"amount": 1180, "payment_mode": "cash"})

    assert (body(response)["invoice"]["status"], body(response)["invoice"]["balance"]) == ("finalized", D("1180.00"))


@pytest.mark.parametrize(
    ("payload", "fields"),
    [
        ({"amount": "180.01", "payment_mode": "upi", "reference": "R"}, ["amount"]),  # not more than paid - 1000
        ({"amount": 0, "payment_mode": "cash"}, ["amount"]),
        ({"amount": -5, "payment_mode": "cash"}, ["amount"]),
        ({"amount": "\u0661\u0660", "payment_mode": "cash"}, ["amount"]),
        ({"amount": "10\u0000", "payment_mode": "cash"}, ["amount"]),
        ({"amount": 10, "payment_mode": "barter"}, ["payment_mode"]),
        ({"amount": 10, "payment_mode": "card"}, ["reference"]),
        ({"amount": 10, "payment_mode": "cash", "refund_date": "2999-01-01"}, ["refund_date"]),
        ({"amount": 10, "payment_mode": "cash", "refund_date": "2026-01-01"}, ["refund_date"]),  # before the invoice
        ({"amount": 10, "payment_mode": "cash", "tip": 5}, ["tip"]),
        ({"payment_mode": "cash"}, ["amount"]),
    ],
)
def test_bad_refunds_are_400_naming_the_field_and_write_nothing(client, writer, invoice, payload, fields):
    if "180.01" in str(payload.get("amount")):
        services.refund_record(invoice=invoice, amount=D("1000.00"), payment_mode="cash")  # 180.00 left to refund
    before, counts = snapshot(invoice), row_counts(exclude=REQUEST_BOOKKEEPING)

    response = post_json(client, writer, url(invoice), payload)

    assert error_fields(response) == fields
    assert (snapshot(invoice), row_counts(exclude=REQUEST_BOOKKEEPING)) == (before, counts)


def test_a_second_refund_with_the_same_reference_is_409(client, writer, invoice):
    post_json(client, writer, url(invoice), {"amount": 10, "payment_mode": "upi", "reference": "RF-9"})
    counts = row_counts(exclude=REQUEST_BOOKKEEPING)

    response = post_json(client, writer, url(invoice), {"amount": 10, "payment_mode": "upi", "reference": "RF-9"})

    assert_problem(response, 409, "duplicate_refund", payment_mode="upi", reference="RF-9")
    assert row_counts(exclude=REQUEST_BOOKKEEPING) == counts


@pytest.mark.parametrize("state", ["draft", "cancelled"])
def test_drafts_and_cancelled_invoices_cannot_be_refunded(client, writer, blr, patient, medicine, state):
    invoice = make_invoice(branch=blr, patient=patient, department=medicine, finalize=state == "cancelled")
    if state == "cancelled":
        services.invoice_cancel(invoice=invoice, reason="wrong patient")
    counts = row_counts(exclude=REQUEST_BOOKKEEPING)

    response = post_json(client, writer, url(invoice), {"amount": 1, "payment_mode": "cash"})

    assert_problem(response, 409, "invalid_state", current_status=state)
    assert row_counts(exclude=REQUEST_BOOKKEEPING) == counts


def test_another_branchs_invoice_is_404_and_the_read_scope_is_403(
    client, writer, reader, mum, patient, medicine, invoice
):
    theirs = make_invoice(branch=mum, patient=patient, department=medicine)
    pay(theirs, "100.00")
    counts = row_counts(exclude=REQUEST_BOOKKEEPING)

    assert_problem(post_json(client, writer, url(theirs), {"amount": 1, "payment_mode": "cash"}), 404, "not_found")
    assert post_json(client, reader, url(invoice), {"amount": 1, "payment_mode": "cash"}).status_code == 403
    assert row_counts(exclude=REQUEST_BOOKKEEPING) == counts


def test_a_refund_dated_yesterday_is_kept_with_its_date(client, writer, invoice):
    yesterday = timezone.localdate() - timedelta(days=1)

    response = post_json(
        client, writer, url(invoice), {"amount": 1, "payment_mode": "cash", "refund_date": str(yesterday)}
    )

    assert Refund.objects.get().refund_date == date.fromisoformat(body(response)["refund"]["refund_date"]) == yesterday
