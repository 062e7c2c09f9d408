"""The printed GST documents (docs/api-rules.md §12): GET /api/v1/billing/invoices/{id}.pdf and
GET .../credit-notes/{credit_note_id}.pdf, read back with pdftotext (what an accountant copies from it) and
rendered to PNG under test-artifacts/pdf/ (what it looks like).

An intra-state invoice of three lines (exempt consultation, a 12 % knee brace with a discount, an 18 %
dressing kit) at the Bengaluru branch:

    line          taxable   CGST     SGST     amount
    Consultation   800.00     0.00     0.00    800.00   SAC 999312, exempt
    Knee brace    2900.00   174.00   174.00   3248.00   HSN 90211000, 2 x 1500.00 - 100.00
    Dressing kit   250.50    22.55    22.54    295.59   HSN 3005, CGST takes the odd paisa
    totals        3950.50   196.55   196.54   4343.59
"""

from __future__ import annotations

import logging
from datetime import date
from decimal import Decimal
from typing import Any

import pytest
from django.utils import timezone
from reportlab.platypus import SimpleDocTemplate

from billing import services
from billing.models import CreditNote, Invoice
from clinic.lib.pdf import RenderError
from integrations.models import AuditLogEntry
from tests.billing.factories import make_invoice, pay, snapshot
from tests.helpers import bearer
from tests.patients.factories import PatientFactory
from tests.pdf_tools import pdf_pages, pdf_png, pdf_text, reddish_share

pytestmark = pytest.mark.django_db

D = Decimal
INVOICES = "/api/v1/billing/invoices"


@pytest.fixture
def supplier(blr):
    blr.address_line1 = "12 MG Road"
    blr.city = "Bengaluru"
    blr.pincode = "560001"
    blr.phone = "+918040001234"
    blr.save()
    return blr


@pytest.fixture
def resident(supplier):
    return PatientFactory(
        first_name="Zoë",
        last_name="D'Souza & Rao",
        address_line1="4 Residency Road",
        address_city="Bengaluru",
        address_state="Karnataka",
        address_pincode="560025",
        registration_branch=supplier,
    )


def three_lines(department: Any) -> list[services.LineInput]:
    return [
        services.LineInput(
            service_name="Consultation",
            department=department,
            rate=D("800.00"),
            tax_rate=D("0"),
            tax_category="exempt",
            hsn_sac="999312",
        ),
        services.LineInput(
            service_name="Knee brace",
            department=department,
            rate=D("1500.00"),
            tax_rate=D("12"),
            quantity=D("2"),
            discount=D("100.00"),
            hsn_sac="90211000",
        ),
        services.LineInput(
            service_name="Dressing kit", department=department, rate=D("250.50"), tax_rate=D("18"), hsn_sac="3005"
        ),
    ]


@pytest.fixture
def invoice(supplier, resident, medicine):
    invoice = make_invoice(branch=supplier, patient=resident, lines=three_lines(medicine), on=date(2026, 11, 2))
    pay(invoice, "1000.00", mode="upi", reference="UPI-778899", on=date(2026, 11, 3))
    return Invoice.objects.get(pk=invoice.pk)


def get_pdf(client: Any, token: str, url: str, **headers: Any) -> Any:
    return client.get(url, **bearer(token), **headers)


def audit_row(response: Any) -> AuditLogEntry:
    return AuditLogEntry.objects.get(request_id=response["X-Request-ID"])


def words(content: bytes) -> str:
    """The text in reading order, every run of white space one space (a wrapped sentence whole again)."""
    return " ".join(pdf_text(content).split())


def lines_with(text: str, *words: str) -> list[str]:
    """The lines of a -layout extraction holding every one of `words`, with runs of spaces made one."""
    rows = [" ".join(row.split()) for row in text.splitlines()]
    return [row for row in rows if all(word in row for word in words)]


