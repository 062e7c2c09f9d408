"""Webhook delivery end to end with real Celery workers on Redis, a real HTTP receiver and appointments
changed through the API and the services: every delivery verifies with the standardwebhooks package;
a broker that is down at commit loses nothing; a worker killed mid-delivery is replaced and the event
arrives with the same webhook-id."""

from __future__ import annotations

import time

import pytest

from appointments import services as appointment_services
from appointments.models import Appointment
from integrations import tasks
from integrations.webhooks import delivery as delivery_module
from integrations.webhooks.models import WebhookAttempt, WebhookDelivery, WebhookEvent
from tests.appointments.lifecycle_helpers import start_now
from tests.appointments.test_booking import DAY, at, book, booking, branch, doctor, patient, post_booking, writer
from tests.integrations.webhook_receiver import ALL_KINDS, Reply, receiver, subscribe, verify
from tests.worker import celery_worker, worker_process

pytestmark = pytest.mark.django_db(transaction=True)
__all__ = ["branch", "celery_worker", "doctor", "patient", "receiver", "worker_process", "writer"]


def settle(seconds: float = 0.5) -> None:
    """Give a worker the chance to (wrongly) send more than expected before counting."""
    time.sleep(seconds)


def test_a_booking_through_the_api_is_delivered_signed_with_the_appointment(
    client, celery_worker, receiver, branch, doctor, patient, writer
):
    subscription, secret = subscribe(receiver.url(), ["appointment.booked"], extra_headers={"X-Api-Key": "k-123"})

    appointment = book(client, writer, booking(patient, doctor, at(DAY, "09:15"), at(DAY, "09:30")))

    (received,) = receiver.wait_for(1)
    event = WebhookEvent.objects.get()
    body = verify(received, secret)
    assert body == {
        "id": str(event.id),
        "type": "appointment.booked",
        "timestamp": event.created_at.isoformat(),
        "data": {"appointment": appointment},
    }
    assert received.method == "POST"
    assert received.path == "/hooks"
    assert received.headers["webhook-id"] == str(event.id)
    assert received.headers["content-type"] == "application/json"
    assert received.headers["user-agent"].startswith("ClinicWebhooks/1.0")
    assert received.headers["x-api-key"] == "k-123"
    assert received.headers["webhook-signature"].startswith("v1,")
    assert " " not in received.headers["webhook-signature"]  # one secret, one signature
    assert abs(int(received.headers["webhook-timestamp"]) - received.at) < 5
    assert received.headers["host"] == f"127.0.0.1:{receiver.port}"
    delivery = WebhookDelivery.objects.get()
    for _ in range(50):  # the worker records the outcome right after the receiver answered
        delivery.refresh_from_db()
        if delivery.status == WebhookDelivery.Status.SUCCEEDED:
            break
        time.sleep(0.1)
    assert (delivery.subscription_id, delivery.status, delivery.attempt_count, delivery.last_status_code) == (
        subscription.pk,
        "succeeded",
        1,
        200,
    )
    assert delivery.next_attempt_at is None
    assert delivery.claimed_until is None
    attempt = WebhookAttempt.objects.get()
    assert (attempt.number, attempt.status_code, attempt.error, attempt.address) == (1, 200, "", "127.0.0.1")
    assert attempt.response_excerpt == '{"ok":true}'


def test_every_lifecycle_event_reaches_the_receiver_and_verifies(celery_worker, receiver, branch, doctor, patient):
    _, secret = subscribe(receiver.url(), ALL_KINDS)
    book = appointment_services.appointment_book
    first = book(patient=patient, doctor=doctor, branch=branch, slot_start=at(DAY, "09:00"), slot_end=at(DAY, "09:15"))
    appointment_services.appointment_reschedule(
        appointment=first, slot_start=at(DAY, "10:00"), slot_end=at(DAY, "10:15")
    )
    appointment_services.appointment_cancel(appointment=first, reason="Travelling", enforce_window=False)
    second = book(patient=patient, doctor=doctor, branch=branch, slot_start=at(DAY, "11:00"), slot_end=at(DAY, "11:15"))
    start_now(second.pk)  # check-in only on the appointment's day
    appointment_services.appointment_check_in(appointment=second)
    appointment_services.appointment_complete(appointment=second)
    third = book(patient=patient, doctor=doctor, branch=branch, slot_start=at(DAY, "12:00"), slot_end=at(DAY, "12:15"))
    start_now(third.pk, minutes_ago=30)  # no-show only once started; clear of the second's moved slot
    appointment_services.appointment_no_show(appointment=third)

    received = receiver.wait_for(8)
    settle()
    assert len(receiver.requests) == 8
    bodies = [verify(request, secret) for request in received]
    assert sorted((body["data"]["appointment"]["appointment_id"], body["type"]) for body in bodies) == sorted(
        [
            (str(first.pk), "appointment.booked"),
            (str(first.pk), "appointment.rescheduled"),
            (str(first.pk), "appointment.cancelled"),
            (str(second.pk), "appointment.booked"),
            (str(second.pk), "appointment.checked_in"),
            (str(second.pk), "appointment.completed"),
            (str(third.pk), "appointment.booked"),
            (str(third.pk), "appointment.no_show"),
        ]
    )
    statuses = {body["type"]: body["data"]["appointment"]["status"] for body in bodies}
    assert statuses == {
        "appointment.booked": "booked",
        "appointment.rescheduled": "booked",
        "appointment.cancelled": "cancelled",
        "appointment.checked_in": "checked_in",
        "appointment.completed": "completed",
        "appointment.no_show": "no_show",
    }
    (rescheduled,) = [body for body in bodies if body["type"] == "appointment.rescheduled"]
    assert rescheduled["data"]["previous"]["slot_start"] == f"{DAY.isoformat()}T09:00:00+05:30"
    assert rescheduled["data"]["appointment"]["slot_start"] == f"{DAY.isoformat()}T10:00:00+05:30"
    assert len({request.webhook_id for request in received}) == 8


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def broker_down(monkeypatch):
    """Point this process's publishing at a closed port (the machine's Redis keeps running for others).
    Returns a callable that brings the broker back."""
    from clinic.celery import app

    def reset_pools() -> None:
        app._pool = None
        app.amqp._producer_pool = None

    monkeypatch.setattr(app.conf, "broker_write_url", f"redis://127.0.0.1:{_free_port()}/3")
    reset_pools()

    def recover() -> None:
        monkeypatch.undo()
        reset_pools()

    yield recover
    reset_pools()


