"""PostgreSQL keeps the pharmacy's books whatever writes to it: a batch's on-hand is the sum of its ledger
movements and changes no other way, never goes negative, the ledger is append-only, and records are never
deleted."""

from __future__ import annotations

import uuid
from datetime import timedelta
from decimal import Decimal

import pytest
from django.db import IntegrityError, transaction
from django.utils import timezone

from clinic.db import violated_constraint
from pharmacy import services
from pharmacy.models import (
    Batch,
    ControlledDrugEntry,
    Dispense,
    DispenseLine,
    DispenseReturn,
    DispenseReturnLine,
    MovementKind,
    Prescription,
    PrescriptionItem,
    StockMovement,
)
from tests.pharmacy.factories import PharmacyWorld, ledger_sum, make_pharmacy_world, on_hand, raw_sql, today

pytestmark = pytest.mark.django_db

REFUSED = "23001"  # restrict_violation, what every refusing trigger raises


@pytest.fixture
def world(token_for) -> PharmacyWorld:
    return make_pharmacy_world(token_for)


def _sqlstate(exc: pytest.ExceptionInfo[BaseException]) -> str | None:
    return getattr(exc.value.__cause__, "sqlstate", None)


def _move(batch: Batch, kind: str, quantity: int, **extra) -> StockMovement:
    return StockMovement.objects.create(
        batch=batch, kind=kind, quantity=quantity, actor="test", at=timezone.now(), **extra
    )


def test_a_movement_changes_its_batchs_on_hand_and_the_ledger_sums_to_it(world):
    batch = world.receive(world.para, "B1", 50)

    _move(batch, MovementKind.ADJUSTMENT, -8, reason="count")
    _move(batch, MovementKind.RETURN, 3)

    assert on_hand(batch) == 45
    assert ledger_sum(batch) == 45


def test_a_direct_update_of_the_on_hand_is_refused(world):
    batch = world.receive(world.para, "B1", 50)

    with pytest.raises(IntegrityError) as exc, transaction.atomic():
        raw_sql("UPDATE pharmacy_batch SET quantity_on_hand = 500 WHERE id = %s", [batch.pk])

    assert _sqlstate(exc) == REFUSED
    assert on_hand(batch) == 50


def test_other_columns_of_a_batch_may_change(world):
    batch = world.receive(world.para, "B1", 50)

    Batch.objects.filter(pk=batch.pk).update(mrp=Decimal("2.50"))

    assert Batch.objects.get(pk=batch.pk).mrp == Decimal("2.50")
    assert on_hand(batch) == 50


def test_a_batch_is_created_empty(world):
    with pytest.raises(IntegrityError) as exc, transaction.atomic():
        Batch.objects.create(
            drug=world.para,
            branch=world.blr,
            batch_number="B9",
            expiry_date=today() + timedelta(days=30),
            quantity_on_hand=10,
            unit_cost=Decimal(1),
            mrp=Decimal(2),
            received_at=timezone.now(),
        )

    assert _sqlstate(exc) == REFUSED
    assert Batch.objects.count() == 0


def test_a_movement_that_would_make_the_on_hand_negative_is_refused(world):
    batch = world.receive(world.para, "B1", 5)

    with pytest.raises(IntegrityError) as exc, transaction.atomic():
        _move(batch, MovementKind.DISPENSE, -6)

    assert violated_constraint(exc.value) == "batch_quantity_not_negative"
    assert (on_hand(batch), StockMovement.objects.count()) == (5, 1)


@pytest.mark.parametrize(
    ("kind", "quantity"),
    [
        (MovementKind.RECEIPT, -1),
        (MovementKind.RETURN, -1),
        (MovementKind.DISPENSE, 1),
        (MovementKind.EXPIRY_WRITE_OFF, 1),
        (MovementKind.ADJUSTMENT, 0),
    ],
)
def test_the_sign_of_a_movement_is_checked_per_kind(world, kind, quantity):
    batch = world.receive(world.para, "B1", 5)

    with pytest.raises(IntegrityError) as exc, transaction.atomic():
        _move(batch, kind, quantity, reason="x")

    assert violated_constraint(exc.value) == "stockmovement_quantity_sign_per_kind"
    assert on_hand(batch) == 5