def test_the_tax_invoice_pdf_shows_what_a_gst_invoice_must(client, reader, invoice, resident):
    response = get_pdf(client, reader, f"{INVOICES}/{invoice.id}.pdf")

    assert response.status_code == 200, response.content
    assert response["Content-Type"] == "application/pdf"
    assert response["Content-Disposition"] == 'inline; filename="BLR-2026-27-00001.pdf"'
    assert response["Cache-Control"] == "no-store"
    assert response.content.startswith(b"%PDF-")
    assert response.content.rstrip().endswith(b"%%EOF")
    assert int(response["Content-Length"]) == len(response.content)
    (page,) = pdf_png(response.content, "tax-invoice-intra-state")
    text = pdf_text(response.content, layout=True)
    # The supplier, the document and the recipient.
    assert lines_with(text, "Bengaluru Central Clinic", "TAX INVOICE")
    for fact in ("12 MG Road", "Bengaluru - 560001", "GSTIN: 29AABCC1234D1Z7", "Phone: +918040001234"):
        assert lines_with(text, fact), fact
    assert lines_with(text, "State: Karnataka (29)")
    assert lines_with(text, "Invoice No.", "BLR/2026-27/00001")
    assert lines_with(text, "Invoice date", "02 Nov 2026")
    assert lines_with(text, "Place of supply", "Karnataka (29)")
    assert lines_with(text, "Reverse charge", "No")
    assert lines_with(text, "Zoë D'Souza & Rao")
    assert lines_with(text, f"Patient ID: {resident.patient_id}")
    assert lines_with(text, "4 Residency Road")
    # The lines: HSN/SAC, quantity, rate, discount, taxable value, GST rate, CGST, SGST, amount.
    assert lines_with(text, "# Description HSN/SAC Qty Rate Disc. Taxable GST CGST SGST Amount")
    assert lines_with(text, "1 Consultation 999312 1 800.00 0.00 800.00 Exempt 0.00 0.00 800.00")
    assert lines_with(text, "2 Knee brace 90211000 2 1,500.00 100.00 2,900.00 12% 174.00 174.00 3,248.00")
    assert lines_with(text, "3 Dressing kit 3005 1 250.50 0.00 250.50 18% 22.55 22.54 295.59")
    assert not lines_with(text, "IGST")
    # The totals, and the grand total in words.
    for label, figure in [
        ("Sub total", "4,050.50"),
        ("Discount", "100.00"),
        ("Taxable value", "3,950.50"),
        ("CGST", "196.55"),
        ("SGST", "196.54"),
        ("Total tax", "393.09"),
        ("Grand total (INR)", "4,343.59"),
    ]:
        assert lines_with(text, label, figure), label
    assert "Rupees Four Thousand Three Hundred Forty Three and Fifty Nine Paise Only" in words(response.content)
    # The HSN/SAC summary: one row per code, category and rate, in code order, and their total.
    summary = text[text.index("HSN/SAC summary") :]
    assert lines_with(summary, "HSN/SAC GST rate Taxable value CGST SGST Total tax")
    assert [" ".join(row.split()) for row in summary.splitlines()[2:6]] == [
        "3005 18% 250.50 22.55 22.54 45.09",
        "90211000 12% 2,900.00 174.00 174.00 348.00",
        "999312 Exempt 800.00 0.00 0.00 0.00",
        "Total 3,950.50 196.55 196.54 393.09",
    ]
    # Payments and what is left to pay; no credit note or refund figures when there are none.
    assert lines_with(text, "03 Nov 2026", "UPI UPI-778899", "1,000.00")
    assert lines_with(text, "Paid", "1,000.00")
    assert lines_with(text, "Balance due (INR)", "3,343.59")
    for absent in ("Credited", "Net total", "Refunded", "Refund due", "DRAFT", "CANCELLED"):
        assert absent not in text, absent
    assert lines_with(text, "Page 1 of 1")
    assert audit_row(response).patient_ids == [resident.id]
    assert page.stat().st_size > 20_000
    assert reddish_share(page) == 0  # no DRAFT or CANCELLED mark


