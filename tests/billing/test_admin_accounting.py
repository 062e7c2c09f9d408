"""Billing for accountants in the admin (docs/api-rules.md §12): the catalogue's tax category and HSN/SAC,
credit notes issued from the invoice page, refunds through an add-only inline, read-only credit note and
refund lists, the invoice's credited / net total / refunded / refund due, and Print PDF (the API's
document, audited as staff reading the patient's data). Every change is made by billing.services, and
their refusals are form errors or messages, never a 500."""

from __future__ import annotations

import logging
from datetime import date
from decimal import Decimal
from typing import Any

import pytest
from django.utils import timezone
from reportlab.platypus import SimpleDocTemplate

from billing import services
from billing.models import BillableService, CreditNote, Invoice, LineItem, Refund
from integrations.models import AuditLogEntry
from tests.billing.factories import BillableServiceFactory, make_invoice, pay, snapshot
from tests.billing.test_admin import ADD, change_url, form_data, messages_of
from tests.pdf_tools import pdf_png, pdf_text

pytestmark = pytest.mark.django_db

D = Decimal
CATALOGUE_ADD = "/admin/billing/billableservice/add/"


def three_lines(department: Any) -> list[services.LineInput]:
    """Consultation (exempt, SAC 999312) 800.00; knee brace 2 x 1500.00 - 100.00 at 12 % (3248.00); dressing
    kit 250.50 at 18 % (295.59): grand total 4343.59, intra-state at BLR."""
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
def invoice(blr, patient, medicine) -> Invoice:
    return make_invoice(branch=blr, patient=patient, lines=three_lines(medicine), on=date(2026, 11, 2))


def credit_url(invoice: Invoice) -> str:
    return f"/admin/billing/invoice/{invoice.pk}/credit-note/"


def credit_form(reason: str, invoice: Invoice, rows: dict[str, dict[str, str]]) -> dict[str, str]:
    """The credit note page's POST: `rows` by service name, e.g. {"Knee brace": {"quantity": "1"}}."""
    lines = list(invoice.line_items.order_by("position", "id"))
    data = {
        "reason": reason,
        "lines-TOTAL_FORMS": str(len(lines)),
        "lines-INITIAL_FORMS": str(len(lines)),
        "lines-MIN_NUM_FORMS": "0",
        "lines-MAX_NUM_FORMS": "1000",
    }
    for index, line in enumerate(lines):
        data[f"lines-{index}-line_id"] = str(line.id)
        for name, value in rows.get(line.service_name, {}).items():
            data[f"lines-{index}-{name}"] = value
    return data


def row_errors(response: Any) -> dict[str, Any]:
    """The credit note page's errors by service name (rows without errors left out)."""
    return {row.line.service_name: row.form.errors for row in response.context["page"].rows if row.form.errors}


def audit_rows(path: str) -> list[AuditLogEntry]:
    return list(AuditLogEntry.objects.filter(path=path).order_by("id"))


# --- The catalogue ------------------------------------------------------------------------------------


def test_the_catalogue_lists_tax_category_and_hsn_sac_and_filters_entries_without_a_code(admin_client, medicine):
    BillableServiceFactory(code="CONS", name="Consultation", department=medicine, tax_rate=D("0"), hsn_sac="999312")
    BillableServiceFactory(code="XRAY", name="X-ray", department=medicine, tax_rate=D("0"), hsn_sac="")
    BillableServiceFactory(code="KNEE", name="Knee brace", department=medicine, tax_rate=D("12"), hsn_sac="")

    page = admin_client.get("/admin/billing/billableservice/")
    missing = admin_client.get("/admin/billing/billableservice/", {"hsn_sac": "missing"})
    present = admin_client.get("/admin/billing/billableservice/", {"hsn_sac": "present"})

    assert page.status_code == 200
    assert [(s.code, s.tax_category, s.hsn_sac) for s in page.context["cl"].result_list] == [
        ("CONS", "exempt", "999312"),
        ("KNEE", "taxable", ""),
        ("XRAY", "exempt", ""),
    ]
    headers = [header["text"] for header in page.context["result_headers"]]
    assert headers[1:] == ["code", "name", "department", "rate", "tax category", "tax rate", "HSN/SAC", "active"]
    assert [s.code for s in missing.context["cl"].result_list] == ["KNEE", "XRAY"]
    assert [s.code for s in present.context["cl"].result_list] == ["CONS"]
    assert b"Without HSN/SAC" in page.content


