"""seed_demo's billing part: a catalogue across departments and invoices in every status, intra- and
inter-state, created once (idempotent) through the services."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import call_command

from billing.devdata.demo import seed_demo_billing
from billing.models import BillableService, CreditNote, Invoice, Payment, Refund
from tests.patients.factories import PatientFactory

pytestmark = pytest.mark.django_db

STATUSES = {"draft", "finalized", "partially_paid", "paid", "cancelled"}


def test_the_demo_has_a_catalogue_and_invoices_in_every_status_at_every_branch(blr, mum):
    patients = [
        PatientFactory(
            registration_branch=(blr, mum)[n % 2], address_state=("Karnataka", "Maharashtra", "Tamil Nadu")[n % 3]
        )
        for n in range(12)
    ]

    first = seed_demo_billing(branches=[blr, mum], patients=patients)
    again = seed_demo_billing(branches=[blr, mum], patients=patients)

    assert first == again
    assert BillableService.objects.count() == 11
    assert BillableService.objects.values("department").distinct().count() == 6
    # Exempt healthcare services and taxable items, every one with its HSN/SAC code.
    assert set(BillableService.objects.values_list("tax_category", flat=True)) == {"exempt", "taxable"}
    assert not BillableService.objects.filter(hsn_sac="").exists()
    for branch in (blr, mum):
        invoices = Invoice.objects.filter(branch=branch)
        assert set(invoices.values_list("status", flat=True)) == STATUSES
        assert {True, False} == set(invoices.values_list("interstate", flat=True))
        numbers = sorted(n for n in invoices.values_list("invoice_number", flat=True) if n)
        assert numbers == [f"{branch.code}/{numbers[0].split('/')[1]}/{k:05d}" for k in range(1, len(numbers) + 1)]
    assert Invoice.objects.count() == 14
    assert Payment.objects.count() == 6
    # At each branch the paid invoice's cosmetic peel was credited and the money refunded.
    notes = CreditNote.objects.order_by("branch__code")
    assert [n.credit_note_number.split("/")[:2] for n in notes] == [["BLR", "CN"], ["MUM", "CN"]]
    assert [r.amount for r in Refund.objects.order_by("branch__code")] == [n.total for n in notes]
    assert all(invoice.refund_due == 0 for invoice in Invoice.objects.all())
    assert len(first["credit_notes"]) == len(first["refunds"]) == 2
    assert {entry["status"] for entry in first["invoices"]} == STATUSES
    assert [entry["code"] for entry in first["catalogue"]][:2] == ["CONS-GEN", "CONS-FU"]


def test_seed_demo_lists_the_catalogue_and_invoices_in_its_manifest():
    out = StringIO()

    call_command("seed_demo", "--json", stdout=out)
    call_command("seed_demo", "--json", stdout=StringIO())

    manifest = json.loads(out.getvalue())
    assert len(manifest["catalogue"]) == 11
    assert {entry["tax_category"] for entry in manifest["catalogue"]} == {"exempt", "taxable"}
    assert len(manifest["credit_notes"]) == len(manifest["refunds"]) == 2
    assert {entry["status"] for entry in manifest["invoices"]} == STATUSES
    assert Invoice.objects.count() == len(manifest["invoices"]) == 14