def test_an_inter_state_invoice_shows_igst_and_the_patients_state_as_place_of_supply(
    client, reader, supplier, visitor, medicine
):
    invoice = make_invoice(branch=supplier, patient=visitor, lines=three_lines(medicine), on=date(2026, 11, 2))

    response = get_pdf(client, reader, f"{INVOICES}/{invoice.id}.pdf")

    assert response.status_code == 200, response.content
    pdf_png(response.content, "tax-invoice-inter-state")
    text = pdf_text(response.content, layout=True)
    assert lines_with(text, "Place of supply", "Maharashtra (27)")
    assert lines_with(text, "# Description HSN/SAC Qty Rate Disc. Taxable GST IGST Amount")
    assert lines_with(text, "2 Knee brace 90211000 2 1,500.00 100.00 2,900.00 12% 348.00 3,248.00")
    assert lines_with(text, "3 Dressing kit 3005 1 250.50 0.00 250.50 18% 45.09 295.59")
    assert lines_with(text, "IGST", "393.09")
    assert lines_with(text, "Grand total (INR)", "4,343.59")
    assert lines_with(text, "HSN/SAC GST rate Taxable value IGST Total tax")
    assert lines_with(text, "Total 3,950.50 393.09 393.09")
    assert "CGST" not in text
    assert "SGST" not in text
    assert lines_with(text, "Balance due (INR)", "4,343.59")


def credit_and_refund(invoice: Invoice) -> CreditNote:
    """Settle the invoice, credit its dressing kit in full and refund part of what that leaves due."""
    pay(invoice, "3343.59", mode="card", reference="CARD-4411", on=date(2026, 11, 4))
    kit = invoice.line_items.get(service_name="Dressing kit")
    credit_note = services.credit_note_issue(
        invoice=invoice,
        reason="Dressing kit returned unopened",
        lines=[services.CreditLineInput(line_id=kit.id)],
        issued_by="api:test",
    )
    services.refund_record(invoice=invoice, amount=D("100.00"), payment_mode="cash", refund_date=date(2026, 11, 5))
    return credit_note


def test_an_invoice_with_a_credit_note_and_a_refund_shows_credited_net_total_refunded_and_refund_due(
    client, reader, invoice
):
    credit_note = credit_and_refund(invoice)
    today = timezone.localdate().strftime("%d %b %Y")

    response = get_pdf(client, reader, f"{INVOICES}/{invoice.id}.pdf")

    assert response.status_code == 200, response.content
    pdf_png(response.content, "tax-invoice-credited-refunded")
    text = pdf_text(response.content, layout=True)
    assert lines_with(text, today, f"{credit_note.credit_note_number}: Dressing kit returned unopened", "295.59")
    assert lines_with(text, "04 Nov 2026", "Card CARD-4411", "3,343.59")
    assert lines_with(text, "05 Nov 2026", "Cash", "100.00")
    closing = text[text.index("Settlement") :].split("TAX INVOICE BLR")[0]  # up to the footer
    for signature in ("For Bengaluru Central Clinic", "Authorised signatory"):  # printed beside it
        closing = closing.replace(signature, "")
    settlement = [" ".join(row.split()) for row in closing.splitlines() if row.strip()][1:]
    assert settlement == [
        "Grand total 4,343.59",
        "Credited 295.59",
        "Net total 4,048.00",
        "Paid 4,343.59",
        "Refunded 100.00",
        "Balance due 0.00",
        "Refund due (INR) 195.59",
    ]