def catalogue_entry(medicine: Any, **fields: str) -> dict[str, Any]:
    return {
        "code": "DRS",
        "name": "Dressing",
        "department": medicine.pk,
        "rate": "250.00",
        "tax_category": "taxable",
        "tax_rate": "18",
        "hsn_sac": "3005",
        "active": "on",
        **fields,
    }


@pytest.mark.parametrize(
    ("fields", "errors"),
    [
        ({"tax_category": "taxable", "tax_rate": "0"}, {"tax_rate"}),
        ({"tax_category": "taxable", "tax_rate": "15"}, {"tax_rate"}),  # not a statutory rate
        ({"tax_category": "exempt", "tax_rate": "18"}, {"tax_rate"}),
        ({"tax_category": "nil_rated", "tax_rate": "5"}, {"tax_rate"}),
        ({"hsn_sac": "30051"}, {"hsn_sac"}),
        ({"hsn_sac": "30AB"}, {"hsn_sac"}),
        ({"rate": "-1.00"}, {"rate"}),
    ],
)
def test_a_catalogue_entry_whose_rate_does_not_fit_its_category_or_code_is_a_form_error(
    admin_client, medicine, fields, errors
):
    response = admin_client.post(CATALOGUE_ADD, catalogue_entry(medicine, **fields))

    assert response.status_code == 200
    assert set(response.context["adminform"].form.errors) == errors
    assert not BillableService.objects.exists()


@pytest.mark.parametrize(
    ("category", "rate", "hsn_sac"),
    [("taxable", "18", "3005"), ("taxable", "5", "30051090"), ("exempt", "0", "999312"), ("zero_rated", "0", "")],
)
def test_a_catalogue_entry_that_fits_is_saved(admin_client, medicine, category, rate, hsn_sac):
    response = admin_client.post(
        CATALOGUE_ADD, catalogue_entry(medicine, tax_category=category, tax_rate=rate, hsn_sac=f" {hsn_sac} ")
    )

    assert response.status_code == 302, response.context["adminform"].form.errors
    entry = BillableService.objects.get()
    assert (entry.tax_category, entry.tax_rate, entry.hsn_sac) == (category, D(rate), hsn_sac)


def test_a_line_of_a_catalogue_service_takes_its_category_and_hsn_sac(admin_client, blr, patient, medicine):
    kit = BillableServiceFactory(
        code="KIT", name="Dressing kit", department=medicine, rate=D("250.50"), tax_rate=D("18"), hsn_sac="3005"
    )
    consultation = BillableServiceFactory(
        code="CONS", name="Consultation", department=medicine, rate=D("800"), tax_rate=D("0"), hsn_sac="999312"
    )
    data = form_data(
        admin_client,
        ADD,
        {"branch": blr, "patient": patient, "date": "2026-11-02"},
        {
            LineItem: (
                {},
                [
                    {"service": kit, "quantity": "1", "discount": "0"},
                    {"service": consultation, "quantity": "1", "discount": "0"},
                    {"service_name": "Brace", "department": medicine, "quantity": "1", "rate": "100", "discount": "0"}
                    | {"tax_rate": "12", "hsn_sac": "90211000"},
                ],
            )
        },
    )

    response = admin_client.post(ADD, data)

    assert response.status_code == 302, messages_of(response)
    lines = Invoice.objects.get().line_items.order_by("position")
    assert [(x.service_name, x.tax_category, x.tax_rate, x.hsn_sac, x.amount) for x in lines] == [
        ("Dressing kit", "taxable", D("18.00"), "3005", D("295.59")),
        ("Consultation", "exempt", D("0.00"), "999312", D("800.00")),
        ("Brace", "taxable", D("12.00"), "90211000", D("112.00")),
    ]


def test_a_line_whose_rate_does_not_fit_its_category_is_a_form_error(admin_client, blr, patient, medicine):
    data = form_data(
        admin_client,
        ADD,
        {"branch": blr, "patient": patient, "date": "2026-11-02"},
        {
            LineItem: (
                {},
                [
                    {"service_name": "Brace", "department": medicine, "quantity": "1", "rate": "100", "discount": "0"}
                    | {"tax_category": "exempt", "tax_rate": "12", "hsn_sac": "9021100"}
                ],
            )
        },
    )

    response = admin_client.post(ADD, data)

    assert response.status_code == 200
    (errors,) = [f.errors for i in response.context["inline_admin_formsets"] for f in i.formset.forms if f.errors]
    assert set(errors) == {"tax_category", "hsn_sac"}
    assert not Invoice.objects.exists()


