"""seed_demo's billing part: a catalogue across departments and invoices in every status, intra- and
inter-state, created once (idempotent) through the services."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import call_command

from billing.devdata.demo import seed_demo_billing
from billing.models import BillableService, Invoice, Payment
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
    assert BillableService.objects.count() == 8
    assert BillableService.objects.values("department").distinct().count() == 5
    for branch in (blr, mum):
        invoices = Invoice.objects.filter(branch=branch)
        assert set(invoices.values_list("status", flat=True)) == STATUSES
        assert {True, False} == set(invoices.values_list("interstate", flat=True))
        numbers = sorted(n for n in invoices.values_list("invoice_number", flat=True) if n)
        assert numbers == [f"{branch.code}/{numbers[0].split('/')[1]}/{k:05d}" for k in range(1, len(numbers) + 1)]
    assert Invoice.objects.count() == 12
    assert Payment.objects.count() == 6
    assert {entry["status"] for entry in first["invoices"]} == STATUSES
    assert [entry["code"] for entry in first["catalogue"]][:2] == ["CONS-GEN", "CONS-FU"]


def test_seed_demo_lists_the_catalogue_and_invoices_in_its_manifest():
    out = StringIO()

    call_command("seed_demo", "--json", stdout=out)
    call_command("seed_demo", "--json", stdout=StringIO())

    manifest = json.loads(out.getvalue())
    assert len(manifest["catalogue"]) == 8
    assert {entry["status"] for entry in manifest["invoices"]} == STATUSES
    assert Invoice.objects.count() == len(manifest["invoices"]) == 12