def test_the_credit_note_pdf_has_the_invoices_layout_with_the_original_invoice_and_the_reason(
    client, reader, invoice, resident
):
    credit_note = credit_and_refund(invoice)
    today = timezone.localdate().strftime("%d %b %Y")

    response = get_pdf(client, reader, f"{INVOICES}/{invoice.id}/credit-notes/{credit_note.id}.pdf")

    assert response.status_code == 200, response.content
    pdf_png(response.content, "credit-note")
    assert response["Content-Type"] == "application/pdf"
    assert response["Content-Disposition"] == 'inline; filename="BLR-CN-2026-27-00001.pdf"'
    assert response["Cache-Control"] == "no-store"
    text = pdf_text(response.content, layout=True)
    assert lines_with(text, "Bengaluru Central Clinic", "CREDIT NOTE")
    assert lines_with(text, "GSTIN: 29AABCC1234D1Z7")
    assert lines_with(text, "Credit note No.", "BLR/CN/2026-27/00001")
    assert lines_with(text, "Credit note date", today)
    assert lines_with(text, "Original invoice No.", "BLR/2026-27/00001")
    assert lines_with(text, "Original invoice date", "02 Nov 2026")
    assert lines_with(text, "Place of supply", "Karnataka (29)")
    assert lines_with(text, "Reason", "Dressing kit returned unopened")
    assert lines_with(text, "Credit note issued to")
    assert lines_with(text, f"Patient ID: {resident.patient_id}")
    assert lines_with(text, "# Description HSN/SAC Qty Taxable GST CGST SGST Amount")
    assert lines_with(text, "1 Dressing kit 3005 1 250.50 18% 22.55 22.54 295.59")
    assert lines_with(text, "Total tax", "45.09")
    assert lines_with(text, "Total credit (INR)", "295.59")
    assert "Rupees Two Hundred Ninety Five and Fifty Nine Paise Only" in words(response.content)
    assert lines_with(text, "3005 18% 250.50 22.55 22.54 45.09")
    for absent in ("Knee brace", "Consultation", "Payments received", "Settlement", "Balance"):
        assert absent not in text, absent
    assert audit_row(response).patient_ids == [resident.id]


def test_a_draft_is_titled_not_a_tax_invoice_and_has_no_number(client, reader, supplier, resident, medicine):
    draft = make_invoice(branch=supplier, patient=resident, lines=three_lines(medicine), finalize=False)

    response = get_pdf(client, reader, f"{INVOICES}/{draft.id}.pdf")

    assert response.status_code == 200, response.content
    (page,) = pdf_png(response.content, "draft")
    assert response["Content-Disposition"] == f'inline; filename="draft-{str(draft.id)[:8]}.pdf"'
    text = pdf_text(response.content, layout=True)
    assert lines_with(text, "DRAFT - NOT A TAX INVOICE")
    assert lines_with(text, "Invoice No.", "Not numbered (draft)")
    assert "BLR/" not in text
    assert lines_with(text, "Grand total (INR)", "4,343.59")
    assert "Settlement" not in text
    assert lines_with(text, "Bengaluru Central Clinic", "DRAFT - NOT A TAX INVOICE")  # the title, on one line
    assert reddish_share(page) > 0.01  # the mark DRAFT across the page


def test_a_cancelled_invoice_is_marked_cancelled_with_its_reason(client, reader, supplier, resident, medicine):
    invoice = make_invoice(branch=supplier, patient=resident, lines=three_lines(medicine))
    services.invoice_cancel(invoice=invoice, reason="Raised against the wrong patient")

    response = get_pdf(client, reader, f"{INVOICES}/{invoice.id}.pdf")

    assert response.status_code == 200, response.content
    (page,) = pdf_png(response.content, "cancelled")
    assert response["Content-Disposition"] == 'inline; filename="BLR-2026-27-00001.pdf"'
    text = pdf_text(response.content, layout=True)
    assert lines_with(text, "Bengaluru Central Clinic", "TAX INVOICE")
    assert reddish_share(page) > 0.01  # the banner and the mark CANCELLED across the page
    today = timezone.localdate().strftime("%d %b %Y")
    assert lines_with(text, f"Cancelled on {today}: Raised against the wrong patient")
    assert "Settlement" not in text