def test_a_broker_down_at_commit_loses_nothing_and_the_relay_delivers_each_delivery_once(
    client, celery_worker, receiver, broker_down, branch, doctor, patient, writer, caplog
):
    subscription_a, secret_a = subscribe(receiver.url("/a"), ["appointment.booked"], name="A")
    subscription_b, secret_b = subscribe(receiver.url("/b"), ["appointment.booked"], name="B")

    appointment_ids = []
    for start, end in [("09:00", "09:15"), ("09:15", "09:30"), ("09:30", "09:45"), ("09:45", "10:00")]:
        started = time.monotonic()
        response = post_booking(client, writer, booking(patient, doctor, at(DAY, start), at(DAY, end)))
        assert response.status_code == 201, response.content  # the change commits although queueing failed
        assert time.monotonic() - started < 5
        appointment_ids.append(response.json()["appointment_id"])

    assert Appointment.objects.count() == 4
    queueing_failures = [r for r in caplog.records if r.getMessage().startswith("could not queue 2 webhook deliveries")]
    assert len(queueing_failures) == 4
    events = {str(e.id): e.payload["appointment"]["appointment_id"] for e in WebhookEvent.objects.all()}
    assert sorted(events.values()) == sorted(appointment_ids)
    rows = list(WebhookDelivery.objects.values_list("subscription_id", "status", "attempt_count"))
    assert sorted(rows, key=str) == sorted(
        [(subscription_a.pk, "pending", 0)] * 4 + [(subscription_b.pk, "pending", 0)] * 4, key=str
    )
    settle()
    assert receiver.requests == []

    broker_down()  # the broker is back; two relay runs race for the same rows
    tasks.relay_webhook_deliveries.delay()
    tasks.relay_webhook_deliveries.delay()

    received = receiver.wait_for(8)
    settle(1.5)
    assert len(receiver.requests) == 8
    for path, secret in (("/a", secret_a), ("/b", secret_b)):
        bodies = [verify(r, secret) for r in received if r.path == path]
        assert sorted(body["id"] for body in bodies) == sorted(events)  # every event exactly once per target
        assert sorted(r.webhook_id for r in received if r.path == path) == sorted(events)
    assert set(WebhookDelivery.objects.values_list("status", "attempt_count")) == {("succeeded", 1)}
    assert WebhookAttempt.objects.count() == 8


def test_a_worker_killed_mid_delivery_is_replaced_and_the_event_arrives_again_with_the_same_id(
    worker_process, receiver, branch, doctor, patient
):
    short = {
        "WEBHOOK_ALLOW_PRIVATE_TARGETS": "true",
        "WEBHOOK_CONNECT_TIMEOUT_SECONDS": "1",
        "WEBHOOK_TIMEOUT_SECONDS": "2",
        "WEBHOOK_CLAIM_LEASE_SECONDS": "3",
        "WEBHOOK_RELAY_INTERVAL_SECONDS": "1",
    }
    _, secret = subscribe(receiver.url(), ["appointment.booked"])
    receiver.reply_with(Reply(delay=120))  # the first request hangs; its worker dies during it
    doomed = worker_process(env=short)

    appointment = appointment_services.appointment_book(
        patient=patient, doctor=doctor, branch=branch, slot_start=at(DAY, "09:00"), slot_end=at(DAY, "09:15")
    )

    (hung,) = receiver.wait_for(1)
    delivery = WebhookDelivery.objects.get()
    assert (delivery.status, delivery.attempt_count) == ("delivering", 1)
    assert delivery.attempt_started_at is not None
    doomed.kill()
    assert doomed.process.returncode == -9

    worker_process(env=short, beat=True)  # a replacement worker, with the periodic relay
    received = receiver.wait_for(2, timeout=40)
    event = WebhookEvent.objects.get()
    assert hung.webhook_id == received[1].webhook_id == str(event.id)
    assert verify(received[1], secret)["data"]["appointment"]["appointment_id"] == str(appointment.pk)
    assert received[1].body == hung.body
    for _ in range(50):
        delivery.refresh_from_db()
        if delivery.status == "succeeded":
            break
        time.sleep(0.1)
    assert (delivery.status, delivery.attempt_count, delivery.last_status_code) == ("succeeded", 2, 200)
    attempts = list(WebhookAttempt.objects.order_by("number").values_list("number", "status_code", "error"))
    assert attempts == [(1, None, delivery_module.LOST_ATTEMPT), (2, 200, "")]
    settle(2)  # the relay keeps running: nothing is sent a third time
    assert len(receiver.requests) == 2
