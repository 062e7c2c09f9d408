"""Webhook delivery end to end with real Celery workers on Redis, a real HTTP receiver and appointments
changed through the API and the services: every delivery verifies with the standardwebhooks package;
a broker that is down at commit loses nothing; a worker killed mid-delivery is replaced and the event
arrives with the same webhook-id."""

from __future__ import annotations

import json
import time
from datetime import timedelta

import pytest
from django.db import connection
from kombu.exceptions import OperationalError

from appointments import services as appointment_services
from appointments.models import Appointment
from integrations import tasks
from integrations.webhook_models import WebhookAttempt, WebhookDelivery, WebhookEvent, WebhookSubscription
from integrations.webhooks import delivery as delivery_module
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
    appointment_services.appointment_reschedule(appointment=first, slot_start=at(DAY, "10:00"), slot_end=at(DAY, "10:15"))
    appointment_services.appointment_cancel(appointment=first, reason="Travelling", enforce_window=False)
    second = book(patient=patient, doctor=doctor, branch=branch, slot_start=at(DAY, "11:00"), slot_end=at(DAY, "11:15"))
    appointment_services.appointment_check_in(appointment=second)
    appointment_services.appointment_complete(appointment=second)
    third = book(patient=patient, doctor=doctor, branch=branch, slot_start=at(DAY, "12:00"), slot_end=at(DAY, "12:15"))
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