# --- The invoice page ----------------------------------------------------------------------------------


def test_the_invoice_page_shows_credited_net_total_refunded_refund_due_and_its_tools(admin_client, invoice):
    pay(invoice, "4343.59", mode="upi", reference="UPI-1")
    kit = invoice.line_items.get(service_name="Dressing kit")
    services.credit_note_issue(invoice=invoice, reason="Returned", lines=[services.CreditLineInput(line_id=kit.id)])
    services.refund_record(invoice=invoice, amount=D("100.00"), payment_mode="cash")

    response = admin_client.get(change_url(invoice))

    assert response.status_code == 200
    fields = {
        field.field["name"]: field.contents()
        for fieldset in response.context["adminform"]
        for line in fieldset
        for field in line
    }
    assert {name: fields[name] for name in ("grand_total", "credited", "net_total", "paid", "refunded")} == {
        "grand_total": "4343.59",
        "credited": "295.59",
        "net_total": "4048.00",
        "paid": "4343.59",
        "refunded": "100.00",
    }
    assert (fields["balance"], fields["refund_due"]) == ("0.00", "195.59")
    content = response.content.decode()
    assert f'href="/admin/billing/invoice/{invoice.pk}/pdf/"' in content
    assert f'href="{credit_url(invoice)}"' in content
    assert "BLR/CN/2026-27/00001" in content  # the credit notes inline, with its PDF link
    credit_note = CreditNote.objects.get()
    assert f'href="/admin/billing/creditnote/{credit_note.pk}/pdf/"' in content


def test_a_draft_offers_no_credit_note(admin_client, blr, patient, medicine):
    draft = make_invoice(branch=blr, patient=patient, lines=three_lines(medicine), finalize=False)

    page = admin_client.get(change_url(draft))
    refused = admin_client.get(credit_url(draft))

    assert page.status_code == 200
    assert credit_url(draft) not in page.content.decode()
    assert f"/admin/billing/invoice/{draft.pk}/pdf/" in page.content.decode()
    assert refused.status_code == 302
    assert refused["Location"] == change_url(draft)
    assert any("credit notes are issued on finalized" in m for m in messages_of(refused))


# --- Print PDF ----------------------------------------------------------------------------------------


def test_staff_print_the_tax_invoice_and_the_read_is_audited(admin_client, admin_user, invoice, patient):
    url = f"/admin/billing/invoice/{invoice.pk}/pdf/"

    response = admin_client.get(url)

    assert response.status_code == 200
    assert response["Content-Type"] == "application/pdf"
    assert response["Content-Disposition"] == 'inline; filename="BLR-2026-27-00001.pdf"'
    assert "no-store" in response["Cache-Control"]
    pdf_png(response.content, "admin-tax-invoice")
    text = pdf_text(response.content, layout=True)
    assert "TAX INVOICE" in text
    assert "BLR/2026-27/00001" in text
    assert "Rupees Four Thousand Three Hundred Forty Three and Fifty Nine" in " ".join(text.split())
    (row,) = audit_rows(url)
    assert (row.actor, row.client_id, row.patient_ids, row.status) == (
        f"staff:{admin_user.username}",
        None,
        [patient.pk],
        200,
    )
    assert row.route == "admin/billing/invoice/<path:object_id>/pdf/"


def test_an_unknown_invoice_has_no_pdf(admin_client):
    response = admin_client.get("/admin/billing/invoice/0b6f4c1e-3d1a-4a57-9a57-0d0c6f0f8a11/pdf/")

    assert response.status_code == 404
    assert not AuditLogEntry.objects.exclude(patient_ids=[]).exists()


