"""seed_demo's pharmacy: drugs of every schedule with HSN codes and GST rates, batches at both branches
received through the ledger (one expiring within 90 days, one expired), a prescription and a dispense;
idempotent, and the manifest lists the drug codes."""

from __future__ import annotations

import json
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command

from pharmacy.models import Batch, Dispense, Drug, Prescription, StockMovement
from tests.pharmacy.factories import ledger_sum, today

pytestmark = pytest.mark.django_db

CODES = ["ALPRAZ05", "AMOX500", "AZI500", "CETI10", "MORPH10", "ORS21", "PARA500"]


def test_seed_demo_seeds_the_pharmacy_once_and_lists_the_drugs():
    out = StringIO()

    call_command("seed_demo", "--json", stdout=out)
    counts = (
        Batch.objects.count(),
        StockMovement.objects.count(),
        Prescription.objects.count(),
        Dispense.objects.count(),
    )
    call_command("seed_demo", "--json", stdout=StringIO())

    manifest = json.loads(out.getvalue())
    assert [entry["code"] for entry in manifest["drugs"]] == CODES
    assert set(Drug.objects.values_list("schedule", flat=True)) == {"OTC", "H", "H1", "X"}
    assert counts == (
        Batch.objects.count(),
        StockMovement.objects.count(),
        Prescription.objects.count(),
        Dispense.objects.count(),
    )
    assert set(Batch.objects.values_list("branch__code", flat=True)) == {"BLR", "MUM"}
    for branch in ("BLR", "MUM"):
        here = Batch.objects.filter(branch__code=branch)
        assert here.filter(expiry_date__lte=today()).count() == 1
        assert here.filter(expiry_date__gt=today(), expiry_date__lte=today() + timedelta(days=90)).count() == 1
    assert all(batch.quantity_on_hand == ledger_sum(batch) for batch in Batch.objects.all())
    dispense = Dispense.objects.get()
    assert dispense.invoice is None
    assert dispense.prescription is not None


def test_the_demo_medicines_carry_the_current_gst_rate():
    # Medicines (HSN 3003/3004) have been taxed at 5 % since the rate changes of 22 September 2025.
    call_command("seed_demo", stdout=StringIO())

    rates = dict(Drug.objects.values_list("code", "gst_rate"))

    assert set(rates) == set(CODES)
    assert {str(rate) for rate in rates.values()} == {"5.00"}
