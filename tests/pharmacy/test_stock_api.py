"""The catalogue and stock under /api/v1/pharmacy (docs/api-rules.md §14): GET drugs, GET stock (on hand per drug
and branch, expired apart, reorder levels, filters), POST receipts and adjustments; transfers and expiry
write-offs through the services."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest

from clinic.errors import FieldError, InvalidState
from pharmacy import services
from pharmacy.errors import InsufficientStock
from pharmacy.models import Batch, MovementKind, StockMovement
from tests.billing.factories import body, get, post_json
from tests.helpers import REQUEST_BOOKKEEPING, assert_problem, error_codes, error_fields, row_counts
from tests.pharmacy.factories import (
    ADJUSTMENTS,
    DRUGS,
    RECEIPTS,
    STOCK,
    DrugFactory,
    PharmacyWorld,
    expire,
    ledger_sum,
    make_pharmacy_world,
    on_hand,
    today,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(token_for) -> PharmacyWorld:
    return make_pharmacy_world(token_for)


def _receipt(**changes):
    payload = {
        "drug": "PARA500",
        "batch_number": "CR2611A",
        "expiry_date": (today() + timedelta(days=400)).isoformat(),
        "quantity": 500,
        "unit_cost": 1.2,
        "mrp": 2,
    }
    payload.update(changes)
    return payload


PARA_REF = {
    "code": "PARA500",
    "name": "Paracetamol 500 mg tablet",
    "brand_name": "Crocin",
    "schedule": "OTC",
    "unit": "tablet",
}


def test_the_drug_list_shows_the_active_catalogue_by_code_with_filters(client, world):
    DrugFactory(code="OLD1", active=False)

    everything = get(client, world.reader, DRUGS)
    schedule_h = get(client, world.reader, DRUGS, {"schedule": "H"})
    searched = get(client, world.reader, DRUGS, {"search": "croc"})
    bad = get(client, world.reader, DRUGS, {"schedule": "Z", "serach": "x"})

    assert [d["code"] for d in body(everything)] == ["ALPRAZ05", "AMOX500", "MORPH10", "PARA500"]
    assert everything["X-Total-Count"] == "4"
    assert body(schedule_h) == [
        {
            "id": str(world.amox.id),
            "code": "AMOX500",
            "generic_name": "Amoxicillin",
            "brand_name": "Mox",
            "form": "capsule",
            "strength": "500 mg",
            "hsn_code": "30041010",
            "gst_rate": Decimal("12.00"),
            "schedule": "H",
            "unit": "capsule",
            "mrp": None,
        }
    ]
    assert [d["code"] for d in body(searched)] == ["PARA500"]
    assert bad.status_code == 400
    assert assert_problem(bad, 400, "unknown_parameter")


def test_a_receipt_creates_the_batch_and_answers_the_movement(client, world):
    response = post_json(client, world.writer, RECEIPTS, _receipt())

    assert response.status_code == 201, response.content
    batch = Batch.objects.get()
    movement = StockMovement.objects.get()
    assert body(response) == {
        "movement_id": movement.id,
        "kind": "receipt",
        "quantity": 500,
        "reason": None,
        "actor": movement.actor,
        "at": movement.at.astimezone(world.blr.zone).isoformat(),
        "drug": PARA_REF,
        "branch_id": str(world.blr.id),
        "batch": {
            "id": str(batch.id),
            "batch_id": str(batch.id),
            "batch_number": "CR2611A",
            "expiry_date": (today() + timedelta(days=400)).isoformat(),
            "quantity_on_hand": 500,
            "unit_cost": Decimal("1.20"),
            "mrp": Decimal("2.00"),
            "expired": False,
        },
    }
    assert movement.actor.startswith("api:")
    assert response["Location"] == f"/api/v1/pharmacy/stock?branch_id={world.blr.id}&drug=PARA500"


def test_a_second_receipt_of_a_batch_adds_to_it(client, world):
    post_json(client, world.writer, RECEIPTS, _receipt(quantity=10))

    response = post_json(client, world.writer, RECEIPTS, _receipt(quantity=5))

    assert response.status_code == 201, response.content
    batch = Batch.objects.get()
    assert (on_hand(batch), ledger_sum(batch)) == (15, 15)


def test_a_receipt_that_contradicts_the_batch_is_a_400_and_changes_nothing(client, world):
    post_json(client, world.writer, RECEIPTS, _receipt(quantity=10))
    before = row_counts(exclude=REQUEST_BOOKKEEPING)

    response = post_json(
        client, world.writer, RECEIPTS, _receipt(expiry_date=(today() + timedelta(days=9)).isoformat(), mrp=3)
    )

    assert error_fields(response) == ["expiry_date", "mrp"]
    assert row_counts(exclude=REQUEST_BOOKKEEPING) == before
    assert on_hand(Batch.objects.get()) == 10


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({"quantity": 0}, [("quantity", "min_value")]),
        ({"quantity": -1}, [("quantity", "min_value")]),
        ({"quantity": 1.5}, [("quantity", "invalid")]),
        ({"quantity": "1e9"}, [("quantity", "invalid")]),
        ({"quantity": 1_000_000}, [("quantity", "max_value")]),
        ({"quantity": "\u0661\u0660"}, [("quantity", "invalid")]),
        ({"drug": "NOPE"}, [("drug", "invalid")]),
        ({"mrp": -1}, [("mrp", "min_value")]),
        ({"expiry_date": "2020-01-01"}, [("expiry_date", "invalid")]),
        ({"batch_number": "A\u0000B"}, [("batch_number", "null_characters_not_allowed")]),
    ],
)
def test_bad_receipts_are_400s_naming_the_field_and_change_nothing(client, world, changes, expected):
    before = row_counts(exclude=REQUEST_BOOKKEEPING)

    response = post_json(client, world.writer, RECEIPTS, _receipt(**changes))

    assert error_codes(response) == expected
    assert row_counts(exclude=REQUEST_BOOKKEEPING) == before


def test_a_receipt_at_a_branch_the_client_cannot_see_is_a_400_naming_branch_id(client, world):
    before = row_counts(exclude=REQUEST_BOOKKEEPING)

    response = post_json(client, world.writer, RECEIPTS, _receipt(branch_id=str(world.mum.id)))

    assert error_fields(response) == ["branch_id"]
    assert row_counts(exclude=REQUEST_BOOKKEEPING) == before


def test_an_adjustment_needs_a_reason_and_never_takes_more_than_the_batch_holds(client, world):
    batch = world.receive(world.para, "B1", 10)
    before = row_counts(exclude=REQUEST_BOOKKEEPING)

    no_reason = post_json(client, world.writer, ADJUSTMENTS, {"drug": "PARA500", "batch_number": "B1", "quantity": -1})
    zero = post_json(
        client, world.writer, ADJUSTMENTS, {"drug": "PARA500", "batch_number": "B1", "quantity": 0, "reason": "x"}
    )
    too_many = post_json(
        client, world.writer, ADJUSTMENTS, {"drug": "PARA500", "batch_number": "B1", "quantity": -11, "reason": "x"}
    )
    unknown = post_json(
        client, world.writer, ADJUSTMENTS, {"drug": "PARA500", "batch_number": "B9", "quantity": -1, "reason": "x"}
    )

    assert error_fields(no_reason) == ["reason"]
    assert error_codes(zero) == [("quantity", "nonzero")]
    assert_problem(too_many, 409, "insufficient_stock", drug="PARA500", available=10)
    assert error_fields(unknown) == ["batch_number"]
    assert row_counts(exclude=REQUEST_BOOKKEEPING) == before
    ok = post_json(
        client, world.writer, ADJUSTMENTS, {"drug": "PARA500", "batch_number": "B1", "quantity": -4, "reason": "Count"}
    )
    assert ok.status_code == 201, ok.content
    assert (body(ok)["kind"], body(ok)["quantity"], body(ok)["reason"]) == ("adjustment", -4, "Count")
    assert (on_hand(batch), ledger_sum(batch)) == (6, 6)


def test_the_stock_list_shows_on_hand_apart_from_expired_stock_with_reorder_levels(client, world):
    fresh = world.receive(world.para, "NEW", 30, expires_in_days=200, mrp="2.50")
    old = expire(world.receive(world.para, "OLD", 7))
    world.reorder(world.para, 50)
    world.reorder(world.amox, 10)  # never received: on hand 0, below its level
    world.receive(world.para, "MUM", 99, branch=world.mum)  # another branch: not shown

    response = get(client, world.reader, STOCK)

    assert response.status_code == 200
    amox_ref = {
        "code": "AMOX500",
        "name": "Amoxicillin 500 mg capsule",
        "brand_name": "Mox",
        "schedule": "H",
        "unit": "capsule",
    }
    assert body(response) == [
        {
            "drug": amox_ref,
            "branch_id": str(world.blr.id),
            "on_hand": 0,
            "expired_on_hand": 0,
            "reorder_level": 10,
            "below_reorder": True,
            "batches": [],
        },
        {
            "drug": PARA_REF,
            "branch_id": str(world.blr.id),
            "on_hand": 30,
            "expired_on_hand": 7,
            "reorder_level": 50,
            "below_reorder": True,
            "batches": [
                {
                    "id": str(old.id),
                    "batch_id": str(old.id),
                    "batch_number": "OLD",
                    "expiry_date": old.expiry_date.isoformat(),
                    "quantity_on_hand": 7,
                    "unit_cost": Decimal("1.00"),
                    "mrp": Decimal("2.00"),
                    "expired": True,
                },
                {
                    "id": str(fresh.id),
                    "batch_id": str(fresh.id),
                    "batch_number": "NEW",
                    "expiry_date": fresh.expiry_date.isoformat(),
                    "quantity_on_hand": 30,
                    "unit_cost": Decimal("1.00"),
                    "mrp": Decimal("2.50"),
                    "expired": False,
                },
            ],
        },
    ]
    assert response["X-Total-Count"] == "2"


def test_the_stock_filters(client, world):
    world.receive(world.para, "P", 100, expires_in_days=20)
    world.receive(world.amox, "A", 5, expires_in_days=300)
    world.reorder(world.amox, 10)

    below = get(client, world.reader, STOCK, {"below_reorder": "true"})
    not_below = get(client, world.reader, STOCK, {"below_reorder": "false"})
    expiring = get(client, world.reader, STOCK, {"expiring_before": (today() + timedelta(days=30)).isoformat()})
    by_drug = get(client, world.reader, STOCK, {"drug": "AMOX500", "branch_id": str(world.blr.id)})
    hidden = get(client, world.reader, STOCK, {"branch_id": str(world.mum.id)})

    assert [e["drug"]["code"] for e in body(below)] == ["AMOX500"]
    assert [e["drug"]["code"] for e in body(not_below)] == ["PARA500"]
    assert [e["drug"]["code"] for e in body(expiring)] == ["PARA500"]
    assert [e["drug"]["code"] for e in body(by_drug)] == ["AMOX500"]
    # docs/api-rules.md §5.4: another branch's id finds nothing, as an unknown one would.
    assert (hidden.status_code, body(hidden), hidden["X-Total-Count"]) == (200, [], "0")


def test_the_stock_list_query_count_does_not_grow_with_drugs_or_batches(client, world, django_assert_num_queries):
    for n in range(4):
        drug = DrugFactory(code=f"X{n}")
        world.receive(drug, "B1", 5)
        world.receive(drug, "B2", 5, expires_in_days=50)
        world.reorder(drug, 3)
    emptied = world.receive(world.para, "E1", 2)
    world.dispense((world.para, 2))

    # Request bookkeeping (the client's branches come with the token), then four: the visible branches, the page of (drug, branch) pairs with its total,
    # their drugs, their batches holding stock.
    with django_assert_num_queries(6):
        response = get(client, world.reader, STOCK)

    assert [(e["drug"]["code"], e["on_hand"], len(e["batches"])) for e in body(response)] == [
        ("PARA500", 0, 0),
        ("X0", 10, 2),
        ("X1", 10, 2),
        ("X2", 10, 2),
        ("X3", 10, 2),
    ]
    assert on_hand(emptied) == 0


def test_the_stock_list_pages_in_sql_by_code_bytewise_then_branch_with_the_total_past_the_end(client, world, token_for):
    # "A-1" < "A1" < "a" bytewise; a linguistic collation would ignore the hyphen and put A1 first.
    for code in ("A1", "A-1", "B0"):
        drug = DrugFactory(code=code)
        world.receive(drug, "L1", 5, branch=world.mum)
        world.receive(drug, "L2", 7)
    world.reorder(world.para, 3, branch=world.mum)
    everywhere = token_for(["pharmacy:read"])

    first = get(client, everywhere, STOCK, {"per_page": "3"})
    second = get(client, everywhere, STOCK, {"per_page": "3", "page": "2"})
    past = get(client, everywhere, STOCK, {"per_page": "3", "page": "4"})

    listed = [(e["drug"]["code"], e["branch_id"], e["on_hand"]) for e in body(first) + body(second)]
    blr, mum = str(world.blr.id), str(world.mum.id)
    assert listed == [("A-1", blr, 7), ("A-1", mum, 5), ("A1", blr, 7), ("A1", mum, 5), ("B0", blr, 7), ("B0", mum, 5)]
    assert first.headers["X-Total-Count"] == second.headers["X-Total-Count"] == past.headers["X-Total-Count"] == "7"
    assert (past.status_code, body(past)) == (200, [])
    last = get(client, everywhere, STOCK, {"per_page": "3", "page": "3"})
    assert [(e["drug"]["code"], e["branch_id"], e["on_hand"], e["reorder_level"]) for e in body(last)] == [
        ("PARA500", mum, 0, 3)
    ]


def test_a_transfer_moves_units_to_the_same_batch_number_at_the_other_branch_in_one_transaction(world):
    batch = world.receive(world.para, "TR1", 20)

    out, into = services.stock_transfer(batch=batch, to_branch=world.mum, quantity=8, actor="staff:ravi")

    there = Batch.objects.get(branch=world.mum, batch_number="TR1")
    assert (out.kind, out.quantity, into.kind, into.quantity) == ("transfer_out", -8, "transfer_in", 8)
    assert out.transfer_id == into.transfer_id is not None
    assert (on_hand(batch), on_hand(there)) == (12, 8)
    assert (there.expiry_date, there.mrp) == (batch.expiry_date, batch.mrp)
    before = row_counts()
    with pytest.raises(InsufficientStock):
        services.stock_transfer(batch=batch, to_branch=world.mum, quantity=13, actor="staff:ravi")
    with pytest.raises(FieldError):
        services.stock_transfer(batch=batch, to_branch=world.blr, quantity=1, actor="staff:ravi")
    assert row_counts() == before
    assert (on_hand(batch), on_hand(there)) == (12, 8)


def test_writing_off_an_expired_batch_empties_it_and_a_fresh_one_is_refused(world):
    fresh = world.receive(world.para, "F", 5)
    old = expire(world.receive(world.para, "O", 9))

    movement = services.batch_write_off_expired(batch=old, actor="staff:ravi")

    assert (movement.kind, movement.quantity, movement.reason) == (MovementKind.EXPIRY_WRITE_OFF, -9, "Expired")
    assert on_hand(old) == 0
    with pytest.raises(InvalidState):
        services.batch_write_off_expired(batch=fresh, actor="staff:ravi")
    with pytest.raises(InvalidState):
        services.batch_write_off_expired(batch=old, actor="staff:ravi")
    assert on_hand(fresh) == 5


def test_a_transfer_into_a_batch_of_another_expiry_there_is_refused_whole(world):
    here = world.receive(world.para, "TR1", 20, expires_in_days=300)
    there = world.receive(world.para, "TR1", 5, expires_in_days=200, branch=world.mum)
    before = row_counts()

    with pytest.raises(FieldError) as refused:
        services.stock_transfer(batch=here, to_branch=world.mum, quantity=8, actor="staff:ravi")

    assert list(refused.value.errors) == ["to_branch"]
    assert row_counts() == before
    assert (on_hand(here), on_hand(there)) == (20, 5)
