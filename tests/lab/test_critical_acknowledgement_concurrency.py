"""Acknowledging one critical value from many sessions at once, with real threads on their own PostgreSQL
connections: the order's row lock lets exactly one through; every other is refused naming who acknowledged
it, and the row keeps the first acknowledgement."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.utils import timezone

from clinic.errors import InvalidState
from lab import review, services
from lab.models import LabResult, Priority, RangeSex, ReferenceRange
from lab.results import ResultInput, lab_results_record
from tests.factories import BranchFactory, DepartmentFactory, DoctorFactory
from tests.helpers import all_at_once
from tests.lab.order_factories import AnalyteFactory, LabTestFactory
from tests.patients.factories import PatientFactory

pytestmark = pytest.mark.django_db(transaction=True)

THREADS = 8


def critical_result() -> LabResult:
    blr = BranchFactory(code="BLR", state="Karnataka", time_zone="Asia/Kolkata")
    cbc = LabTestFactory(code="CBC", name="Complete blood count")
    hgb = AnalyteFactory(test=cbc, code="HGB", unit="g/dL", critical_low=Decimal("7"))
    ReferenceRange.objects.create(
        analyte=hgb, sex=RangeSex.ANY, age_min_days=0, low=Decimal("12"), high=Decimal("15.5")
    )
    patient = PatientFactory(registration_branch=blr, date_of_birth=timezone.localdate() - timedelta(days=9000))
    doctor = DoctorFactory(department=DepartmentFactory(), branches=[blr])
    order = services.lab_order_create(
        branch=blr, patient=patient, doctor=doctor, tests=[cbc], priority=Priority.STAT, ordered_by="test"
    )
    services.lab_order_collect(order=order)
    lab_results_record(
        order=order,
        results=[ResultInput(test="CBC", analyte="HGB", value="5.1")],
        performed_at=timezone.now(),
        performer="K. Menon",
        status="preliminary",
    )
    return LabResult.objects.get()


def test_one_of_many_simultaneous_acknowledgements_wins_and_the_others_are_refused() -> None:
    result = critical_result()

    def acknowledge(actor: str) -> Any:
        return lambda: review.lab_result_acknowledge_critical(result=result, actor=actor)

    outcomes = all_at_once([acknowledge(f"staff:tech{n}") for n in range(THREADS)])

    won = [outcome for outcome in outcomes if isinstance(outcome, LabResult)]
    refused = [outcome for outcome in outcomes if isinstance(outcome, InvalidState)]
    assert (len(won), len(refused)) == (1, THREADS - 1), outcomes
    stored = LabResult.objects.get()
    assert stored.critical_acknowledged_by == won[0].critical_acknowledged_by
    assert stored.critical_acknowledged_at == won[0].critical_acknowledged_at
    assert all(f"was already acknowledged by {stored.critical_acknowledged_by} on" in r.detail for r in refused)
