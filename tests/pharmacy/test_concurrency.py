"""The pharmacy under concurrency, with real threads on their own PostgreSQL connections: a batch is never
oversold, a prescription never overdispensed, numbers stay consecutive, and a reorder-level crossing is
announced once."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection, transaction
from django.test import Client

from integrations.webhooks.models import WebhookEvent
from pharmacy import services
from pharmacy.events import STOCK_BELOW_REORDER
from pharmacy.models import Dispense, Prescription, StockMovement
from tests.billing.factories import post_json
from tests.helpers import all_at_once
from tests.pharmacy.factories import (
    DISPENSES,
    PRESCRIPTIONS,
    PharmacyWorld,
    ledger_sum,
    make_pharmacy_world,
    on_hand,
    today,
)

pytestmark = pytest.mark.django_db(transaction=True)

THREADS = 20


@pytest.fixture
def world(token_for: Any) -> PharmacyWorld:
    return make_pharmacy_world(token_for)


def _api_post(token: str, url: str, payload: dict[str, Any]) -> Callable[[], tuple[int, dict[str, Any]]]:
    def call() -> tuple[int, dict[str, Any]]:
        response = post_json(Client(), token, url, payload)
        return response.status_code, response.json()

    return call


def test_20_concurrent_dispenses_of_one_unit_from_a_batch_of_10_sell_exactly_10(world: PharmacyWorld) -> None:
    batch = world.receive(world.para, "B10", 10)
    payload = {"items": [{"drug": "PARA500", "quantity": 1}]}

    results = all_at_once([_api_post(world.writer, DISPENSES, payload)] * THREADS)

    assert sorted(status for status, _ in results) == [201] * 10 + [409] * 10, results
    refusals = [data for status, data in results if status == 409]
    assert {(p["code"], p["drug"], p["available"]) for p in refusals} == {("insufficient_stock", "PARA500", 0)}
    assert on_hand(batch) == 0
    assert ledger_sum(batch) == 0
    assert StockMovement.objects.filter(kind="dispense").count() == 10
    numbers = sorted(Dispense.objects.values_list("dispense_number", flat=True))
    assert numbers == [f"BLR-DSP-{today().year}-{n:06d}" for n in range(1, 11)]


def test_concurrent_dispenses_against_one_prescription_never_exceed_it(world: PharmacyWorld) -> None:
    batch = world.receive(world.amox, "A", 100)
    prescription = world.prescribe((world.amox, 7))
    payload = {"prescription_id": str(prescription.id), "items": [{"drug": "AMOX500", "quantity": 2}]}

    results = all_at_once([_api_post(world.writer, DISPENSES, payload)] * 10)

    assert sorted(status for status, _ in results) == [201] * 3 + [409] * 7, results
    refusals = sorted((data["code"], data["remaining"]) for status, data in results if status == 409)
    assert refusals == [("exceeds_prescription", 1)] * 7
    prescription.refresh_from_db()
    assert prescription.items.get().dispensed_quantity == 6
    assert prescription.status == "active"
    assert on_hand(batch) == 94


def test_20_concurrent_prescriptions_at_one_branch_take_consecutive_numbers(world: PharmacyWorld) -> None:
    payload = {
        "patient_id": world.patient.patient_id,
        "doctor_id": str(world.doctor.id),
        "items": [
            {"drug": "AMOX500", "dose": "1", "frequency": "tds", "route": "oral", "duration_days": 5, "quantity": 15}
        ],
    }

    results = all_at_once([_api_post(world.writer, PRESCRIPTIONS, payload)] * THREADS)

    assert [status for status, _ in results] == [201] * THREADS, results
    numbers = sorted(Prescription.objects.values_list("prescription_number", flat=True))
    assert numbers == [f"BLR-RX-{today().year}-{n:06d}" for n in range(1, THREADS + 1)]


def test_a_reorder_crossing_raced_by_many_dispenses_is_announced_once(world: PharmacyWorld) -> None:
    world.receive(world.para, "B", 30)
    world.reorder(world.para, 25)
    payload = {"items": [{"drug": "PARA500", "quantity": 1}]}

    results = all_at_once([_api_post(world.writer, DISPENSES, payload)] * 10)

    assert [status for status, _ in results] == [201] * 10
    events = WebhookEvent.objects.filter(type=STOCK_BELOW_REORDER)
    assert [event.payload["stock"]["on_hand"] for event in events] == [24]


def test_a_dispense_waits_for_a_receipt_refilling_an_emptied_batch_and_then_takes_from_it_first(
    world: PharmacyWorld,
) -> None:
    # A dispense reads only the batches holding stock; the stock lock makes it wait for a change in flight
    # and then see that change whole, even one that refills a batch it would not have read.
    old = world.receive(world.para, "OLD", 2, expires_in_days=30)
    world.dispense((world.para, 2))
    world.receive(world.para, "NEW", 5, expires_in_days=300)
    received, release = threading.Event(), threading.Event()
    outcome: dict[str, Any] = {}

    def refill() -> None:
        try:
            with transaction.atomic():
                services.stock_receive(
                    branch=world.blr, drug=world.para, batch_number="OLD", expiry_date=old.expiry_date, quantity=10,
                    unit_cost=old.unit_cost, mrp=old.mrp, actor="staff:stores",
                )  # fmt: skip
                received.set()
                release.wait(30)
        finally:
            connection.close()

    def dispense() -> None:
        try:
            outcome["response"] = _api_post(world.writer, DISPENSES, {"items": [{"drug": "PARA500", "quantity": 3}]})()
        finally:
            connection.close()

    receipt, sale = threading.Thread(target=refill), threading.Thread(target=dispense)
    receipt.start()
    assert received.wait(30)
    sale.start()
    sale.join(1.0)
    waited = sale.is_alive()  # held by the receipt's stock lock
    release.set()
    receipt.join(30)
    sale.join(30)

    assert waited
    status, data = outcome["response"]
    assert status == 201, data
    assert [(line["batch_number"], line["quantity"]) for line in data["lines"]] == [("OLD", 3)]
    assert on_hand(old) == 7
    assert ledger_sum(old) == 7
