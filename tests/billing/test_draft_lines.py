"""Lines billed by another app (a lab order, a dispense) through invoice_draft_lines_add: on the patient's
latest open draft at the branch, else on a new draft; never on a finalized invoice, another branch's draft
or another patient's."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from billing import services
from billing.models import Invoice
from tests.billing.factories import line, make_invoice

pytestmark = pytest.mark.django_db


def _lines(invoice: Invoice) -> list[tuple[int, str, Decimal]]:
    return list(invoice.line_items.order_by("position").values_list("position", "service_name", "amount"))


def test_the_lines_land_on_the_latest_open_draft_of_the_patient_at_the_branch(blr, mum, patient, visitor, medicine):
    older = make_invoice(branch=blr, patient=patient, department=medicine, finalize=False)
    Invoice.objects.filter(pk=older.pk).update(created_at=timezone.now() - timedelta(hours=1))
    latest = make_invoice(branch=blr, patient=patient, department=medicine, finalize=False)
    finalized = make_invoice(branch=blr, patient=patient, department=medicine)
    elsewhere = make_invoice(branch=mum, patient=patient, department=medicine, finalize=False)
    someone_else = make_invoice(branch=blr, patient=visitor, department=medicine, finalize=False)

    billed = services.invoice_draft_lines_add(
        branch=blr,
        patient=patient,
        lines=[line(medicine, rate="100.00", name="CBC"), line(medicine, rate="200.00", tax_rate="0", name="TSH")],
    )

    assert billed.pk == latest.pk
    assert _lines(latest) == [
        (0, "Consultation", Decimal("1180.00")),
        (1, "CBC", Decimal("118.00")),
        (2, "TSH", Decimal("200.00")),
    ]
    latest.refresh_from_db()
    assert latest.grand_total == Decimal("1498.00")
    assert [len(_lines(invoice)) for invoice in (older, finalized, elsewhere, someone_else)] == [1, 1, 1, 1]


def test_without_an_open_draft_the_lines_make_a_new_draft(blr, patient, medicine):
    finalized = make_invoice(branch=blr, patient=patient, department=medicine)

    billed = services.invoice_draft_lines_add(branch=blr, patient=patient, lines=[line(medicine, rate="100.00")])

    assert billed.pk != finalized.pk
    assert (billed.status, billed.grand_total) == ("draft", Decimal("118.00"))
    assert _lines(billed) == [(0, "Consultation", Decimal("118.00"))]
    assert Invoice.objects.count() == 2
