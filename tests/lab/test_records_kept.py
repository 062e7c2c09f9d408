"""Lab orders, items and results are records (docs/api-rules.md §7): PostgreSQL refuses to delete them, and a
result version is never rewritten; superseding it (current true -> false) is the one change allowed."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from lab.models import Analyte, LabOrder, LabOrderItem, LabResult, LabTest
from tests.factories import BranchFactory, DepartmentFactory, DoctorFactory
from tests.patients.factories import PatientFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def result() -> LabResult:
    branch = BranchFactory()
    test = LabTest.objects.create(code="HB", name="Haemoglobin", loinc_code="718-7", kind="lab", specimen_type="Blood")
    analyte = Analyte.objects.create(test=test, code="HGB", loinc_code="718-7", name="Haemoglobin", unit="g/dL")
    order = LabOrder.objects.create(
        branch=branch,
        patient=PatientFactory(registration_branch=branch),
        doctor=DoctorFactory(department=DepartmentFactory()),
        order_number="T-LAB-2026-000001",
    )
    item = LabOrderItem.objects.create(order=order, test=test, accession_number="T-26-0000001", status="collected")
    return LabResult.objects.create(
        item=item,
        analyte=analyte,
        status="final",
        value_quantity=Decimal("13.2"),
        unit="g/dL",
        flag="N",
        performed_at=timezone.now(),
        performer="Lab tech",
    )


@pytest.mark.parametrize("table", ["lab_labresult", "lab_laborderitem", "lab_laborder"])
def test_orders_items_and_results_are_never_deleted(result, table):
    ids = {
        "lab_labresult": result.id,
        "lab_laborderitem": result.item_id,
        "lab_laborder": result.item.order_id,
    }
    with (
        pytest.raises(IntegrityError, match="records are never deleted"),
        transaction.atomic(),
        connection.cursor() as cursor,
    ):
        cursor.execute(f"DELETE FROM {table} WHERE id = %s", [ids[table]])  # noqa: S608 - a fixed table name

    assert LabResult.objects.filter(pk=result.pk).exists()


def test_a_result_version_is_never_rewritten(result):
    with pytest.raises(IntegrityError, match="lab result versions are kept"), transaction.atomic():
        LabResult.objects.filter(pk=result.pk).update(value_quantity=Decimal("9.9"))
    with pytest.raises(IntegrityError, match="lab result versions are kept"), transaction.atomic():
        LabResult.objects.filter(pk=result.pk).update(current=False, flag="L")

    assert LabResult.objects.get(pk=result.pk).value_quantity == Decimal("13.2000")


def test_superseding_a_version_is_allowed_once_and_only_one_version_is_current(result):
    LabResult.objects.filter(pk=result.pk).update(current=False)
    newer = LabResult.objects.create(
        item=result.item,
        analyte=result.analyte,
        version=2,
        status="amended",
        reason="Haemolysed sample",
        value_quantity=Decimal("12.9"),
        unit="g/dL",
        performed_at=timezone.now(),
        performer="Lab tech",
    )

    # Reviving a superseded version is a rewrite too: the trigger refuses it (and the index would).
    with pytest.raises(IntegrityError, match="lab result versions are kept"), transaction.atomic():
        LabResult.objects.filter(pk=result.pk).update(current=True)
    assert list(LabResult.objects.filter(current=True).values_list("pk", flat=True)) == [newer.pk]
    # Two current versions of one analyte are refused by the partial unique index.
    with pytest.raises(IntegrityError, match="labresult_one_current"), transaction.atomic():
        LabResult.objects.create(
            item=result.item,
            analyte=result.analyte,
            version=3,
            status="final",
            value_quantity=Decimal("13.0"),
            performed_at=timezone.now(),
            performer="Lab tech",
        )


def test_an_amended_version_needs_a_reason(result):
    LabResult.objects.filter(pk=result.pk).update(current=False)
    with pytest.raises(IntegrityError, match="labresult_amended_has_reason"), transaction.atomic():
        LabResult.objects.create(
            item=result.item,
            analyte=result.analyte,
            version=2,
            status="amended",
            value_quantity=Decimal("12.9"),
            performed_at=timezone.now(),
            performer="Lab tech",
        )
