"""Billing in the admin: drafts with inline lines, finalize and cancel actions, payments through the
add-only inline, read-only payments, and every change made by billing.services."""

from __future__ import annotations

from datetime import date
from decimal import Decimal
from typing import Any

import pytest
from django.contrib.messages import get_messages
from django.db import connection
from django.db.models import Model
from django.test.utils import CaptureQueriesContext

from billing import services
from billing.models import Invoice, LineItem, Payment
from tests.billing.factories import BillableServiceFactory, line, make_invoice, pay, snapshot
from tests.patients.factories import PatientFactory

pytestmark = pytest.mark.django_db

D = Decimal
ADD = "/admin/billing/invoice/add/"
CHANGELIST = "/admin/billing/invoice/"


def change_url(invoice: Invoice) -> str:
    return f"/admin/billing/invoice/{invoice.pk}/change/"


def _value(value: Any) -> Any:
    return value.pk if isinstance(value, Model) else value


def form_data(admin_client: Any, url: str, fields: dict[str, Any], inlines: dict[type, tuple[dict, list]]) -> dict:
    """The POST body of an admin change form: `fields`, and per inline model (changes by row index, new rows),
    with every existing row's current values and the management forms the page expects."""
    page = admin_client.get(url)
    assert page.status_code == 200
    data = {name: _value(value) for name, value in fields.items()}
    for inline in page.context["inline_admin_formsets"]:
        formset = inline.formset
        changes, new = inlines.get(formset.model, ({}, []))
        existing = formset.initial_form_count()
        prefix = formset.prefix
        data.update(
            {
                f"{prefix}-TOTAL_FORMS": existing + len(new),
                f"{prefix}-INITIAL_FORMS": existing,
                f"{prefix}-MIN_NUM_FORMS": 0,
                f"{prefix}-MAX_NUM_FORMS": 1000,
            }
        )
        for index, form in enumerate(formset.initial_forms):
            values = {name: form.initial.get(name) for name in form.fields}
            values["id"] = form.instance.pk
            values.update(changes.get(index, {}))
            data.update({f"{prefix}-{index}-{k}": _value(v) for k, v in values.items() if v is not None})
        for offset, row in enumerate(new):
            data.update({f"{prefix}-{existing + offset}-{k}": _value(v) for k, v in row.items()})
    return data


def messages_of(response: Any) -> list[str]:
    return [str(message) for message in get_messages(response.wsgi_request)]


@pytest.fixture
def ecg(medicine):
    return BillableServiceFactory(code="ECG", name="ECG", department=medicine, rate=D("650.00"), tax_rate=D("0"))


def test_staff_create_a_draft_with_lines_and_the_service_computes_it(admin_client, blr, visitor, ecg, ortho):
    data = form_data(
        admin_client,
        ADD,
        {"branch": blr, "patient": visitor, "date": "2026-11-02"},
        {
            LineItem: (
                {},
                [
                    {"service": ecg, "quantity": "2", "discount": "0"},
                    {
                        "service_name": "Physiotherapy",
                        "department": ortho,
                        "quantity": "0.5",
                        "rate": "700",
                        "discount": "50",
                        "tax_rate": "18",
                    },
                ],
            )
        },
    )

    response = admin_client.post(ADD, data)

    assert response.status_code == 302, response.context["adminform"].errors if response.context else response
    invoice = Invoice.objects.get()
    assert (invoice.status, invoice.invoice_number, invoice.interstate) == ("draft", None, True)
    assert [(x.service_name, x.taxable_amount, x.igst, x.amount) for x in invoice.line_items.order_by("position")] == [
        ("ECG", D("1300.00"), D("0.00"), D("1300.00")),
        ("Physiotherapy", D("300.00"), D("54.00"), D("354.00")),
    ]
    assert (invoice.sub_total, invoice.discount, invoice.igst, invoice.grand_total) == (
        D("1650.00"),
        D("50.00"),
        D("54.00"),
        D("1654.00"),
    )


def test_a_line_without_catalogue_service_needs_its_fields_and_a_sane_discount(admin_client, blr, patient, medicine):
    data = form_data(
        admin_client,
        ADD,
        {"branch": blr, "patient": patient, "date": "2026-11-02"},
        {LineItem: ({}, [{"service_name": "Dressing", "quantity": "1", "rate": "100", "discount": "100.01"}])},
    )

    response = admin_client.post(ADD, data)

    assert response.status_code == 200
    (errors,) = [
        form.errors
        for formset in response.context["inline_admin_formsets"]
        for form in formset.formset.forms
        if form.errors
    ]
    assert set(errors) == {"department", "tax_rate", "discount"}
    assert Invoice.objects.count() == 0


def test_a_future_date_is_a_form_error(admin_client, blr, patient):
    data = form_data(admin_client, ADD, {"branch": blr, "patient": patient, "date": "2099-01-01"}, {})

    response = admin_client.post(ADD, data)

    assert response.status_code == 200
    assert "date" in response.context["adminform"].form.errors
    assert Invoice.objects.count() == 0


