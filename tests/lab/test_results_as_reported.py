"""Results a laboratory reported with a comparator (`>14`), as a range (10-20) or with its own range and flag
(docs/operations.md §6, through lab.results as the HL7 channel records them): stored as such, flagged only when
the flag holds for every value they stand for, and shown in the order's representation beside ours. A bounded
value the analyte cannot take is refused and changes nothing."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.utils import timezone

from clinic.errors import FieldError
from lab import selectors, services
from lab.interpretation import ParsedValue, interpret_bounded
from lab.models import LabResult, Priority, RangeSex, ReferenceRange
from lab.representations import lab_order_representation
from lab.results import ResultInput, lab_results_record
from tests.factories import BranchFactory, DepartmentFactory, DoctorFactory
from tests.lab.order_factories import AnalyteFactory, LabTestFactory
from tests.patients.factories import PatientFactory

D = Decimal
pytestmark = pytest.mark.django_db


@pytest.fixture
def order() -> Any:
    blr = BranchFactory(code="BLR", time_zone="Asia/Kolkata")
    cbc = LabTestFactory(code="CBC")
    hgb = AnalyteFactory(test=cbc, code="HGB", unit="g/dL", critical_low=D("7"), critical_high=D("20"), position=0)
    AnalyteFactory(test=cbc, code="NOTE", loinc_code="8251-1", unit="", value_type="text", position=1)
    ReferenceRange.objects.create(analyte=hgb, sex=RangeSex.ANY, age_min_days=0, low=D("12"), high=D("15.5"))
    patient = PatientFactory(registration_branch=blr, date_of_birth=timezone.localdate() - timedelta(days=40 * 365))
    doctor = DoctorFactory(department=DepartmentFactory())
    doctor.branches.add(blr)
    created = services.lab_order_create(
        branch=blr, patient=patient, doctor=doctor, tests=[cbc], priority=Priority.ROUTINE, ordered_by="t"
    )
    services.lab_order_collect(order=created)
    return created


def _record(order: Any, *results: ResultInput) -> None:
    lab_results_record(order=order, results=results, performed_at=timezone.now(), performer="Lab", status="final")


def test_a_comparator_a_range_and_the_laboratorys_own_range_and_flag_are_stored_and_shown(order: Any) -> None:
    _record(
        order,
        ResultInput(test="CBC", analyte="HGB", value="16", comparator=">", reported_range="11.5-16", reported_flag="H"),
    )
    stored = LabResult.objects.get()
    assert (stored.comparator, stored.value_quantity, stored.value_quantity_high, stored.flag) == (
        ">",
        D("16"),
        None,
        "H",
    )
    shown = lab_order_representation(selectors.lab_order_load(order.pk))["items"][0]["results"][0]["current"]
    assert {key: shown[key] for key in ("value_quantity", "comparator", "value_quantity_high", "flag")} == {
        "value_quantity": D("16"),
        "comparator": ">",
        "value_quantity_high": None,
        "flag": "H",
    }
    assert (shown["reported_range"], shown["reported_flag"]) == ("11.5-16", "H")


def test_a_plain_value_shows_no_comparator_and_no_reported_range(order: Any) -> None:
    _record(order, ResultInput(test="CBC", analyte="HGB", value="13"))
    shown = lab_order_representation(selectors.lab_order_load(order.pk))["items"][0]["results"][0]["current"]
    assert [shown[key] for key in ("comparator", "value_quantity_high", "reported_range", "reported_flag")] == [
        None
    ] * 4


@pytest.mark.parametrize(
    ("posted", "field", "message"),
    [
        ({"value": "20", "value_high": "10"}, "results.0.value", "The range's high (10) is below its low (20)."),
        (
            {"value": "10", "value_high": "20", "comparator": ">"},
            "results.0.value",
            "A range (low to high) takes no comparator.",
        ),
        (
            {"value": "10", "comparator": "<>"},
            "results.0.value",
            "The comparator must be one of <, <=, >, >=, not '<>'.",
        ),
        (
            {"analyte": "NOTE", "value": "10", "comparator": ">", "unit": None},
            "results.0.value",
            "Only a quantity takes a comparator or a range; send the value as text.",
        ),
    ],
)
def test_a_bounded_value_the_analyte_cannot_take_is_refused_and_stores_nothing(
    order: Any, posted: dict[str, Any], field: str, message: str
) -> None:
    with pytest.raises(FieldError) as refused:
        _record(order, ResultInput(**{"test": "CBC", "analyte": "HGB", **posted}))
    assert refused.value.errors == {field: message}
    assert LabResult.objects.count() == 0


class _Band:
    sex, age_min_days, age_max_days, low, high = "any", 0, None, D("12"), D("15.5")


@pytest.mark.parametrize(
    ("comparator", "value", "high", "flag"),
    [
        (">", "15.5", None, "H"),  # above the high, whatever it is
        (">=", "15.5", None, ""),  # 15.5 itself is N
        (">", "20", None, "HH"),
        (">=", "20", None, "H"),  # 20 is not past the critical high, 20.1 is: H at least
        ("<", "12", None, "L"),
        ("<=", "12", None, ""),
        ("<", "7", None, "LL"),
        ("<", "13", None, ""),
        ("", "12", "15.5", "N"),
        ("", "3", "6", "LL"),
        ("", "11", "13", ""),
    ],
)
def test_bounded_flags_hold_for_every_value_they_stand_for(
    comparator: str, value: str, high: str | None, flag: str
) -> None:
    parsed = ParsedValue(
        quantity=D(value), text="", unit="g/dL", comparator=comparator, high=None if high is None else D(high)
    )
    assert interpret_bounded(parsed, range=_Band(), critical_low=D("7"), critical_high=D("20")) == flag
