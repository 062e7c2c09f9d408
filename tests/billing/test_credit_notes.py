"""Credit notes (docs/api-rules.md §12): POST/GET /api/v1/billing/invoices/{id}/credit-notes and the credit note
detail. Tax reversed line by line, own gap-free series per branch and financial year, the invoice's
credited / net_total / balance / refund_due and status, and everything refused with nothing written."""

from __future__ import annotations

from datetime import date
from decimal import Decimal

import pytest
from django.utils import timezone

from billing import services
from billing.models import CreditNote, CreditNoteLine, CreditNoteNumberCounter, Invoice
from billing.numbering import financial_year
from tests.billing.factories import INVOICES, body, get, line, make_invoice, pay, post_json, snapshot
from tests.helpers import REQUEST_BOOKKEEPING, assert_problem, error_fields, row_counts

pytestmark = pytest.mark.django_db

D = Decimal


def url(invoice: Invoice) -> str:
    return f"{INVOICES}/{invoice.id}/credit-notes"


@pytest.fixture
def invoice(blr, patient, medicine, ortho):
    """Finalized at BLR, intra-state: 1000.00 at 18 % (1180.00) and 2 x 150.00 exempt (300.00); 1480.00."""
    return make_invoice(
        branch=blr,
        patient=patient,
        lines=[line(medicine), line(ortho, rate="150.00", tax_rate="0", quantity="2", name="Dressing")],
    )


def lines_of(invoice: Invoice) -> tuple[object, object]:
    taxed, exempt = invoice.line_items.order_by("position")
    return taxed, exempt


def test_crediting_a_whole_line_reverses_its_tax_and_numbers_the_note(client, writer, invoice):
    taxed, _ = lines_of(invoice)

    response = post_json(
        client, writer, url(invoice), {"reason": "Not performed", "lines": [{"line_id": str(taxed.id)}]}
    )

    assert response.status_code == 201, response.content
    note = CreditNote.objects.get()
    year = financial_year(timezone.localdate())
    assert response["Location"] == f"{url(invoice)}/{note.id}"
    data = body(response)
    assert data["credit_note"] == {
        "id": str(note.id),
        "credit_note_number": f"BLR/CN/{year}/00001",
        "date": timezone.localdate().isoformat(),
        "invoice_id": str(invoice.id),
        "invoice_number": invoice.invoice_number,
        "reason": "Not performed",
        "lines": [
            {
                "id": str(note.lines.get().id),
                "line_id": str(taxed.id),
                "service_name": "Consultation",
                "hsn_sac": None,
                "tax_category": "taxable",
                "tax_rate": D("18.00"),
                "quantity": 1,
                "taxable_amount": D("1000.00"),
                "cgst": D("90.00"),
                "sgst": D("90.00"),
                "igst": D("0.00"),
                "amount": D("1180.00"),
            }
        ],
        "totals": {
            "taxable": D("1000.00"),
            "cgst": D("90.00"),
            "sgst": D("90.00"),
            "igst": D("0.00"),
            "tax": D("180.00"),
            "total": D("1180.00"),
        },
        "created_at": data["credit_note"]["created_at"],
    }
    assert data["credit_note"]["created_at"].endswith("+05:30")
    assert data["invoice"] == {
        "id": str(invoice.id),
        "status": "finalized",
        "paid": D("0.00"),
        "credited": D("1180.00"),
        "net_total": D("300.00"),
        "refunded": D("0.00"),
        "balance": D("300.00"),
        "refund_due": D("0.00"),
    }
    # The invoice's own lines and totals never change.
    stored = Invoice.objects.get()
    assert (stored.grand_total, stored.credited) == (D("1480.00"), D("1180.00"))
    assert list(stored.line_items.order_by("position").values_list("amount", flat=True)) == [D("1180.00"), D("300.00")]
    assert CreditNoteNumberCounter.objects.get(branch=invoice.branch, financial_year=year).last_number == 1


