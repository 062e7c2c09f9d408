"""What PostgreSQL itself keeps of billing for accountants (docs/api-rules.md §12), whatever writes the rows:
credit notes, their lines and refunds are never updated nor deleted (ORM or raw SQL), tax categories agree
with the rates, HSN/SAC codes are 4, 6 or 8 ASCII digits, and an invoice's status, credits and refunds
agree with what was paid."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import date
from decimal import Decimal
from typing import Any

import pytest
from django.db import IntegrityError, connection, transaction
from django.db.models import Model
from django.db.models.deletion import ProtectedError
from django.utils import timezone

from billing import services
from billing.models import BillableService, CreditNote, CreditNoteLine, Invoice, LineItem, Refund
from tests.billing.factories import BillableServiceFactory, line, make_invoice, pay

pytestmark = pytest.mark.django_db

D = Decimal
RESTRICT_VIOLATION = "23001"


@pytest.fixture
def invoice(blr, patient, medicine):
    """Two lines (1000.00 at 18 % and 200.00 exempt): grand total 1380.00; 1380.00 paid, then 1180.00
    credited (a credit note of the first line) and 500.00 of it refunded."""
    invoice = make_invoice(
        branch=blr,
        patient=patient,
        lines=[line(medicine), line(medicine, rate="200.00", tax_rate="0", name="Dressing")],
        on=date(2026, 11, 2),
    )
    pay(invoice, "1380.00")
    first = invoice.line_items.get(position=0)
    services.credit_note_issue(invoice=invoice, reason="Not rendered", lines=[services.CreditLineInput(first.id)])
    services.refund_record(invoice=invoice, amount=D("500.00"), payment_mode="upi", reference="UPI-R1")
    return Invoice.objects.get(pk=invoice.pk)


def stored(model: type[Model], pk: Any) -> dict[str, Any]:
    return model._default_manager.filter(pk=pk).values().get()


@contextmanager
def refused(match: str, sqlstate: str | None = None) -> Iterator[None]:
    """The database refuses what the block does (an IntegrityError naming `match`; the block's savepoint
    rolls back), with `sqlstate` when given."""
    with pytest.raises(IntegrityError, match=match) as refusal, transaction.atomic():
        yield
    if sqlstate is not None:
        assert refusal.value.__cause__.sqlstate == sqlstate


# --- Credit notes, their lines and refunds never change ------------------------------------------------------

IMMUTABLE = [
    pytest.param(CreditNote, "billing_creditnote", "credit notes", "reason", id="credit note"),
    pytest.param(CreditNoteLine, "billing_creditnoteline", "credit note lines", "service_name", id="credit note line"),
    pytest.param(Refund, "billing_refund", "refunds", "reference", id="refund"),
]


@pytest.mark.parametrize(("model", "table", "noun", "field"), IMMUTABLE)
def test_no_update_through_the_orm_or_raw_sql(invoice, model, table, noun, field):
    row = model._default_manager.get()
    before = stored(model, row.pk)
    setattr(row, field, "changed")
    message = f"billing {noun} are immutable: UPDATE of {row.pk} refused"

    with refused(message, RESTRICT_VIOLATION):
        row.save()
    with refused(message, RESTRICT_VIOLATION):
        model._default_manager.filter(pk=row.pk).update(**{field: "changed"})
    with refused(message, RESTRICT_VIOLATION), connection.cursor() as cursor:
        cursor.execute(f"UPDATE {table} SET {field} = 'changed' WHERE id = %s", [row.pk])  # noqa: S608
    with refused(message, RESTRICT_VIOLATION), connection.cursor() as cursor:
        cursor.execute(f"UPDATE {table} SET id = id")  # noqa: S608 - even a change of nothing

    assert stored(model, row.pk) == before


@pytest.mark.parametrize(("model", "table", "noun", "field"), IMMUTABLE)
def test_no_delete_through_raw_sql(invoice, model, table, noun, field):
    row = model._default_manager.get()
    before = stored(model, row.pk)
    message = f"billing {noun} are immutable: DELETE of {row.pk} refused"

    with refused(message, RESTRICT_VIOLATION), connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM {table} WHERE id = %s", [row.pk])  # noqa: S608

    assert stored(model, row.pk) == before


@pytest.mark.parametrize(
    ("model", "noun"),
    [
        pytest.param(CreditNoteLine, "credit note lines", id="credit note line"),
        pytest.param(Refund, "refunds", id="refund"),
    ],
)
def test_no_delete_through_the_orm(invoice, model, noun):
    row = model._default_manager.get()
    before = stored(model, row.pk)

    with refused(f"billing {noun} are immutable: DELETE of {row.pk} refused", RESTRICT_VIOLATION):
        row.delete()
    with refused(f"billing {noun} are immutable: DELETE of {row.pk} refused", RESTRICT_VIOLATION):
        model._default_manager.filter(pk=row.pk).delete()

    assert stored(model, row.pk) == before


def test_no_delete_of_a_credit_note_through_the_orm(invoice, blr):
    note = CreditNote.objects.get()
    before = stored(CreditNote, note.pk)

    # Its lines protect it in Django (ProtectedError is an IntegrityError) ...
    with pytest.raises(ProtectedError), transaction.atomic():
        note.delete()
    # ... and a note without lines, which no service writes, is refused by the database.
    bare = CreditNote.objects.create(
        invoice=invoice,
        branch=blr,
        credit_note_number="BLR/CN/2026-27/99999",
        financial_year="2026-27",
        date=date(2026, 11, 3),
        reason="Written by hand",
        taxable=D("1.00"),
        total=D("1.00"),
    )
    with refused(f"billing credit notes are immutable: DELETE of {bare.pk} refused", RESTRICT_VIOLATION):
        CreditNote.objects.filter(pk=bare.pk).delete()

    assert stored(CreditNote, note.pk) == before
    assert CreditNote.objects.count() == 2


# --- Tax category and rate agree --------------------------------------------------------------------------


def credit_line(invoice: Invoice, **values: Any) -> CreditNoteLine:
    """A credit note line written directly (its figures add up), with `values` on top."""
    fields: dict[str, Any] = {
        "credit_note": CreditNote.objects.get(invoice=invoice),
        "line": invoice.line_items.get(position=1),
        "position": 9,
        "service_name": "Dressing",
        "tax_category": "exempt",
        "tax_rate": D("0.00"),
        "taxable_amount": D("10.00"),
        "amount": D("10.00"),
        **values,
    }
    return CreditNoteLine.objects.create(**fields)


MISMATCHED = [("exempt", "18.00"), ("nil_rated", "5.00"), ("zero_rated", "12.00"), ("taxable", "0.00")]


@pytest.mark.parametrize(("category", "rate"), MISMATCHED)
def test_a_category_that_disagrees_with_the_rate_is_refused(invoice, medicine, category, rate):
    service = BillableServiceFactory(code="DERM-PEEL", department=medicine, tax_rate=D("18.00"))
    lines = {line.pk: stored(LineItem, line.pk) for line in invoice.line_items.all()}
    catalogue = stored(BillableService, service.pk)

    with refused("billableservice_tax_category_matches_rate"):
        BillableService.objects.filter(pk=service.pk).update(tax_category=category, tax_rate=D(rate))
    with refused("lineitem_tax_category_matches_rate"):
        LineItem.objects.filter(invoice=invoice).update(tax_category=category, tax_rate=D(rate))
    with refused("creditline_tax_category_matches_rate"):
        credit_line(invoice, tax_category=category, tax_rate=D(rate))

    assert stored(BillableService, service.pk) == catalogue
    assert {line.pk: stored(LineItem, line.pk) for line in invoice.line_items.all()} == lines
    assert CreditNoteLine.objects.count() == 1


def test_the_exempt_line_at_rate_18_is_refused_in_raw_sql_too(invoice):
    exempt = invoice.line_items.get(position=1)

    with refused("lineitem_tax_category_matches_rate"), connection.cursor() as cursor:
        cursor.execute("UPDATE billing_lineitem SET tax_rate = 18 WHERE id = %s", [exempt.pk])

    assert LineItem.objects.get(pk=exempt.pk).tax_rate == D("0.00")


# --- HSN/SAC: 4, 6 or 8 ASCII digits, or blank ----------------------------------------------------------------


@pytest.mark.parametrize(
    "code",
    [
        "12345",  # five digits
        "١٢٣٤",  # four Arabic-Indic digits
        "१२३४५६",  # six Devanagari digits
        "999 31",
        "9993a2",
        "99931",
        "1234567",
        " 9993",
    ],
)
def test_an_hsn_sac_that_is_not_4_6_or_8_ascii_digits_is_refused(invoice, medicine, code):
    service = BillableServiceFactory(code="XRAY", department=medicine, tax_rate=D("0.00"))
    exempt = invoice.line_items.get(position=1)

    with refused("billableservice_hsn_sac_digits"):
        BillableService.objects.filter(pk=service.pk).update(hsn_sac=code)
    with refused("lineitem_hsn_sac_digits"):
        LineItem.objects.filter(pk=exempt.pk).update(hsn_sac=code)
    with refused("creditline_hsn_sac_digits"):
        credit_line(invoice, hsn_sac=code)

    assert BillableService.objects.get(pk=service.pk).hsn_sac == ""
    assert LineItem.objects.get(pk=exempt.pk).hsn_sac == ""
    assert CreditNoteLine.objects.count() == 1


@pytest.mark.parametrize("code", ["", "9993", "999312", "30049099"])
def test_blank_and_4_6_or_8_digit_codes_are_accepted(invoice, medicine, code):
    service = BillableServiceFactory(code="XRAY", department=medicine, tax_rate=D("0.00"))
    exempt = invoice.line_items.get(position=1)

    BillableService.objects.filter(pk=service.pk).update(hsn_sac=code)
    LineItem.objects.filter(pk=exempt.pk).update(hsn_sac=code)
    credit_line(invoice, hsn_sac=code)

    assert BillableService.objects.get(pk=service.pk).hsn_sac == code
    assert LineItem.objects.get(pk=exempt.pk).hsn_sac == code
    assert CreditNoteLine.objects.get(position=9).hsn_sac == code


# --- The invoice's status, credits and refunds agree with what was paid -----------------------------------------


@pytest.fixture
def finalized(blr, patient, medicine):
    """Finalized, grand total 1180.00, nothing paid nor credited."""
    return make_invoice(branch=blr, patient=patient, department=medicine, on=date(2026, 11, 2))


@pytest.mark.parametrize(
    "changes",
    [
        {"status": "paid"},  # nothing paid, nothing credited, 1180.00 due
        {"status": "partially_paid"},  # nothing paid
        {"status": "cancelled", "cancelled_at": timezone.now(), "cancellation_reason": "x", "paid": D("1.00")},
        {"paid": D("100.00")},  # money on an invoice still marked finalized
        {"paid": D("1180.00"), "status": "partially_paid"},  # settled, yet partially paid
        {"paid": D("100.00"), "refunded": D("100.00"), "status": "partially_paid"},  # all of it refunded
        {"paid": D("100.00"), "credited": D("1080.00"), "status": "partially_paid"},  # credits settled the rest
        {"paid": D("1180.00"), "refunded": D("0.01"), "status": "paid"},  # a refund reopened the balance
    ],
)
def test_a_status_that_disagrees_with_the_settlement_is_refused(finalized, changes):
    before = stored(Invoice, finalized.pk)

    with refused("invoice_status_matches_settlement"):
        Invoice.objects.filter(pk=finalized.pk).update(**changes)

    assert stored(Invoice, finalized.pk) == before


@pytest.mark.parametrize(
    "changes",
    [
        {"paid": D("1180.00"), "status": "paid", "credited": D("1180.00")},
        {"paid": D("1180.00"), "refunded": D("1180.00"), "credited": D("1180.00"), "status": "paid"},
        {"paid": D("100.00"), "credited": D("1080.00"), "status": "paid"},
        {"paid": D("1180.00"), "refunded": D("500.00"), "credited": D("680.00"), "status": "paid"},
        {"paid": D("500.00"), "refunded": D("100.00"), "status": "partially_paid"},
    ],
)
def test_a_status_that_agrees_with_the_settlement_is_accepted(finalized, changes):
    Invoice.objects.filter(pk=finalized.pk).update(**changes)

    assert Invoice.objects.filter(pk=finalized.pk, **changes).exists()


def test_more_credited_than_the_grand_total_is_refused(finalized):
    before = stored(Invoice, finalized.pk)

    with refused("invoice_credited_refunded_bounded"):
        Invoice.objects.filter(pk=finalized.pk).update(credited=D("1180.01"), status="paid")
    with refused("invoice_credited_refunded_bounded"), connection.cursor() as cursor:
        cursor.execute("UPDATE billing_invoice SET credited = grand_total + 0.01 WHERE id = %s", [finalized.pk])

    assert stored(Invoice, finalized.pk) == before


def test_more_refunded_than_paid_is_refused(finalized):
    pay(finalized, "100.00")
    before = stored(Invoice, finalized.pk)

    with refused("invoice_credited_refunded_bounded"):
        Invoice.objects.filter(pk=finalized.pk).update(refunded=D("100.01"))
    with refused("invoice_credited_refunded_bounded"), connection.cursor() as cursor:
        cursor.execute("UPDATE billing_invoice SET refunded = paid + 0.01 WHERE id = %s", [finalized.pk])

    assert stored(Invoice, finalized.pk) == before


def test_more_paid_than_the_grand_total_and_the_refunds_is_refused(finalized):
    before = stored(Invoice, finalized.pk)

    with refused("invoice_credited_refunded_bounded"):
        Invoice.objects.filter(pk=finalized.pk).update(paid=D("1280.01"), refunded=D("100.00"), status="paid")

    assert stored(Invoice, finalized.pk) == before


def test_negative_credits_and_refunds_are_refused(finalized):
    before = stored(Invoice, finalized.pk)

    with refused("invoice_amounts_not_negative"):
        Invoice.objects.filter(pk=finalized.pk).update(credited=D("-1.00"))
    with refused("invoice_amounts_not_negative"):
        Invoice.objects.filter(pk=finalized.pk).update(paid=D("-1.00"), refunded=D("-1.00"))

    assert stored(Invoice, finalized.pk) == before