def test_a_pdf_that_cannot_be_rendered_is_a_message_and_a_log_line_not_a_500(
    admin_client, invoice, monkeypatch, caplog
):
    def fail(self: SimpleDocTemplate, *args: Any, **kwargs: Any) -> None:
        raise ValueError("layout failed")

    monkeypatch.setattr(SimpleDocTemplate, "build", fail)
    caplog.set_level(logging.ERROR, logger="billing.admin")

    response = admin_client.get(f"/admin/billing/invoice/{invoice.pk}/pdf/")

    assert response.status_code == 302
    assert response["Location"] == change_url(invoice)
    assert messages_of(response) == ["The PDF could not be rendered; the error has been logged."]
    (record,) = [r for r in caplog.records if r.name == "billing.admin"]
    assert record.getMessage() == "Could not render BLR-2026-27-00001.pdf for staff:admin"
    assert record.exc_info is not None
    assert not AuditLogEntry.objects.exclude(patient_ids=[]).exists()


# --- Credit notes ---------------------------------------------------------------------------------------


def test_the_credit_note_page_lists_the_lines_with_nothing_chosen_and_is_audited(admin_client, invoice, patient):
    response = admin_client.get(credit_url(invoice))

    assert response.status_code == 200
    rows = response.context["page"].rows
    assert [(row.line.service_name, row.credited) for row in rows] == [
        ("Consultation", D("0.00")),
        ("Knee brace", D("0.00")),
        ("Dressing kit", D("0.00")),
    ]
    assert all(not row.form["whole"].value() and not row.form["quantity"].value() for row in rows)
    (row,) = audit_rows(credit_url(invoice))
    assert row.patient_ids == [patient.pk]


def test_staff_issue_a_credit_note_of_one_knee_brace_and_the_whole_dressing_kit(admin_client, admin_user, invoice):
    pay(invoice, "4343.59", mode="upi", reference="UPI-1")
    before = [snapshot_line for snapshot_line in invoice.line_items.order_by("position").values()]

    response = admin_client.post(
        credit_url(invoice),
        credit_form(
            "Brace and kit returned", invoice, {"Knee brace": {"quantity": "1"}, "Dressing kit": {"whole": "on"}}
        ),
    )

    assert response.status_code == 302, row_errors(response) if response.context else response
    assert response["Location"] == change_url(invoice)
    credit_note = CreditNote.objects.get()
    assert messages_of(response) == [f"Credit note BLR/CN/2026-27/00001 issued for {credit_note.total}."]
    assert (credit_note.reason, credit_note.created_by, credit_note.date) == (
        "Brace and kit returned",
        f"staff:{admin_user.username}",
        timezone.localdate(),
    )
    assert [
        (x.service_name, x.quantity, x.taxable_amount, x.cgst, x.sgst, x.amount) for x in credit_note.lines.all()
    ] == [
        ("Knee brace", D("1.000"), D("1450.00"), D("87.00"), D("87.00"), D("1624.00")),
        ("Dressing kit", D("1.000"), D("250.50"), D("22.55"), D("22.54"), D("295.59")),
    ]
    invoice.refresh_from_db()
    assert (invoice.credited, invoice.net_total, invoice.refund_due, invoice.status) == (
        D("1919.59"),
        D("2424.00"),
        D("1919.59"),
        "paid",
    )
    assert list(invoice.line_items.order_by("position").values()) == before  # the invoice's lines never change
    assert [row.patient_ids for row in audit_rows(credit_url(invoice))] == [[invoice.patient_id]]


def test_an_amount_credit_reverses_the_tax_at_the_lines_rate(admin_client, invoice):
    response = admin_client.post(
        credit_url(invoice), credit_form("Discount agreed", invoice, {"Knee brace": {"amount": "500"}})
    )

    assert response.status_code == 302
    (line,) = CreditNote.objects.get().lines.all()
    assert (line.quantity, line.taxable_amount, line.cgst, line.sgst, line.amount) == (
        None,
        D("500.00"),
        D("30.00"),
        D("30.00"),
        D("560.00"),
    )