def test_a_quantity_credits_its_share_of_the_line_and_the_rest_takes_exactly_what_is_left(client, writer, blr):
    from tests.factories import DepartmentFactory
    from tests.patients.factories import PatientFactory

    visitor = PatientFactory(registration_branch=blr, address_state="Maharashtra")
    invoice = make_invoice(
        branch=blr,
        patient=visitor,
        lines=[line(DepartmentFactory(), rate="33.33", tax_rate="5", quantity="3")],  # 99.99, IGST 5.00
    )
    (only,) = invoice.line_items.all()

    first = post_json(
        client, writer, url(invoice), {"reason": "1 unit", "lines": [{"line_id": str(only.id), "quantity": 1}]}
    )
    second = post_json(client, writer, url(invoice), {"reason": "rest", "lines": [{"line_id": str(only.id)}]})

    assert (first.status_code, second.status_code) == (201, 201), (first.content, second.content)
    one, rest = body(first)["credit_note"]["lines"][0], body(second)["credit_note"]["lines"][0]
    assert (one["quantity"], one["taxable_amount"], one["igst"], one["cgst"]) == (1, D("33.33"), D("1.67"), D("0.00"))
    assert (rest["quantity"], rest["taxable_amount"], rest["igst"]) == (2, D("66.66"), D("3.33"))
    # In all, exactly the line: its taxable value and its tax, whatever the rounding of each part.
    assert one["taxable_amount"] + rest["taxable_amount"] == only.taxable_amount
    assert one["igst"] + rest["igst"] == only.igst == D("5.00")
    numbers = [body(r)["credit_note"]["credit_note_number"][-5:] for r in (first, second)]
    assert numbers == ["00001", "00002"]
    assert body(second)["invoice"]["balance"] == D("0.00")
    assert body(second)["invoice"]["status"] == "paid"  # nothing left to collect: settled


def test_an_amount_credits_taxable_value_with_the_lines_tax_on_top(client, writer, invoice):
    taxed, exempt = lines_of(invoice)
    payload = {
        "reason": "Discount agreed after billing",
        "lines": [{"line_id": str(taxed.id), "amount": "100.05"}, {"line_id": str(exempt.id), "amount": 50}],
    }

    response = post_json(client, writer, url(invoice), payload)

    assert response.status_code == 201, response.content
    credited = body(response)["credit_note"]
    assert [(x["taxable_amount"], x["cgst"], x["sgst"], x["amount"], x["quantity"]) for x in credited["lines"]] == [
        (D("100.05"), D("9.01"), D("9.00"), D("118.06"), None),  # tax 18.01: the odd paisa to CGST
        (D("50.00"), D("0.00"), D("0.00"), D("50.00"), None),
    ]
    assert credited["totals"]["total"] == D("168.06")
    assert body(response)["invoice"]["net_total"] == D("1311.94")


def test_a_paid_invoice_credited_owes_a_refund_and_never_shows_a_negative_balance(client, writer, invoice):
    pay(invoice, "1480.00")
    _, exempt = lines_of(invoice)

    response = post_json(
        client,
        writer,
        url(invoice),
        {"reason": "One dressing unused", "lines": [{"line_id": str(exempt.id), "quantity": 1}]},
    )

    assert response.status_code == 201, response.content
    assert body(response)["invoice"] == {
        "id": str(invoice.id),
        "status": "paid",
        "paid": D("1480.00"),
        "credited": D("150.00"),
        "net_total": D("1330.00"),
        "refunded": D("0.00"),
        "balance": D("0.00"),
        "refund_due": D("150.00"),
    }


def test_a_partly_paid_invoice_credited_down_to_what_was_paid_becomes_paid(client, writer, invoice):
    pay(invoice, "1180.00")  # 300.00 left
    _, exempt = lines_of(invoice)

    response = post_json(
        client, writer, url(invoice), {"reason": "Dressings not used", "lines": [{"line_id": str(exempt.id)}]}
    )

    assert body(response)["invoice"]["status"] == "paid"
    assert body(response)["invoice"]["balance"] == D("0.00")
    # Nothing left to collect: a payment is now refused on the state.
    refused = post_json(client, writer, f"{INVOICES}/{invoice.id}/payments", {"amount": 1, "payment_mode": "cash"})
    assert_problem(refused, 409, "invalid_state", current_status="paid")