def test_a_transfer_movement_needs_its_transfer_id_and_an_adjustment_its_reason(world):
    batch = world.receive(world.para, "B1", 5)

    with pytest.raises(IntegrityError) as exc, transaction.atomic():
        _move(batch, MovementKind.TRANSFER_OUT, -1)
    assert violated_constraint(exc.value) == "stockmovement_transfer_has_id"
    with pytest.raises(IntegrityError) as exc, transaction.atomic():
        _move(batch, MovementKind.ADJUSTMENT, -1)
    assert violated_constraint(exc.value) == "stockmovement_adjustment_has_reason"
    _move(batch, MovementKind.TRANSFER_OUT, -1, transfer_id=uuid.uuid4())
    assert on_hand(batch) == 4


@pytest.mark.parametrize(
    "sql", ["UPDATE pharmacy_stockmovement SET quantity = 999", "DELETE FROM pharmacy_stockmovement"]
)
def test_the_ledger_refuses_updates_and_deletes(world, sql):
    batch = world.receive(world.para, "B1", 5)

    with pytest.raises(IntegrityError) as exc, transaction.atomic():
        raw_sql(sql)

    assert _sqlstate(exc) == REFUSED
    assert list(StockMovement.objects.values_list("quantity", flat=True)) == [5]
    assert on_hand(batch) == 5


@pytest.mark.parametrize(
    "model",
    [
        Batch,
        Prescription,
        PrescriptionItem,
        Dispense,
        DispenseLine,
        DispenseReturn,
        DispenseReturnLine,
        ControlledDrugEntry,
    ],
)
def test_records_are_never_deleted_even_by_raw_sql(world, model):
    world.receive(world.alpraz, "A1", 10)
    prescription = world.prescribe((world.alpraz, 4))
    dispense = world.dispense((world.alpraz, 2), prescription=prescription)
    services.dispense_return(
        dispense=dispense,
        items=[services.ReturnItem(line_id=dispense.lines.get().id, quantity=1)],
        reason="Spare",
        returned_by="test",
    )
    before = model.objects.count()
    assert before >= 1

    with pytest.raises(IntegrityError) as exc, transaction.atomic():
        raw_sql(f"DELETE FROM {model._meta.db_table}")  # noqa: S608 - a model's table name

    assert _sqlstate(exc) == REFUSED
    assert model.objects.count() == before


def test_more_dispensed_than_prescribed_is_refused_by_postgresql(world):
    world.receive(world.amox, "M1", 10)
    prescription = world.prescribe((world.amox, 3))
    item = prescription.items.get()

    with pytest.raises(IntegrityError) as exc, transaction.atomic():
        PrescriptionItem.objects.filter(pk=item.pk).update(dispensed_quantity=4)

    assert violated_constraint(exc.value) == "prescriptionitem_dispensed_within_quantity"


def test_a_drug_takes_only_a_statutory_gst_rate_and_a_digit_hsn_code(world):
    with pytest.raises(IntegrityError) as exc, transaction.atomic():
        type(world.para).objects.filter(pk=world.para.pk).update(gst_rate=Decimal("7"))
    assert violated_constraint(exc.value) == "drug_gst_rate_statutory"
    with pytest.raises(IntegrityError) as exc, transaction.atomic():
        type(world.para).objects.filter(pk=world.para.pk).update(hsn_code="3004A")
    assert violated_constraint(exc.value) == "drug_hsn_code_digits"


def test_the_controlled_drug_register_is_never_rewritten(world):
    world.receive(world.morph, "M1", 5)
    prescription = world.prescribe((world.morph, 2))
    world.dispense((world.morph, 2), prescription=prescription)

    with pytest.raises(IntegrityError) as exc, transaction.atomic():
        raw_sql("UPDATE pharmacy_controlleddrugentry SET quantity = 1")

    assert _sqlstate(exc) == REFUSED
    assert list(ControlledDrugEntry.objects.values_list("quantity", flat=True)) == [2]