def test_text_that_looks_like_markup_prints_as_sent_and_letters_the_font_lacks_never_vanish(
    client, reader, supplier, medicine
):
    patient = PatientFactory(first_name="Priyā", last_name="Śarmā Müller प्रिया", registration_branch=supplier)
    line = services.LineInput(
        service_name="Dressing <b>large</b> & sterile " + "x" * 150,
        department=medicine,
        rate=D("100.00"),
        tax_rate=D("5"),
    )
    invoice = make_invoice(branch=supplier, patient=patient, lines=[line])

    response = get_pdf(client, reader, f"{INVOICES}/{invoice.id}.pdf")

    assert response.status_code == 200, response.content
    pdf_png(response.content, "markup-and-scripts")
    text = words(response.content)
    assert "Dressing <b>large</b> & sterile xxxx" in text
    # Vera has Western European accents (ü); others print as their base letter; another script as "?".
    assert "Priya Sarma Müller ??????" in text


def test_a_long_invoice_continues_on_further_pages_under_the_table_header(client, reader, supplier, resident, medicine):
    lines = [
        services.LineInput(service_name=f"Physio visit {n}", department=medicine, rate=D("700"), tax_rate=D("18"))
        for n in range(1, 81)
    ]
    invoice = make_invoice(branch=supplier, patient=resident, lines=lines)

    response = get_pdf(client, reader, f"{INVOICES}/{invoice.id}.pdf")

    assert response.status_code == 200, response.content
    pdf_png(response.content, "long-invoice")
    pages = pdf_pages(response.content)
    assert pages >= 3
    text = pdf_text(response.content, layout=True)
    table_pages = [page for page in text.split("\f") if lines_with(page, "Physio visit")]
    assert len(table_pages) >= 2
    for page in table_pages:  # the header row again on each page the table continues on
        assert lines_with(page, "# Description HSN/SAC Qty Rate Disc. Taxable GST CGST SGST Amount")
    assert lines_with(text, "80 Physio visit 80", "826.00")
    assert lines_with(text, f"Page {pages} of {pages}")
    assert lines_with(text, "Grand total (INR)", "66,080.00")


def test_an_invoice_of_another_branch_is_404_and_audits_no_patient(client, reader, mum, medicine):
    elsewhere = PatientFactory(registration_branch=mum, address_state="Maharashtra")
    invoice = make_invoice(branch=mum, patient=elsewhere, department=medicine)

    response = get_pdf(client, reader, f"{INVOICES}/{invoice.id}.pdf")

    assert response.status_code == 404
    assert response["Content-Type"] == "application/problem+json"
    assert response.json()["code"] == "not_found"
    assert audit_row(response).patient_ids == []


@pytest.mark.parametrize("ref", ["unknown", "malformed", "another_invoices"])
def test_a_credit_note_not_of_this_invoice_is_404_and_audits_no_patient(
    client, reader, invoice, supplier, ref, resident
):
    other = make_invoice(branch=supplier, patient=resident, department=invoice.line_items.first().department)
    line = other.line_items.get()
    foreign = services.credit_note_issue(
        invoice=other, reason="Duplicate", lines=[services.CreditLineInput(line_id=line.id)]
    )
    credit_note_id = {
        "unknown": "0b6f4c1e-3d1a-4a57-9a57-0d0c6f0f8a11",
        "malformed": "CN-1",
        "another_invoices": foreign.id,
    }

    response = get_pdf(client, reader, f"{INVOICES}/{invoice.id}/credit-notes/{credit_note_id[ref]}.pdf")

    assert response.status_code == 404, response.content
    assert response.json()["code"] == "not_found"
    assert audit_row(response).patient_ids == []


def test_a_credit_note_of_another_branchs_invoice_is_404(client, reader, mum, medicine):
    elsewhere = PatientFactory(registration_branch=mum, address_state="Maharashtra")
    invoice = make_invoice(branch=mum, patient=elsewhere, department=medicine)
    credit_note = services.credit_note_issue(
        invoice=invoice, reason="Duplicate", lines=[services.CreditLineInput(line_id=invoice.line_items.get().id)]
    )

    response = get_pdf(client, reader, f"{INVOICES}/{invoice.id}/credit-notes/{credit_note.id}.pdf")

    assert response.status_code == 404
    assert response.json()["code"] == "not_found"