def test_credit_notes_of_each_branch_and_year_have_their_own_series(
    client, writer, blr, mum, patient, medicine, token_for
):
    blr_invoices = [make_invoice(branch=blr, patient=patient, department=medicine) for _ in range(3)]
    mum_invoice = make_invoice(branch=mum, patient=patient, department=medicine)
    for invoice in [*blr_invoices, mum_invoice]:
        services.credit_note_issue(
            invoice=invoice,
            reason="x",
            lines=[services.CreditLineInput(line_id=invoice.line_items.get().id, amount=D("1"))],
        )
    year = financial_year(timezone.localdate())
    assert sorted(CreditNote.objects.values_list("credit_note_number", flat=True)) == [
        f"BLR/CN/{year}/00001",
        f"BLR/CN/{year}/00002",
        f"BLR/CN/{year}/00003",
        f"MUM/CN/{year}/00001",
    ]
    # Invoice numbers are a separate series: untouched by credit notes.
    assert sorted(Invoice.objects.filter(branch=blr).values_list("invoice_number", flat=True))[-1].endswith("00003")


def test_the_list_and_the_detail_show_the_notes_oldest_first(client, writer, reader, invoice):
    taxed, exempt = lines_of(invoice)
    for target in (exempt, taxed):
        post_json(client, writer, url(invoice), {"reason": "x", "lines": [{"line_id": str(target.id), "amount": 10}]})

    listed = get(client, reader, url(invoice))
    detail = body(get(client, reader, f"{INVOICES}/{invoice.id}"))

    assert listed.status_code == 200
    assert listed["X-Total-Count"] == "2"
    notes = body(listed)
    assert [n["credit_note_number"][-5:] for n in notes] == ["00001", "00002"]
    assert detail["credit_notes"] == notes
    assert (detail["credited"], detail["net_total"]) == (D("21.80"), D("1458.20"))
    one = get(client, reader, f"{url(invoice)}/{notes[1]['id']}")
    assert body(one) == notes[1]
    assert one["Cache-Control"] == "no-store"


@pytest.mark.parametrize(
    ("lines", "fields"),
    [
        ([], ["lines"]),
        ([{"line_id": "not-a-uuid"}], ["lines.0.line_id"]),
        ([{"line_id": "{taxed}", "quantity": 1, "amount": 5}], ["lines.0.amount"]),
        ([{"line_id": "{taxed}", "quantity": 0}], ["lines.0.quantity"]),
        ([{"line_id": "{taxed}", "amount": "-1"}], ["lines.0.amount"]),
        ([{"line_id": "{taxed}", "amount": "1000.01"}], ["lines.0.amount"]),
        ([{"line_id": "{exempt}", "quantity": "2.001"}], ["lines.0.quantity"]),
        ([{"line_id": "{taxed}"}, {"line_id": "{taxed}"}], ["lines.1.line_id"]),
        ([{"line_id": "{other}"}], ["lines.0.line_id"]),
        ([{"line_id": "{taxed}", "colour": "red"}], ["lines.0.colour"]),
        ([{"line_id": "{taxed}", "amount": "1\u0000"}], ["lines.0.amount"]),
        ([{"line_id": "{taxed}", "quantity": "\u0661"}], ["lines.0.quantity"]),
    ],
)
def test_bad_credit_notes_are_400_naming_the_field_and_write_nothing(
    client, writer, invoice, blr, patient, medicine, lines, fields
):
    taxed, exempt = lines_of(invoice)
    other = make_invoice(branch=blr, patient=patient, department=medicine).line_items.get()
    ids = {"{taxed}": str(taxed.id), "{exempt}": str(exempt.id), "{other}": str(other.id)}
    payload = {
        "reason": "x",
        "lines": [{k: ids.get(v, v) if k == "line_id" else v for k, v in item.items()} for item in lines],
    }
    before, counts = snapshot(invoice), row_counts(exclude=REQUEST_BOOKKEEPING)

    response = post_json(client, writer, url(invoice), payload)

    assert error_fields(response) == fields
    assert (snapshot(invoice), row_counts(exclude=REQUEST_BOOKKEEPING)) == (before, counts)


def test_a_blank_reason_is_400_and_writes_nothing(client, writer, invoice):
    taxed, _ = lines_of(invoice)
    counts = row_counts(exclude=REQUEST_BOOKKEEPING)

    response = post_json(client, writer, url(invoice), {"reason": "   ", "lines": [{"line_id": str(taxed.id)}]})

    assert error_fields(response) == ["reason"]
    assert row_counts(exclude=REQUEST_BOOKKEEPING) == counts


