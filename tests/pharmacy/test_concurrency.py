"""The pharmacy under concurrency, with real threads on their own PostgreSQL connections: a batch is never
oversold, a prescription never overdispensed, numbers stay consecutive, and a reorder-level crossing is
announced once."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.test import Client

from integrations.webhooks.models import WebhookEvent
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
