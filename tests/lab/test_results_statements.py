"""The results path reads an order's analytes, reference ranges and current results, and writes the item and
order statuses, with constant statements (lab/results.py); each must do what the ORM query it stands for does,
field for field, on an order with several tests beside another order that must not leak in."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.forms.models import model_to_dict
from django.utils import timezone

from lab import results, services
from lab.models import (
    Analyte,
    ItemStatus,
    LabOrder,
    LabOrderItem,
    LabResult,
    OrderStatus,
    Priority,
    RangeSex,
    ReferenceRange,
    ResultStatus,
)
from tests.factories import BranchFactory, DepartmentFactory, DoctorFactory
from tests.lab.order_factories import AnalyteFactory, LabTestFactory
from tests.patients.factories import PatientFactory

pytestmark = pytest.mark.django_db
D = Decimal


def rows(instances: list[Any]) -> list[dict[str, Any]]:
    """Every concrete field of each instance, in order: what the path reads of them."""
    return [{**model_to_dict(instance), "pk": instance.pk, "state_db": instance._state.db} for instance in instances]


@pytest.fixture
def orders() -> tuple[LabOrder, LabOrder]:
    branch = BranchFactory(code="BLR")
    cbc, lft, other = LabTestFactory(code="CBC"), LabTestFactory(code="LFT"), LabTestFactory(code="TSH")
    for test, codes in ((cbc, ("HGB", "PLT", "WBC")), (lft, ("ALT", "AST")), (other, ("TSH",))):
        for position, code in enumerate(codes):
            analyte = AnalyteFactory(test=test, code=code, position=position, critical_low=D("1.5"))
            for sex, minimum in ((RangeSex.FEMALE, 6570), (RangeSex.MALE, 6570), (RangeSex.ANY, 0)):
                ReferenceRange.objects.create(analyte=analyte, sex=sex, age_min_days=minimum, low=D(1), high=D(9))
    patient = PatientFactory(registration_branch=branch, date_of_birth=timezone.localdate() - timedelta(days=40 * 365))
    doctor = DoctorFactory(department=DepartmentFactory())
    doctor.branches.add(branch)

    def collected(tests: list[Any]) -> LabOrder:
        order = services.lab_order_create(
            branch=branch, patient=patient, doctor=doctor, tests=tests, priority=Priority.ROUTINE, ordered_by="test"
        )
        services.lab_order_collect(order=order)
        return order

    order, neighbour = collected([cbc, lft]), collected([other, cbc])
    for target in (order, neighbour):
        for item in target.items.all():
            for analyte in item.test.analytes.all():
                LabResult.objects.create(
                    item=item, analyte=analyte, status=ResultStatus.PRELIMINARY, value_quantity=D("4.2"),
                    performed_at=timezone.now(), performer="t", current=False, version=1,
                )  # fmt: skip
                LabResult.objects.create(
                    item=item, analyte=analyte, status=ResultStatus.FINAL, value_quantity=D("4.3"), unit="g/dL",
                    performed_at=timezone.now(), performer="t", current=True, version=2,
                )  # fmt: skip
    return order, neighbour


def test_the_reads_return_what_the_orm_queries_return(orders: tuple[LabOrder, LabOrder]):
    order, _ = orders
    analytes = Analyte.objects.filter(test__order_items__order_id=order.pk).order_by("id")
    ranges = ReferenceRange.objects.filter(analyte__test__order_items__order_id=order.pk).order_by(
        "analyte_id", "sex", "age_min_days"
    )
    current = LabResult.objects.filter(item__order_id=order.pk, current=True).order_by("id")

    assert rows(results._analytes_of(order.pk)) == rows(list(analytes))
    assert rows(results._ranges_of(order.pk)) == rows(list(ranges))
    assert rows(results._current_of(order.pk)) == rows(list(current))
    # Not vacuous: CBC and LFT's five analytes, three ranges each, one current result each; none of the
    # neighbour order's TSH.
    assert [a.code for a in results._analytes_of(order.pk)] == [a.code for a in analytes]
    assert (len(analytes), len(ranges), len(current)) == (5, 15, 5)
    assert "TSH" not in {a.code for a in results._analytes_of(order.pk)}


def test_the_status_writes_change_only_their_row(orders: tuple[LabOrder, LabOrder]):
    order, neighbour = orders
    item = order.items.order_by("id").first()
    assert item is not None
    before = {row.pk: row.status for row in LabOrderItem.objects.all()}
    later = timezone.now() + timedelta(minutes=5)

    results._write("item_status", [ItemStatus.FINAL, item.pk])
    results._write("order_status", [OrderStatus.RESULTED, later, order.pk])

    after = {row.pk: row.status for row in LabOrderItem.objects.all()}
    assert after == {**before, item.pk: ItemStatus.FINAL}
    assert LabOrder.objects.filter(pk=order.pk).values_list("status", "updated_at").get() == (
        OrderStatus.RESULTED,
        later,
    )
    assert LabOrder.objects.get(pk=neighbour.pk).status == OrderStatus.COLLECTED