def test_a_line_credited_in_full_cannot_be_credited_again(client, writer, invoice):
    taxed, _ = lines_of(invoice)
    post_json(client, writer, url(invoice), {"reason": "x", "lines": [{"line_id": str(taxed.id)}]})
    counts = row_counts(exclude=REQUEST_BOOKKEEPING)

    again = post_json(client, writer, url(invoice), {"reason": "x", "lines": [{"line_id": str(taxed.id), "amount": 1}]})

    assert error_fields(again) == ["lines.0.line_id"]  # nothing is left to credit on it
    assert row_counts(exclude=REQUEST_BOOKKEEPING) == counts


@pytest.mark.parametrize("state", ["draft", "cancelled"])
def test_drafts_and_cancelled_invoices_cannot_be_credited(client, writer, blr, patient, medicine, state):
    invoice = make_invoice(branch=blr, patient=patient, department=medicine, finalize=False)
    if state == "cancelled":
        services.invoice_cancel(invoice=invoice, reason="wrong patient")
    counts = row_counts(exclude=REQUEST_BOOKKEEPING)

    response = post_json(
        client, writer, url(invoice), {"reason": "x", "lines": [{"line_id": str(invoice.line_items.get().id)}]}
    )

    assert_problem(response, 409, "invalid_state", current_status=state)
    assert row_counts(exclude=REQUEST_BOOKKEEPING) == counts


def test_an_invoice_with_credit_notes_cannot_be_cancelled(client, writer, invoice):
    taxed, _ = lines_of(invoice)
    post_json(client, writer, url(invoice), {"reason": "x", "lines": [{"line_id": str(taxed.id), "amount": 5}]})
    before = snapshot(invoice)

    response = post_json(client, writer, f"{INVOICES}/{invoice.id}/cancel", {"reason": "changed my mind"})

    assert_problem(response, 409, "invalid_state", current_status="finalized")
    assert snapshot(invoice) == before


def test_another_branchs_invoice_and_credit_note_are_404(client, writer, reader, mum, patient, medicine, invoice):
    theirs = make_invoice(branch=mum, patient=patient, department=medicine)
    note = services.credit_note_issue(
        invoice=theirs, reason="x", lines=[services.CreditLineInput(line_id=theirs.line_items.get().id, amount=D("1"))]
    )
    counts = row_counts(exclude=REQUEST_BOOKKEEPING)

    posted = post_json(
        client, writer, url(theirs), {"reason": "x", "lines": [{"line_id": str(theirs.line_items.get().id)}]}
    )
    listed = get(client, reader, url(theirs))
    # Their note through our invoice's path: not a note of this invoice.
    crossed = get(client, reader, f"{url(invoice)}/{note.id}")

    for response in (posted, listed, crossed):
        assert_problem(response, 404, "not_found")
    assert row_counts(exclude=REQUEST_BOOKKEEPING) == counts


def test_scopes_are_enforced(client, reader, writer, invoice):
    taxed, _ = lines_of(invoice)
    counts = row_counts(exclude=REQUEST_BOOKKEEPING)

    refused = post_json(client, reader, url(invoice), {"reason": "x", "lines": [{"line_id": str(taxed.id)}]})
    listed = get(client, writer, url(invoice))

    assert refused.status_code == listed.status_code == 403
    assert row_counts(exclude=REQUEST_BOOKKEEPING) == counts


def test_an_idempotent_retry_replays_the_201_without_a_second_note(client, writer, invoice):
    taxed, _ = lines_of(invoice)
    payload = {"reason": "x", "lines": [{"line_id": str(taxed.id), "amount": 10}]}

    first = post_json(client, writer, url(invoice), payload, key="cn-1")
    second = post_json(client, writer, url(invoice), payload, key="cn-1")

    assert (first.status_code, second.status_code) == (201, 201)
    assert first.content == second.content
    assert CreditNote.objects.count() == CreditNoteLine.objects.count() == 1


def test_the_financial_year_of_the_note_is_its_own_date_not_the_invoices(client, writer, blr, patient, medicine):
    last_year = make_invoice(branch=blr, patient=patient, department=medicine, on=date(2026, 3, 31))

    response = post_json(
        client,
        writer,
        url(last_year),
        {"reason": "x", "lines": [{"line_id": str(last_year.line_items.get().id), "amount": 1}]},
    )

    assert last_year.invoice_number.split("/")[1] == "2025-26"
    assert body(response)["credit_note"]["credit_note_number"].split("/")[2] == financial_year(timezone.localdate())