@pytest.mark.parametrize("document", ["invoice", "credit_note"])
def test_without_a_token_or_without_billing_read_the_pdf_is_refused_and_nothing_changes(
    client, token_for, blr, invoice, writer, document
):
    credit_note = services.credit_note_issue(
        invoice=invoice, reason="Goodwill", lines=[services.CreditLineInput(line_id=invoice.line_items.first().id)]
    )
    url = (
        f"{INVOICES}/{invoice.id}.pdf"
        if document == "invoice"
        else f"{INVOICES}/{invoice.id}/credit-notes/{credit_note.id}.pdf"
    )
    before = snapshot(invoice)

    anonymous = client.get(url)
    wrong_scope = client.get(url, **bearer(writer))

    assert (anonymous.status_code, anonymous.json()["code"]) == (401, "not_authenticated")
    assert anonymous["WWW-Authenticate"].startswith('Bearer realm="clinic-api"')
    assert (wrong_scope.status_code, wrong_scope.json()["code"]) == (403, "insufficient_scope")
    assert (
        wrong_scope["WWW-Authenticate"] == 'Bearer realm="clinic-api", error="insufficient_scope", scope="billing:read"'
    )
    assert b"%PDF" not in anonymous.content + wrong_scope.content
    assert snapshot(invoice) == before
    assert audit_row(wrong_scope).patient_ids == []


@pytest.mark.parametrize("accept", ["application/pdf", "*/*", "application/pdf, application/json;q=0.5"])
def test_the_pdf_path_answers_clients_that_accept_pdf(client, reader, invoice, accept):
    response = get_pdf(client, reader, f"{INVOICES}/{invoice.id}.pdf", HTTP_ACCEPT=accept)

    assert response.status_code == 200
    assert response.content.startswith(b"%PDF-")


@pytest.mark.parametrize("document", ["invoice", "credit_note"])
def test_a_client_accepting_octet_stream_gets_the_same_document_labelled_so(client, reader, invoice, document):
    # Generated clients (openapi-python-client) read bytes of this type only (issue 36: no override).
    if document == "invoice":
        url = f"{INVOICES}/{invoice.id}.pdf"
    else:
        url = f"{INVOICES}/{invoice.id}/credit-notes/{credit_and_refund(invoice).id}.pdf"
    audited = AuditLogEntry.objects.count()

    as_bytes = get_pdf(client, reader, url, HTTP_ACCEPT="application/octet-stream")
    as_pdf = get_pdf(client, reader, url, HTTP_ACCEPT="application/pdf")

    assert as_bytes.status_code == 200
    assert as_bytes["Content-Type"] == "application/octet-stream"
    assert as_bytes["Content-Disposition"] == as_pdf["Content-Disposition"]
    assert as_bytes["Cache-Control"] == "no-store"
    assert as_bytes.content.startswith(b"%PDF-")
    assert pdf_text(as_bytes.content) == pdf_text(as_pdf.content)
    assert as_pdf["Content-Type"] == "application/pdf"
    assert audit_row(as_bytes).patient_ids == [invoice.patient_id]
    assert AuditLogEntry.objects.count() == audited + 2


def test_a_client_that_accepts_only_json_is_406_on_the_pdf_path(client, reader, invoice):
    response = get_pdf(client, reader, f"{INVOICES}/{invoice.id}.pdf", HTTP_ACCEPT="application/json")

    assert response.status_code == 406
    assert response["Content-Type"] == "application/problem+json"
    assert response.json()["code"] == "not_acceptable"


