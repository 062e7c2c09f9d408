"""The pharmacy events (docs/api-rules.md §8 and §14): `prescription.created`, `dispense.completed`,
`stock.below_reorder` (once per crossing) and `stock.expiring` (the daily task) go through the outbox in the
transaction of the change, carry the API representations, reach a real receiver signed per Standard
Webhooks, and are documented under the OpenAPI `webhooks`."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest

from integrations import tasks
from integrations.webhooks.models import WebhookEvent
from pharmacy import services
from pharmacy.events import DISPENSE_COMPLETED, PRESCRIPTION_CREATED, STOCK_BELOW_REORDER, STOCK_EXPIRING
from pharmacy.tasks import stock_expiring_notify
from tests.billing.factories import body, get, post_json
from tests.clinic.documented_operations import DOCUMENT
from tests.integrations.webhook_receiver import fake_dns, receiver, subscribe, verify
from tests.pharmacy.factories import (
    ADJUSTMENTS,
    DISPENSES,
    PRESCRIPTIONS,
    STOCK,
    PharmacyWorld,
    expire,
    make_pharmacy_world,
)

pytestmark = pytest.mark.django_db
__all__ = ["fake_dns", "receiver"]

KINDS = [PRESCRIPTION_CREATED, DISPENSE_COMPLETED, STOCK_BELOW_REORDER, STOCK_EXPIRING]


@pytest.fixture
def world(token_for) -> PharmacyWorld:
    return make_pharmacy_world(token_for)


@pytest.fixture
def queued(monkeypatch):
    calls: list[tuple[int, str | None]] = []
    monkeypatch.setattr(tasks.deliver_webhook, "apply_async", lambda args, **options: calls.append(tuple(args)))
    return calls


def _events(kind: str) -> list[WebhookEvent]:
    return list(WebhookEvent.objects.filter(type=kind).order_by("created_at", "id"))


def _data(event: WebhookEvent):
    return json.loads(event.body(), parse_float=Decimal)["data"]


def test_the_four_kinds_are_documented_with_their_payloads():
    webhooks = DOCUMENT["webhooks"]
    for kind, key, component in [
        (PRESCRIPTION_CREATED, "prescription", "Prescription"),
        (DISPENSE_COMPLETED, "dispense", "Dispense"),
        (STOCK_BELOW_REORDER, "stock", "StockLevel"),
        (STOCK_EXPIRING, "stock", "StockLevel"),
    ]:
        data = webhooks[kind]["post"]["requestBody"]["content"]["application/json"]["schema"]["properties"]["data"]
        assert data["required"] == [key]
        assert data["properties"][key]["$ref"] == f"#/components/schemas/{component}"


def test_prescription_and_dispense_events_carry_the_api_representations(client, world):
    world.receive(world.amox, "A", 20)
    created = post_json(
        client,
        world.writer,
        PRESCRIPTIONS,
        {
            "patient_id": world.patient.patient_id,
            "doctor_id": str(world.doctor.id),
            "items": [
                {"drug": "AMOX500", "dose": "1", "frequency": "bd", "route": "oral", "duration_days": 3, "quantity": 6}
            ],
        },
    )
    dispensed = post_json(
        client,
        world.writer,
        DISPENSES,
        {"prescription_id": created.json()["prescription_id"], "items": [{"drug": "AMOX500", "quantity": 6}]},
    )

    (prescription_event,) = _events(PRESCRIPTION_CREATED)
    (dispense_event,) = _events(DISPENSE_COMPLETED)
    assert _data(prescription_event) == {"prescription": body(created)}
    assert _data(dispense_event) == {"dispense": body(dispensed)}
    assert prescription_event.branch_ref == dispense_event.branch_ref == world.blr.id


def test_below_reorder_is_published_once_per_crossing(client, world):
    batch = world.receive(world.para, "B", 12)
    world.reorder(world.para, 10)

    world.dispense((world.para, 2))  # 12 -> 10: at the level, not below
    assert _events(STOCK_BELOW_REORDER) == []
    world.dispense((world.para, 1))  # 10 -> 9: crosses
    world.dispense((world.para, 1))  # 9 -> 8: already below
    post_json(
        client, world.writer, ADJUSTMENTS, {"drug": "PARA500", "batch_number": "B", "quantity": -1, "reason": "x"}
    )
    assert len(_events(STOCK_BELOW_REORDER)) == 1
    world.receive(world.para, "B", 10)  # 7 -> 17: back above
    response = post_json(
        client, world.writer, ADJUSTMENTS, {"drug": "PARA500", "batch_number": "B", "quantity": -8, "reason": "Broken"}
    )

    events = _events(STOCK_BELOW_REORDER)
    assert [_data(event)["stock"]["on_hand"] for event in events] == [9, 9]
    assert _data(events[1]) == {"stock": body(get(client, world.reader, STOCK, {"drug": "PARA500"}))[0]}
    assert response.status_code == 201
    assert events[1].payload["stock"]["batches"][0]["batch_id"] == str(batch.pk)


def test_the_daily_task_publishes_stock_expiring_per_drug_and_branch_within_the_window(world, settings):
    settings.PHARMACY_EXPIRY_WARNING_DAYS = 90
    world.receive(world.para, "SOON1", 5, expires_in_days=30)
    world.receive(world.para, "SOON2", 5, expires_in_days=89)
    world.receive(world.para, "LATE", 5, expires_in_days=200)
    world.receive(world.amox, "EDGE", 5, expires_in_days=90)
    world.receive(world.alpraz, "FAR", 5, expires_in_days=91)
    expire(world.receive(world.morph, "GONE", 5))
    world.receive(world.para, "MUM", 5, expires_in_days=10, branch=world.mum)

    published = stock_expiring_notify()

    assert published == 3
    found = sorted((str(e.branch_ref), _data(e)["stock"]["drug"]["code"]) for e in _events(STOCK_EXPIRING))
    assert found == sorted(
        [(str(world.blr.id), "AMOX500"), (str(world.blr.id), "PARA500"), (str(world.mum.id), "PARA500")]
    )
    para = next(
        e
        for e in _events(STOCK_EXPIRING)
        if e.branch_ref == world.blr.id and e.payload["stock"]["drug"]["code"] == "PARA500"
    )
    assert [b["batch_number"] for b in _data(para)["stock"]["batches"]] == ["SOON1", "SOON2", "LATE"]
    assert stock_expiring_notify() == 0  # once a day per drug and branch, however often it runs
    assert len(_events(STOCK_EXPIRING)) == 3
    assert services.stock_expiring_publish(within_days=365) == 1  # ALPRAZ05's batch, not yet announced today


def test_the_events_reach_a_real_receiver_signed(client, world, receiver, queued, django_capture_on_commit_callbacks):
    _, secret = subscribe(receiver.url(), KINDS)
    world.receive(world.para, "B", 11)
    world.reorder(world.para, 10)

    with django_capture_on_commit_callbacks(execute=True):
        response = post_json(client, world.writer, DISPENSES, {"items": [{"drug": "PARA500", "quantity": 2}]})
    assert response.status_code == 201
    assert [tasks.deliver_webhook(*args) for args in queued] == ["succeeded"] * 2

    received = receiver.wait_for(2)
    published = {str(event.id): event for event in WebhookEvent.objects.all()}
    assert [published[r.webhook_id].type for r in received] == [DISPENSE_COMPLETED, STOCK_BELOW_REORDER]
    for request in received:
        event = published[request.webhook_id]
        verify(request, secret)
        assert json.loads(request.body, parse_float=Decimal) == {
            "id": str(event.id),
            "type": event.type,
            "timestamp": event.created_at.isoformat(),
            "data": _data(event),
        }
    assert b'"total":4.00' in received[0].body


def test_a_transfer_out_that_crosses_the_level_is_announced_for_the_source_branch(world):
    batch = world.receive(world.para, "T", 12)
    world.reorder(world.para, 10)
    world.reorder(world.para, 10, branch=world.mum)

    services.stock_transfer(batch=batch, to_branch=world.mum, quantity=5, actor="staff:ravi")

    (event,) = _events(STOCK_BELOW_REORDER)
    assert (event.branch_ref, _data(event)["stock"]["on_hand"]) == (world.blr.id, 7)
