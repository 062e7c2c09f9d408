"""POST /api/v1/billing/invoices/{id}/payments: validation, states, duplicates, idempotency, the
branch-local default date, and payments that even raw SQL cannot change."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from unittest import mock

import pytest
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from billing import services
from billing.models import Invoice, Payment
from clinic.errors import FieldError
from tests.billing.factories import INVOICES, body, make_invoice, pay, post_json, snapshot
from tests.factories import BranchFactory
from tests.helpers import assert_problem, error_fields
from tests.patients.factories import PatientFactory

pytestmark = pytest.mark.django_db

D = Decimal


@pytest.fixture
def invoice(blr, patient, medicine):
    """Finalized, grand total 1180.00."""
    return make_invoice(branch=blr, patient=patient, department=medicine, on=date(2026, 11, 2))


def url(invoice):
    return f"{INVOICES}/{invoice.id}/payments"


def test_a_partial_payment_returns_201_with_the_payment_and_the_invoices_new_state(client, writer, invoice):
    response = post_json(
        client,
        writer,
        url(invoice),
        {"amount": D("180.50"), "payment_mode": "upi", "reference": " UPI-4123 ", "payment_date": "2026-11-03"},
    )

    assert response.status_code == 201, response.content
    payment = Payment.objects.get()
    assert body(response) == {
        "payment": {
            "id": str(payment.id),
            "amount": D("180.50"),
            "payment_mode": "upi",
            "reference": "UPI-4123",
            "payment_date": "2026-11-03",
            "recorded_at": payment.recorded_at.astimezone(invoice.branch.zone).isoformat(),
        },
        "invoice": {
            "id": str(invoice.id),
            "status": "partially_paid",
            "paid": D("180.50"),
            "credited": D("0.00"),
            "net_total": D("1180.00"),
            "refunded": D("0.00"),
            "balance": D("999.50"),
            "refund_due": D("0.00"),
        },
    }
    stored = Invoice.objects.get()
    assert (stored.status, stored.paid) == ("partially_paid", D("180.50"))
    assert payment.recorded_by.startswith("api:")


def test_paying_the_balance_makes_the_invoice_paid(client, writer, invoice):
    pay(invoice, "1000.00")

    response = post_json(client, writer, url(invoice), {"amount": 180, "payment_mode": "card", "reference": "C-1"})

    assert response.status_code == 201, response.content
    assert body(response)["invoice"] == {
        "id": str(invoice.id),
        "status": "paid",
        "paid": D("1180.00"),
        "credited": D("0.00"),
        "net_total": D("1180.00"),
        "refunded": D("0.00"),
        "balance": D("0.00"),
        "refund_due": D("0.00"),
    }
    assert Invoice.objects.get().status == "paid"


def test_one_payment_of_the_whole_total_goes_straight_to_paid(client, writer, invoice):
    response = post_json(client, writer, url(invoice), {"amount": D("1180.00"), "payment_mode": "cash"})

    assert body(response)["invoice"]["status"] == "paid"
    assert body(response)["payment"]["reference"] is None


def test_the_payment_date_defaults_to_today_in_the_branchs_time_zone(client, token_for, patient, medicine):
    honolulu = BranchFactory(code="HNL", state="Karnataka", time_zone="Pacific/Honolulu")
    invoice = make_invoice(branch=honolulu, patient=patient, department=medicine, on=date(2026, 3, 1))
    token = token_for(["billing:write"], branches=[honolulu])
    # 2026-04-01 08:30 UTC is 1 April in India but still 31 March in Honolulu (UTC-10).
    instant = datetime(2026, 4, 1, 8, 30, tzinfo=UTC)

    with mock.patch("django.utils.timezone.now", return_value=instant):
        response = post_json(client, token, url(invoice), {"amount": 100, "payment_mode": "cash"})

    assert response.status_code == 201, response.content
    assert body(response)["payment"]["payment_date"] == "2026-03-31"
    assert body(response)["payment"]["recorded_at"] == "2026-03-31T22:30:00-10:00"


def test_a_payment_date_tomorrow_at_the_branch_is_refused(client, writer, invoice):
    tomorrow = timezone.localtime(timezone.now(), invoice.branch.zone).date() + timedelta(days=1)
    before = snapshot(invoice)

    response = post_json(
        client, writer, url(invoice), {"amount": 10, "payment_mode": "cash", "payment_date": tomorrow.isoformat()}
    )

    assert error_fields(response) == ["payment_date"]
    assert snapshot(invoice) == before


# --- Refusals leave everything unchanged ------------------------------------------------------------------

BAD_BODIES = [
    ({"amount": 0, "payment_mode": "cash"}, ["amount"]),
    ({"amount": -5, "payment_mode": "cash"}, ["amount"]),
    ({"amount": D("1180.01"), "payment_mode": "cash"}, ["amount"]),
    ({"amount": D("10.005"), "payment_mode": "cash"}, ["amount"]),
    ({"amount": "ten", "payment_mode": "cash"}, ["amount"]),
    ({"payment_mode": "cash"}, ["amount"]),
    ({"amount": 10, "payment_mode": "bitcoin", "reference": "x"}, ["payment_mode"]),
    ({"amount": 10}, ["payment_mode"]),
    ({"amount": 10, "payment_mode": "upi"}, ["reference"]),
    ({"amount": 10, "payment_mode": "cheque", "reference": "   "}, ["reference"]),
    ({"amount": 10, "payment_mode": "cash", "payment_date": "2026-02-30"}, ["payment_date"]),
    ({"amount": 10, "payment_mode": "cash", "payment_date": "2099-01-01"}, ["payment_date"]),
    ({"amount": 10, "payment_mode": "cash", "note": "x"}, ["note"]),
    (
        {"amount": 0, "payment_mode": "neft", "payment_date": "2099-01-01", "tip": 1},
        ["amount", "payment_date", "reference", "tip"],
    ),
]


@pytest.mark.parametrize(("payload", "fields"), BAD_BODIES)
def test_an_invalid_payment_is_400_naming_the_fields_and_changes_nothing(client, writer, invoice, payload, fields):
    pay(invoice, "100.00", mode="upi", reference="FIRST")
    before = snapshot(invoice)

    response = post_json(client, writer, url(invoice), payload)

    assert sorted(error_fields(response)) == fields
    assert snapshot(invoice) == before


def test_more_than_the_balance_names_the_balance(client, writer, invoice):
    pay(invoice, "1000.00")

    response = post_json(client, writer, url(invoice), {"amount": D("180.01"), "payment_mode": "cash"})

    assert response.json()["errors"] == [
        {"field": "amount", "code": "invalid", "message": "Cannot exceed the balance of 180.00."}
    ]


@pytest.mark.parametrize("state", ["draft", "cancelled", "paid"])
def test_paying_a_draft_cancelled_or_paid_invoice_is_409_invalid_state(client, writer, blr, patient, medicine, state):
    invoice = make_invoice(branch=blr, patient=patient, department=medicine, finalize=state != "draft")
    if state == "cancelled":
        services.invoice_cancel(invoice=invoice, reason="Wrong patient")
    if state == "paid":
        pay(invoice, "1180.00")
    before = snapshot(invoice)

    response = post_json(client, writer, url(invoice), {"amount": 10, "payment_mode": "cash"})

    data = assert_problem(response, 409, "invalid_state", current_status=state)
    assert data["title"] == "Invalid state"
    assert snapshot(invoice) == before


def test_a_second_payment_with_the_same_mode_and_reference_is_409_duplicate_payment(client, writer, invoice):
    first = post_json(client, writer, url(invoice), {"amount": 100, "payment_mode": "upi", "reference": "UPI-1"})
    assert first.status_code == 201
    before = snapshot(invoice)

    response = post_json(client, writer, url(invoice), {"amount": 50, "payment_mode": "upi", "reference": "UPI-1"})

    data = assert_problem(response, 409, "duplicate_payment", payment_mode="upi", reference="UPI-1")
    assert data["title"] == "Duplicate payment"
    assert snapshot(invoice) == before


def test_the_same_reference_under_another_mode_or_on_another_invoice_is_accepted(
    client, writer, invoice, blr, patient, medicine
):
    other = make_invoice(branch=blr, patient=patient, department=medicine)
    pay(invoice, "100.00", mode="upi", reference="REF-1")

    assert (
        post_json(client, writer, url(invoice), {"amount": 1, "payment_mode": "card", "reference": "REF-1"}).status_code
        == 201
    )
    assert (
        post_json(client, writer, url(other), {"amount": 1, "payment_mode": "upi", "reference": "REF-1"}).status_code
        == 201
    )


def test_cash_payments_may_repeat_a_reference(client, writer, invoice):
    for _ in range(2):
        response = post_json(
            client, writer, url(invoice), {"amount": 5, "payment_mode": "cash", "reference": "Counter 2"}
        )
        assert response.status_code == 201, response.content

    assert Payment.objects.filter(reference="Counter 2").count() == 2


def test_an_idempotent_retry_replays_the_201_without_paying_twice(client, writer, invoice):
    payload = {"amount": D("500.00"), "payment_mode": "upi", "reference": "UPI-77"}

    first = post_json(client, writer, url(invoice), payload, key="pay-77")
    replay = post_json(client, writer, url(invoice), payload, key="pay-77")

    assert first.status_code == replay.status_code == 201
    assert replay["Idempotent-Replayed"] == "true"
    assert body(replay) == body(first)
    assert Payment.objects.count() == 1
    assert Invoice.objects.get().paid == D("500.00")


def test_the_same_idempotency_key_with_another_body_is_422_and_pays_nothing(client, writer, invoice):
    post_json(client, writer, url(invoice), {"amount": 500, "payment_mode": "upi", "reference": "U1"}, key="k1")
    before = snapshot(invoice)

    response = post_json(
        client, writer, url(invoice), {"amount": 600, "payment_mode": "upi", "reference": "U1"}, key="k1"
    )

    assert_problem(response, 422, "idempotency_key_reused")
    assert snapshot(invoice) == before


def test_a_refused_payment_is_replayed_as_refused(client, writer, invoice):
    payload = {"amount": 5000, "payment_mode": "cash"}

    first = post_json(client, writer, url(invoice), payload, key="too-much")
    replay = post_json(client, writer, url(invoice), payload, key="too-much")

    assert first.status_code == replay.status_code == 400
    assert replay["Idempotent-Replayed"] == "true"
    assert Payment.objects.count() == 0


def test_the_service_checks_the_rules_too(invoice):
    with pytest.raises(FieldError) as refused:
        services.payment_record(invoice=invoice, amount=D(0), payment_mode="upi", reference="")

    assert set(refused.value.errors) == {"amount", "reference"}
    assert Payment.objects.count() == 0


# --- Payments are immutable in the database ---------------------------------------------------------------


def test_a_payment_cannot_be_updated_even_with_raw_sql(invoice):
    payment = pay(invoice, "100.00")

    with (
        pytest.raises(IntegrityError, match="billing payments are immutable"),
        transaction.atomic(),
        connection.cursor() as cursor,
    ):
        cursor.execute("UPDATE billing_payment SET amount = 1 WHERE id = %s", [payment.id])

    assert Payment.objects.get().amount == D("100.00")


def test_a_payment_cannot_be_deleted_even_with_raw_sql(invoice):
    payment = pay(invoice, "100.00")

    with (
        pytest.raises(IntegrityError, match="billing payments are immutable"),
        transaction.atomic(),
        connection.cursor() as cursor,
    ):
        cursor.execute("DELETE FROM billing_payment WHERE id = %s", [payment.id])

    assert Payment.objects.count() == 1


def test_the_orm_cannot_change_or_delete_a_payment_either(invoice):
    payment = pay(invoice, "100.00")
    payment.reference = "changed"

    with pytest.raises(IntegrityError), transaction.atomic():
        payment.save()
    with pytest.raises(IntegrityError), transaction.atomic():
        Payment.objects.filter(pk=payment.pk).delete()

    assert Payment.objects.get().reference == ""


def test_the_database_refuses_a_paid_sum_above_the_total_and_a_status_that_disagrees(invoice):
    with pytest.raises(IntegrityError, match="invoice_credited_refunded_bounded"), transaction.atomic():
        Invoice.objects.filter(pk=invoice.pk).update(paid=D("1180.01"), status="partially_paid")
    with pytest.raises(IntegrityError, match="invoice_status_matches_settlement"), transaction.atomic():
        Invoice.objects.filter(pk=invoice.pk).update(status="paid")
    with pytest.raises(IntegrityError, match="invoice_number_iff_not_draft"), transaction.atomic():
        Invoice.objects.filter(pk=invoice.pk).update(status="draft")


def test_a_client_of_another_branch_cannot_pay(client, token_for, mum, invoice):
    token = token_for(["billing:write"], branches=[mum])
    before = snapshot(invoice)

    assert_problem(post_json(client, token, url(invoice), {"amount": 10, "payment_mode": "cash"}), 404, "not_found")
    assert snapshot(invoice) == before


def test_an_invoice_of_a_patient_registered_elsewhere_is_payable_at_its_branch(client, writer, blr, mum, medicine):
    traveller = PatientFactory(registration_branch=mum, address_state="Maharashtra")
    invoice = make_invoice(branch=blr, patient=traveller, department=medicine)

    response = post_json(client, writer, url(invoice), {"amount": 10, "payment_mode": "cash"})

    assert response.status_code == 201, response.content
