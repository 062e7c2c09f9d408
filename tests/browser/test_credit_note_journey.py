"""Credit notes and refunds in a real browser: from a paid invoice's page, "Issue credit note" credits one
of two knee braces, the page shows what is now owed back, a refund is recorded in its inline, and Print
PDF opens the tax invoice. Screenshots of the pages go to test-artifacts/screenshots/ to look at."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from billing import services
from billing.models import CreditNote, Invoice, Refund
from tests.billing.factories import pay
from tests.factories import BranchFactory, DepartmentFactory
from tests.patients.factories import PatientFactory

pytestmark = pytest.mark.django_db(transaction=True)

SCREENSHOTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "screenshots"


def test_issue_a_credit_note_record_the_refund_and_print_the_invoice(admin_page, live_server):
    page = admin_page
    branch = BranchFactory(code="BLR", name="Bengaluru Central", state="Karnataka", gstin="29AABCC1234D1Z7")
    patient = PatientFactory(
        first_name="Priya", last_name="Sharma", address_state="Karnataka", registration_branch=branch
    )
    department = DepartmentFactory(name="Orthopaedics")
    brace = services.LineInput(
        service_name="Knee brace",
        department=department,
        rate=Decimal("1500.00"),
        tax_rate=Decimal("12"),
        quantity=Decimal("2"),
        hsn_sac="90211000",
    )
    invoice = services.invoice_create(branch=branch, patient=patient, line_items=[brace], finalize=True)
    pay(invoice, "3360.00", mode="upi", reference="UPI-1")

    page.goto(f"/admin/billing/invoice/{invoice.pk}/change/")
    page.click("text=Issue credit note")
    page.wait_for_selector("text=Credited so far")
    page.fill("#id_reason", "One brace returned unopened")
    page.fill("#id_lines-0-quantity", "1")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "admin-credit-note-page.png"), full_page=True)
    page.click("input[type=submit][value='Issue credit note']")
    page.wait_for_selector("text=Credit note BLR/CN/")

    credit_note = CreditNote.objects.get()
    assert (credit_note.total, credit_note.created_by) == (Decimal("1680.00"), "staff:staff")
    assert page.locator(".field-refund_due .readonly").inner_text() == "1680.00"

    page.click("#refunds-group .add-row a")
    page.fill("#id_refunds-0-amount", "1680.00")
    page.select_option("#id_refunds-0-payment_mode", "upi")
    page.fill("#id_refunds-0-reference", "RF-1")
    page.click("input[name=_continue]")
    page.wait_for_selector("text=was changed successfully")
    page.screenshot(path=str(SCREENSHOTS / "admin-invoice-credited-refunded.png"), full_page=True)

    assert Refund.objects.get().recorded_by == "staff:staff"
    invoice = Invoice.objects.get()
    assert (invoice.refund_due, invoice.balance, invoice.status) == (Decimal("0.00"), Decimal("0.00"), "paid")
    link = page.locator("a:has-text('Print PDF')").first
    response: Any = page.request.get(link.get_attribute("href"))
    assert response.status == 200
    assert response.headers["content-type"] == "application/pdf"
    assert response.body().startswith(b"%PDF-")