def test_editing_a_draft_changes_deletes_and_adds_lines_through_the_services(admin_client, blr, patient, medicine, ecg):
    invoice = make_invoice(branch=blr, patient=patient, department=medicine, finalize=False, on=date(2026, 11, 1))
    services.line_item_add(invoice=invoice, item=line(medicine, rate="200.00", tax_rate="5", name="Dressing"))
    url = change_url(invoice)
    data = form_data(
        admin_client,
        url,
        {"date": "2026-11-02"},
        {
            LineItem: (
                {0: {"quantity": "2"}, 1: {"DELETE": "on"}},
                [{"service": ecg, "quantity": "1", "discount": "50"}],
            )
        },
    )

    response = admin_client.post(url, data)

    assert response.status_code == 302, messages_of(response)
    invoice.refresh_from_db()
    assert invoice.date == date(2026, 11, 2)
    assert [(x.service_name, x.quantity, x.amount) for x in invoice.line_items.order_by("position")] == [
        ("Consultation", D("2.000"), D("2360.00")),
        ("ECG", D("1.000"), D("600.00")),
    ]
    assert invoice.grand_total == D("2960.00")


def test_the_finalize_action_numbers_drafts_in_date_order(admin_client, blr, patient, medicine):
    later = make_invoice(branch=blr, patient=patient, department=medicine, finalize=False, on=date(2026, 11, 2))
    earlier = make_invoice(branch=blr, patient=patient, department=medicine, finalize=False, on=date(2026, 11, 1))
    done = make_invoice(branch=blr, patient=patient, department=medicine, on=date(2026, 10, 1))

    response = admin_client.post(
        CHANGELIST, {"action": "finalize", "_selected_action": [later.pk, earlier.pk, done.pk]}, follow=True
    )

    assert Invoice.objects.get(pk=earlier.pk).invoice_number == "BLR/2026-27/00002"
    assert Invoice.objects.get(pk=later.pk).invoice_number == "BLR/2026-27/00003"
    texts = messages_of(response)
    assert "2 invoice(s) updated." in texts
    assert "Numbers assigned: BLR/2026-27/00002, BLR/2026-27/00003." in texts
    assert any("Cannot finalize an invoice that is finalized" in text for text in texts)


def test_a_draft_is_finalized_from_its_page_after_a_confirmation_and_the_number_is_shown(
    admin_client, blr, patient, medicine
):
    draft = make_invoice(branch=blr, patient=patient, department=medicine, finalize=False)
    finalize_url = f"/admin/billing/invoice/{draft.pk}/finalize/"

    page = admin_client.get(change_url(draft))
    confirm = admin_client.get(finalize_url)
    assert Invoice.objects.get(pk=draft.pk).status == "draft"  # a GET changes nothing
    done = admin_client.post(finalize_url, follow=True)

    assert finalize_url in page.content.decode()
    assert confirm.status_code == 200
    assert "Yes, finalize" in confirm.content.decode()
    finalized = Invoice.objects.get(pk=draft.pk)
    assert finalized.status == "finalized"
    assert messages_of(done) == [f"Invoice finalized: number {finalized.invoice_number} assigned."]
    assert finalize_url not in admin_client.get(change_url(draft)).content.decode()
    again = admin_client.post(finalize_url, follow=True)
    assert any("Cannot finalize an invoice that is finalized" in text for text in messages_of(again))
    assert Invoice.objects.get(pk=draft.pk).invoice_number == finalized.invoice_number


def test_a_finalized_invoice_shows_its_lines_read_only(admin_client, blr, patient, medicine):
    invoice = make_invoice(branch=blr, patient=patient, department=medicine)

    page = admin_client.get(change_url(invoice))

    lines = next(i for i in page.context["inline_admin_formsets"] if i.formset.model is LineItem)
    assert (lines.has_add_permission, lines.has_change_permission, lines.has_delete_permission) == (False, False, False)
    assert "date" not in page.context["adminform"].form.fields


def test_the_cancel_action_asks_for_a_reason_then_cancels_what_it_may(admin_client, blr, patient, medicine):
    draft = make_invoice(branch=blr, patient=patient, department=medicine, finalize=False)
    paid = make_invoice(branch=blr, patient=patient, department=medicine)
    pay(paid, "1180.00")
    before = snapshot(paid)
    selected = {"action": "cancel", "_selected_action": [draft.pk, paid.pk]}

    confirm = admin_client.post(CHANGELIST, selected)
    assert confirm.status_code == 200
    assert b'name="reason"' in confirm.content
    response = admin_client.post(CHANGELIST, {**selected, "confirm": "yes", "reason": "Entered twice"}, follow=True)

    assert Invoice.objects.get(pk=draft.pk).status == "cancelled"
    assert Invoice.objects.get(pk=draft.pk).cancellation_reason == "Entered twice"
    assert snapshot(paid) == before
    assert any("Cannot cancel an invoice that is paid" in text for text in messages_of(response))


