"""Billing administration in a real browser: a draft invoice with two lines (one from the catalogue, one
typed in) for a patient picked in the autocomplete widget, finalized by the list action, paid in part from
its page; checked in the database and through the API with a real token."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
import requests

from billing.models import Invoice, LineItem, Payment
from tests.billing.factories import BillableServiceFactory
from tests.browser.test_admin_journeys import token
from tests.factories import ApiClientFactory, BranchFactory, DepartmentFactory
from tests.patients.factories import PatientFactory

pytestmark = pytest.mark.django_db(transaction=True)

INVOICES = "/admin/billing/invoice/"


def select2_in(page: Any, container: str, text: str) -> None:
    """Pick `text` in the autocomplete (select2) widget inside `container`."""
    page.click(f"{container} .select2-selection")
    page.fill(".select2-container--open .select2-search__field", text)
    page.click(f".select2-results__option:has-text('{text}')")


def test_create_finalize_and_pay_an_invoice_in_the_admin(admin_page, live_server):
    page = admin_page
    branch = BranchFactory(code="BLR", name="Bengaluru Central", state="Karnataka", time_zone="Asia/Kolkata")
    patient = PatientFactory(
        first_name="Priya", last_name="Sharma", address_state="Karnataka", registration_branch=branch
    )
    PatientFactory(first_name="Rahul", last_name="Patil", registration_branch=branch)
    medicine = DepartmentFactory(name="General Medicine")
    BillableServiceFactory(
        code="CONS", name="Consultation", department=medicine, rate=Decimal("500.00"), tax_rate=Decimal("18.00")
    )
    nursing = DepartmentFactory(name="Nursing")

    # A draft with one catalogue line and one typed-in line.
    page.goto(f"{INVOICES}add/")
    page.select_option("#id_branch", label=str(branch))
    select2_in(page, ".field-patient", "Sharma")
    select2_in(page, "#line_items-0 .field-service", "Consultation")
    page.click("#line_items-group .add-row a")
    page.fill("#id_line_items-1-service_name", "Wound dressing")
    page.select_option("#id_line_items-1-department", label=str(nursing))
    page.fill("#id_line_items-1-quantity", "2")
    page.fill("#id_line_items-1-rate", "150.00")
    page.fill("#id_line_items-1-discount", "50.00")
    page.fill("#id_line_items-1-tax_rate", "12")
    page.click("input[name=_save]")
    page.wait_for_selector("text=was added successfully")

    invoice = Invoice.objects.get()
    assert (invoice.patient, invoice.branch, invoice.status, invoice.invoice_number) == (patient, branch, "draft", None)
    lines = list(
        LineItem.objects.filter(invoice=invoice).values_list(
            "service__code", "service_name", "department__name", "quantity", "taxable_amount", "cgst", "sgst", "amount"
        )
    )
    assert lines == [
        ("CONS", "Consultation", "General Medicine", Decimal("1.000"), Decimal("500.00"), Decimal("45.00"),
         Decimal("45.00"), Decimal("590.00")),
        (None, "Wound dressing", "Nursing", Decimal("2.000"), Decimal("250.00"), Decimal("15.00"),
         Decimal("15.00"), Decimal("280.00")),
    ]  # fmt: skip
    assert (invoice.taxable, invoice.tax, invoice.grand_total, invoice.paid) == (
        Decimal("750.00"),
        Decimal("120.00"),
        Decimal("870.00"),
        Decimal("0.00"),
    )

    # Finalized from the list: the number is assigned and shown there.
    page.goto(INVOICES)
    page.check(f"input[name=_selected_action][value='{invoice.pk}']")
    page.select_option("select[name=action]", "finalize")
    page.click("button[name=index]")
    page.wait_for_selector("text=1 invoice(s) updated.")
    invoice.refresh_from_db()
    assert invoice.status == "finalized"
    assert invoice.invoice_number
    assert invoice.invoice_number.startswith("BLR")
    row = page.locator("#result_list tbody tr").first
    assert row.locator("th, td").nth(1).inner_text().strip() == invoice.invoice_number
    assert "Finalized" in row.inner_text()

    # A part payment by UPI recorded on the invoice's page.
    page.click(f"#result_list a:has-text('{invoice.invoice_number}')")
    page.wait_for_url(f"**{INVOICES}{invoice.pk}/change/")
    page.click("#payments-group .add-row a")
    page.fill("#id_payments-0-amount", "500.00")
    page.select_option("#id_payments-0-payment_mode", "upi")
    page.fill("#id_payments-0-reference", "UPI-7781")
    page.click("input[name=_save]")
    page.wait_for_selector("text=was changed successfully")

    invoice.refresh_from_db()
    assert (invoice.status, invoice.paid, invoice.balance) == ("partially_paid", Decimal("500.00"), Decimal("370.00"))
    payment = Payment.objects.get()
    assert (payment.invoice, payment.amount, payment.payment_mode, payment.reference, payment.recorded_by) == (
        invoice,
        Decimal("500.00"),
        "upi",
        "UPI-7781",
        "staff:staff",
    )

    client = ApiClientFactory(allowed_scopes=["billing:read"], branches=[branch])
    access = token(live_server, client.client_id, client.secret).json()["access_token"]
    response = requests.get(
        f"{live_server.url}/api/v1/billing/invoices/{invoice.pk}",
        headers={"Authorization": f"Bearer {access}"},
        timeout=10,
    )
    assert response.status_code == 200, response.text
    body = response.json(parse_float=Decimal)  # money is a JSON number
    assert (body["invoice_number"], body["status"], body["totals"]["grand_total"], body["paid"], body["balance"]) == (
        invoice.invoice_number,
        "partially_paid",
        Decimal("870.00"),
        Decimal("500.00"),
        Decimal("370.00"),
    )
    assert [line["service_name"] for line in body["line_items"]] == ["Consultation", "Wound dressing"]
    assert [(p["amount"], p["payment_mode"], p["reference"]) for p in body["payments"]] == [
        (Decimal("500.00"), "upi", "UPI-7781")
    ]