@pytest.mark.parametrize(
    ("reason", "rows", "field_errors", "page_errors"),
    [
        ("", {"Knee brace": {"quantity": "1"}}, {}, []),  # the reason is required (a field error, below)
        ("Nothing chosen", {}, {}, ["Name at least one line to credit."]),
        (
            "Too many",
            {"Knee brace": {"quantity": "3"}},
            {"Knee brace": {"quantity": ["At most 2 units are left on this line."]}},
            [],
        ),
        (
            "Too much",
            {"Dressing kit": {"amount": "250.51"}},
            {"Dressing kit": {"amount": ["At most 250.50 of taxable value is left on this line."]}},
            [],
        ),
        (
            "Two ways",
            {"Knee brace": {"quantity": "1", "amount": "10"}},
            {"Knee brace": {"__all__": ["Choose one: all that is left, a quantity or a taxable amount."]}},
            [],
        ),
        (
            "Not a number",
            {"Knee brace": {"quantity": "-1"}},
            {"Knee brace": {"quantity": ["Ensure this value is greater than or equal to 0.001."]}},
            [],
        ),
    ],
)
def test_a_credit_note_the_service_or_the_form_refuses_is_shown_as_errors_and_issues_nothing(
    admin_client, invoice, reason, rows, field_errors, page_errors
):
    before = snapshot(invoice)

    response = admin_client.post(credit_url(invoice), credit_form(reason, invoice, rows))

    assert response.status_code == 200
    page = response.context["page"]
    assert row_errors(response) == field_errors
    assert page.errors == page_errors
    assert bool(page.reason_form.errors) == (reason == "")
    assert not CreditNote.objects.exists()
    assert snapshot(invoice) == before


def test_a_line_already_credited_in_full_is_an_error_on_its_row(admin_client, invoice):
    kit = invoice.line_items.get(service_name="Dressing kit")
    services.credit_note_issue(invoice=invoice, reason="Returned", lines=[services.CreditLineInput(line_id=kit.id)])

    page = admin_client.get(credit_url(invoice))
    response = admin_client.post(credit_url(invoice), credit_form("Again", invoice, {"Dressing kit": {"whole": "on"}}))

    assert [row.credited for row in page.context["page"].rows] == [D("0.00"), D("0.00"), D("295.59")]
    assert response.status_code == 200
    assert row_errors(response) == {"Dressing kit": {"__all__": ["Nothing is left to credit on this line."]}}
    assert CreditNote.objects.count() == 1


def test_an_invoice_cancelled_while_the_page_was_open_issues_nothing(admin_client, invoice):
    data = credit_form("Late", invoice, {"Knee brace": {"quantity": "1"}})
    services.invoice_cancel(invoice=invoice, reason="Wrong patient")

    response = admin_client.post(credit_url(invoice), data)

    assert response.status_code == 302
    assert any("is cancelled" in message for message in messages_of(response))
    assert not CreditNote.objects.exists()


def test_the_credit_note_list_and_page_are_read_only_audited_and_print_the_credit_note(admin_client, invoice, patient):
    kit = invoice.line_items.get(service_name="Dressing kit")
    credit_note = services.credit_note_issue(
        invoice=invoice, reason="Returned", lines=[services.CreditLineInput(line_id=kit.id)]
    )
    page_url = f"/admin/billing/creditnote/{credit_note.pk}/change/"
    pdf_url = f"/admin/billing/creditnote/{credit_note.pk}/pdf/"

    listed = admin_client.get("/admin/billing/creditnote/")
    shown = admin_client.get(page_url)
    changed = admin_client.post(page_url, {"reason": "Changed"})
    added = admin_client.get("/admin/billing/creditnote/add/")
    deleted = admin_client.get(f"/admin/billing/creditnote/{credit_note.pk}/delete/")
    printed = admin_client.get(pdf_url)

    assert listed.status_code == 200
    assert [cn.credit_note_number for cn in listed.context["cl"].result_list] == ["BLR/CN/2026-27/00001"]
    assert pdf_url in listed.content.decode()
    assert shown.status_code == 200
    assert pdf_url in shown.content.decode()
    assert "Dressing kit" in shown.content.decode()  # its lines
    assert (changed.status_code, added.status_code, deleted.status_code) == (403, 403, 403)
    assert CreditNote.objects.get().reason == "Returned"
    assert printed.status_code == 200
    assert printed["Content-Disposition"] == 'inline; filename="BLR-CN-2026-27-00001.pdf"'
    pdf_png(printed.content, "admin-credit-note")
    text = pdf_text(printed.content, layout=True)
    assert "CREDIT NOTE" in text
    assert "BLR/2026-27/00001" in text
    for url in ("/admin/billing/creditnote/", page_url, pdf_url):
        assert [row.patient_ids for row in audit_rows(url)] == [[patient.pk]], url