@pytest.mark.parametrize("document", ["invoice", "credit_note"])
def test_options_describes_the_pdf_path_in_json(client, reader, invoice, document):
    url = f"{INVOICES}/{invoice.id}.pdf" if document == "invoice" else f"{INVOICES}/{invoice.id}/credit-notes/x.pdf"

    response = client.options(url, **bearer(reader))

    assert response.status_code == 200, response.content
    assert response["Content-Type"] == "application/json"
    assert response.json()["name"] == {"invoice": "Invoice PDF", "credit_note": "Credit Note PDF"}[document]
    assert "GET" in response["Allow"]


def test_a_pdf_that_cannot_be_rendered_is_a_500_problem_with_a_log_line_and_no_part_of_a_file(
    client, reader, invoice, monkeypatch, caplog
):
    # Nothing we store makes ReportLab fail (text wraps, tables continue on the next page), so the
    # third-party layout itself is made to fail, half-way through writing its output.
    def fail(self: SimpleDocTemplate, *args: Any, **kwargs: Any) -> None:
        self.filename.write(b"%PDF-1.4 half a file")
        raise ValueError("layout failed")

    monkeypatch.setattr(SimpleDocTemplate, "build", fail)
    caplog.set_level(logging.ERROR, logger="clinic.api")

    response = get_pdf(client, reader, f"{INVOICES}/{invoice.id}.pdf")

    assert response.status_code == 500
    assert response["Content-Type"] == "application/problem+json"
    assert "Content-Disposition" not in response
    assert response.json() == {
        "type": "/api/v1/problems/internal_error",
        "title": "Internal server error",
        "status": 500,
        "code": "internal_error",
        "request_id": response["X-Request-ID"],
    }
    assert b"%PDF" not in response.content
    (record,) = [r for r in caplog.records if r.name == "clinic.api"]
    assert record.levelno == logging.ERROR
    assert record.exc_info is not None
    error = record.exc_info[1]
    assert isinstance(error, RenderError)
    assert str(error) == "Could not render the PDF of tax invoice BLR/2026-27/00001."
    assert isinstance(error.__cause__, ValueError)


def test_the_invoice_detail_answers_the_pdf_for_accept_application_pdf_and_json_otherwise(client, reader, invoice):
    detail = f"/api/v1/billing/invoices/{invoice.id}"
    audited = AuditLogEntry.objects.count()

    printed = client.get(detail, HTTP_ACCEPT="application/pdf", **bearer(reader))
    preferred = client.get(detail, HTTP_ACCEPT="application/pdf, application/json;q=0.5", **bearer(reader))
    plain = client.get(detail, **bearer(reader))
    refused = client.get(detail, HTTP_ACCEPT="text/csv", **bearer(reader))

    for response in (printed, preferred):
        assert response.status_code == 200
        assert response["Content-Type"] == "application/pdf"
        assert response.content.startswith(b"%PDF-")
        assert response["Cache-Control"] == "no-store"
    assert pdf_text(printed.content) == pdf_text(client.get(f"{detail}.pdf", **bearer(reader)).content)
    assert invoice.invoice_number in pdf_text(printed.content)
    assert plain["Content-Type"] == "application/json"
    assert plain.json()["invoice_number"] == invoice.invoice_number
    assert refused.status_code == 406
    assert refused["Content-Type"] == "application/problem+json"
    # Every read of the invoice names its patient in the audit log, the PDF ones included.
    assert AuditLogEntry.objects.count() == audited + 5


def test_no_other_invoice_operation_answers_a_pdf(client, reader, invoice):
    response = client.get("/api/v1/billing/invoices", HTTP_ACCEPT="application/pdf", **bearer(reader))

    assert response.status_code == 406
    assert response["Content-Type"] == "application/problem+json"


def test_a_format_query_parameter_is_no_way_around_accept(client, reader, invoice):
    response = client.get(f"/api/v1/billing/invoices/{invoice.id}", {"format": "pdf"}, **bearer(reader))

    assert response.status_code == 400
    assert response.json()["code"] == "unknown_parameter"