def test_staff_record_a_payment_through_the_inline(admin_client, admin_user, blr, patient, medicine):
    invoice = make_invoice(branch=blr, patient=patient, department=medicine, on=date(2026, 11, 2))
    pay(invoice, "100.00")
    url = change_url(invoice)
    data = form_data(
        admin_client,
        url,
        {},
        {
            Payment: (
                {},
                [{"amount": "500.00", "payment_mode": "card", "reference": "POS-981", "payment_date": "2026-11-03"}],
            )
        },
    )

    response = admin_client.post(url, data)

    assert response.status_code == 302, messages_of(response)
    invoice.refresh_from_db()
    assert (invoice.status, invoice.paid) == ("partially_paid", D("600.00"))
    payment = Payment.objects.get(reference="POS-981")
    assert (payment.amount, payment.payment_date, payment.recorded_by) == (
        D("500.00"),
        date(2026, 11, 3),
        f"staff:{admin_user.username}",
    )


def test_a_payment_above_the_balance_is_a_form_error_in_the_admin(admin_client, blr, patient, medicine):
    invoice = make_invoice(branch=blr, patient=patient, department=medicine)
    before = snapshot(invoice)
    url = change_url(invoice)
    data = form_data(admin_client, url, {}, {Payment: ({}, [{"amount": "1180.01", "payment_mode": "upi"}])})

    response = admin_client.post(url, data)

    assert response.status_code == 200
    errors = [f.errors for i in response.context["inline_admin_formsets"] for f in i.formset.forms if f.errors]
    assert set(errors[0]) == {"amount", "reference"}
    assert snapshot(invoice) == before


def test_payments_cannot_be_added_to_drafts_nor_changed_or_deleted(admin_client, blr, patient, medicine):
    draft = make_invoice(branch=blr, patient=patient, department=medicine, finalize=False)
    invoice = make_invoice(branch=blr, patient=patient, department=medicine)
    payment = pay(invoice, "10.00")

    draft_page = admin_client.get(change_url(draft))
    payments = next(i for i in draft_page.context["inline_admin_formsets"] if i.formset.model is Payment)

    assert not payments.has_add_permission
    assert admin_client.get("/admin/billing/payment/add/").status_code == 403
    assert admin_client.post(f"/admin/billing/payment/{payment.pk}/delete/").status_code == 403
    assert admin_client.get(f"/admin/billing/payment/{payment.pk}/change/").status_code == 200  # view only
    assert admin_client.post(f"/admin/billing/payment/{payment.pk}/change/", {"amount": "1"}).status_code == 403
    assert Payment.objects.get().amount == D("10.00")


def test_invoices_cannot_be_deleted_in_the_admin(admin_client, blr, patient, medicine):
    draft = make_invoice(branch=blr, patient=patient, department=medicine, finalize=False)

    assert admin_client.post(f"/admin/billing/invoice/{draft.pk}/delete/").status_code == 403
    assert Invoice.objects.count() == 1


@pytest.mark.parametrize("page", ["invoice", "payment", "billableservice", "invoicenumbercounter"])
def test_billing_list_pages_make_the_same_number_of_queries_for_2_and_8_rows(admin_client, blr, medicine, page):
    def rows(count: int) -> None:
        for _ in range(count):
            invoice = make_invoice(branch=blr, patient=PatientFactory(registration_branch=blr), department=medicine)
            pay(invoice, "1.00")
            BillableServiceFactory(department=medicine)

    def queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            assert admin_client.get(f"/admin/billing/{page}/").status_code == 200
        return len(captured)

    rows(2)
    few = queries()
    rows(6)
    assert queries() == few


def test_a_new_catalogue_line_takes_the_services_tax_rate_not_a_prefilled_zero(admin_client, blr, visitor, medicine):
    """The browser posts what the empty line form shows: a pre-filled 0 % once overrode the catalogue's rate."""
    taxed = BillableServiceFactory(code="DRS", name="Dressing", department=medicine, rate=D("500.00"), tax_rate=D("18"))
    page = admin_client.get(ADD)
    line_formset = next(f.formset for f in page.context["inline_admin_formsets"] if f.formset.model is LineItem)
    shown = line_formset.empty_form["tax_rate"].value()
    assert shown in (None, "")

    data = form_data(
        admin_client,
        ADD,
        {"branch": blr, "patient": visitor, "date": "2026-11-02"},
        {LineItem: ({}, [{"service": taxed, "quantity": "1", "discount": "0", "tax_rate": shown or ""}])},
    )
    response = admin_client.post(ADD, data)

    assert response.status_code == 302
    item = Invoice.objects.get().line_items.get()
    assert (item.tax_rate, item.taxable_amount, item.amount) == (D("18.00"), D("500.00"), D("590.00"))