# --- Refunds -------------------------------------------------------------------------------------------


def test_staff_record_a_refund_through_the_inline(admin_client, admin_user, invoice):
    pay(invoice, "4343.59", mode="upi", reference="UPI-1")
    kit = invoice.line_items.get(service_name="Dressing kit")
    services.credit_note_issue(invoice=invoice, reason="Returned", lines=[services.CreditLineInput(line_id=kit.id)])
    url = change_url(invoice)
    data = form_data(
        admin_client,
        url,
        {},
        {Refund: ({}, [{"amount": "295.59", "payment_mode": "upi", "reference": "RF-1", "refund_date": "2026-11-05"}])},
    )

    response = admin_client.post(url, data)

    assert response.status_code == 302, messages_of(response)
    refund = Refund.objects.get()
    assert (refund.amount, refund.payment_mode, refund.reference, refund.refund_date, refund.recorded_by) == (
        D("295.59"),
        "upi",
        "RF-1",
        date(2026, 11, 5),
        f"staff:{admin_user.username}",
    )
    invoice.refresh_from_db()
    assert (invoice.refunded, invoice.refund_due, invoice.balance, invoice.status) == (
        D("295.59"),
        D("0.00"),
        D("0.00"),
        "paid",
    )


@pytest.mark.parametrize(
    ("row", "errors"),
    [
        ({"amount": "1000.01", "payment_mode": "cash"}, {"amount"}),  # more than was paid
        ({"amount": "0", "payment_mode": "cash"}, {"amount"}),
        ({"amount": "10", "payment_mode": "card"}, {"reference"}),
        ({"amount": "10", "payment_mode": "cash", "refund_date": "2026-11-01"}, {"refund_date"}),  # before the invoice
        ({"amount": "10", "payment_mode": "cash", "refund_date": "2099-01-01"}, {"refund_date"}),
    ],
)
def test_a_refund_the_form_refuses_is_a_form_error_and_changes_nothing(admin_client, invoice, row, errors):
    pay(invoice, "1000.00")
    before = snapshot(invoice)
    url = change_url(invoice)

    response = admin_client.post(url, form_data(admin_client, url, {}, {Refund: ({}, [row])}))

    assert response.status_code == 200
    found = [f.errors for i in response.context["inline_admin_formsets"] for f in i.formset.forms if f.errors]
    assert [set(e) for e in found] == [errors]
    assert not Refund.objects.exists()
    assert snapshot(invoice) == before


def test_a_duplicate_refund_reference_is_a_message_not_a_500(admin_client, invoice):
    pay(invoice, "1000.00")
    services.refund_record(invoice=invoice, amount=D("10.00"), payment_mode="card", reference="RF-1")
    url = change_url(invoice)

    response = admin_client.post(
        url,
        form_data(
            admin_client, url, {}, {Refund: ({}, [{"amount": "20", "payment_mode": "card", "reference": "RF-1"}])}
        ),
    )

    assert response.status_code == 302
    assert "This invoice already has a card refund with reference 'RF-1'." in messages_of(response)
    assert Refund.objects.count() == 1


def test_refunds_are_offered_only_where_something_was_paid_and_are_never_changed(
    admin_client, invoice, blr, patient, medicine
):
    unpaid = admin_client.get(change_url(invoice))
    pay(invoice, "100.00")
    services.refund_record(invoice=invoice, amount=D("10.00"), payment_mode="cash")
    paid = admin_client.get(change_url(invoice))

    def refund_inline(response: Any) -> Any:
        return next(i for i in response.context["inline_admin_formsets"] if i.formset.model is Refund)

    assert not refund_inline(unpaid).has_add_permission
    inline = refund_inline(paid)
    assert inline.has_add_permission
    assert not inline.has_change_permission
    assert not inline.has_delete_permission
    listed = admin_client.get("/admin/billing/refund/")
    assert listed.status_code == 200
    assert [r.amount for r in listed.context["cl"].result_list] == [D("10.00")]
    assert admin_client.get("/admin/billing/refund/add/").status_code == 403
    refund = Refund.objects.get()
    assert admin_client.post(f"/admin/billing/refund/{refund.pk}/change/", {"amount": "1"}).status_code == 403
    assert [row.patient_ids for row in audit_rows("/admin/billing/refund/")] == [[patient.pk]]
