"""A send whose outcome PostgreSQL refuses to record is not sent again (docs/operations.md §5).

During a full disk 51 of 676 webhook deliveries and 9 SMS went out twice: the outcome write failed, the
claim ran out and the relay sent them again. Here PostgreSQL refuses the outcome's INSERT with the full
disk's own SQLSTATE (53100, raised by a trigger the test creates on the attempt table) while a real local
receiver takes the request; the receiver must get exactly one request, and the outcome must be recorded
once PostgreSQL accepts writes again, by the recording task or by the relay.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import DatabaseError, connection

from clinic.worker_counters import counters_read
from integrations import tasks
from integrations.models import NotificationAttempt
from integrations.notifications import services as notifications
from integrations.webhooks import delivery
from integrations.webhooks.delivery import deliveries_relay, delivery_attempt
from integrations.webhooks.models import WebhookAttempt
from tests.appointments.test_notifications import gateway
from tests.integrations.test_webhook_delivery import FakeClock, fake_clock, publish, queued, reload
from tests.integrations.webhook_receiver import Reply, receiver, subscribe

pytestmark = pytest.mark.django_db
__all__ = ["fake_clock", "gateway", "queued", "receiver"]


class DiskFull:
    """PostgreSQL refusing INSERTs into one table with SQLSTATE 53100 until `clear()`."""

    def __init__(self, table: str) -> None:
        self.table = table
        self.name = f"refuse_{uuid.uuid4().hex[:8]}"
        with connection.cursor() as cursor:
            cursor.execute(
                f"CREATE FUNCTION {self.name}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
                "RAISE EXCEPTION 'could not extend file: No space left on device' USING ERRCODE = '53100'; "
                "END $$"
            )
            cursor.execute(
                f'CREATE TRIGGER {self.name} BEFORE INSERT ON "{table}" FOR EACH ROW EXECUTE FUNCTION {self.name}()'
            )

    def clear(self) -> None:
        with connection.cursor() as cursor:
            cursor.execute(f'DROP TRIGGER IF EXISTS {self.name} ON "{self.table}"')
            cursor.execute(f"DROP FUNCTION IF EXISTS {self.name}()")


@pytest.fixture(autouse=True)
def empty_pending() -> Iterator[None]:
    for store in (delivery.PENDING, notifications.PENDING):
        for field in store.fields():
            store.delete(field)
    yield
    for store in (delivery.PENDING, notifications.PENDING):
        for field in store.fields():
            store.delete(field)


@pytest.fixture
def recording_queued(monkeypatch: Any) -> list[tuple[Any, dict[str, Any]]]:
    calls: list[tuple[Any, dict[str, Any]]] = []
    for task in (tasks.record_webhook_outcome, tasks.record_notification_attempts):
        monkeypatch.setattr(task, "apply_async", lambda args=(), **options: calls.append((tuple(args), options)))
    return calls


def counter(name: str, *labels: str) -> int:
    return counters_read()[name].get(tuple(labels), 0)


def test_a_webhook_whose_outcome_cannot_be_recorded_is_sent_once_and_recorded_when_postgresql_accepts_it(
    receiver: Any, fake_clock: FakeClock, queued: Any, recording_queued: Any, settings: Any
) -> None:
    settings.WEBHOOK_CLAIM_LEASE_SECONDS = 60
    subscribe(receiver.url())
    row = publish()
    delivered, deferred = counter("clinic_webhook_attempts", "delivered"), counter("clinic_webhook_outcomes_deferred")
    disk_full = DiskFull(WebhookAttempt._meta.db_table)

    assert delivery_attempt(delivery_id=row.pk) == "deferred"
    assert recording_queued == [((row.pk,), {"countdown": 1})]
    assert len(receiver.requests) == 1
    assert reload(row).status == "delivering"
    # The lease runs out while PostgreSQL still refuses: neither the relay nor a task sends it again.
    fake_clock.advance(61)
    assert deliveries_relay() == 0
    assert delivery_attempt(delivery_id=row.pk) == "skipped"
    with pytest.raises(DatabaseError):  # the recording task: retried with backoff
        tasks.record_webhook_outcome(row.pk)
    assert len(receiver.requests) == 1

    disk_full.clear()  # room again
    assert tasks.record_webhook_outcome(row.pk) == "succeeded"

    assert len(receiver.requests) == 1
    row = reload(row)
    assert (row.status, row.attempt_count, row.last_status_code, row.claim_token) == ("succeeded", 1, 200, None)
    assert list(WebhookAttempt.objects.values_list("number", "status_code", "error")) == [(1, 200, "")]
    assert delivery.PENDING.fields() == []
    assert tasks.record_webhook_outcome(row.pk) == "none"  # a duplicated recording task does nothing
    assert deliveries_relay() == 0
    assert delivery_attempt(delivery_id=row.pk) == "skipped"
    assert len(receiver.requests) == 1
    assert counter("clinic_webhook_outcomes_deferred") == deferred + 1
    assert counter("clinic_webhook_attempts", "delivered") == delivered + 1


def test_the_relay_records_a_refused_webhook_outcome_whose_recording_task_was_lost(
    receiver: Any, fake_clock: FakeClock, queued: Any, recording_queued: Any, settings: Any
) -> None:
    settings.WEBHOOK_CLAIM_LEASE_SECONDS = 60
    subscribe(receiver.url())
    receiver.default = Reply(status=500, body=b"busy")
    row = publish()
    disk_full = DiskFull(WebhookAttempt._meta.db_table)
    assert delivery_attempt(delivery_id=row.pk) == "deferred"
    fake_clock.advance(61)
    assert deliveries_relay() == 0

    disk_full.clear()
    assert deliveries_relay() == 0  # records the outcome: a retry in 5 s, not a resend now

    row = reload(row)
    assert (row.status, row.attempt_count, row.last_status_code) == ("pending", 1, 500)
    assert list(WebhookAttempt.objects.values_list("number", "status_code")) == [(1, 500)]
    assert len(receiver.requests) == 1
    assert delivery.PENDING.fields() == []
    fake_clock.advance_to(row.next_attempt_at)
    assert deliveries_relay() == 1  # the scheduled retry goes out as usual
    assert len(receiver.requests) == 1


def test_a_stale_pending_outcome_does_not_hold_a_later_attempt_back(
    receiver: Any, fake_clock: FakeClock, queued: Any, settings: Any
) -> None:
    # Recorded, but its deletion from Redis failed: the next drain drops it without a second attempt row.
    subscribe(receiver.url())
    row = publish()
    claimed = delivery.delivery_claim(delivery_id=row.pk)
    assert claimed is not None
    delivery.PENDING.put(str(row.pk), {"claim_token": str(uuid.uuid4()), "attempt_count": 1})

    assert delivery.outcome_record(delivery_id=row.pk) == "stale"
    assert delivery.PENDING.fields() == []
    fake_clock.advance(settings.WEBHOOK_CLAIM_LEASE_SECONDS + 1)
    assert delivery_attempt(delivery_id=row.pk) == "succeeded"  # the dead worker's claim is taken over
    assert len(receiver.requests) == 1


def message(phone: str = "+919811122233") -> notifications.Message:
    return notifications.Message(
        event_type="appointment.booked",
        subject_id=uuid.uuid4(),
        patient_ref=uuid.uuid4(),
        version=1,
        phone=phone,
        email="",
        subject="Appointment",
        text="Your appointment is booked.",
    )


def test_an_sms_whose_attempt_cannot_be_recorded_is_sent_once_and_recorded_when_postgresql_accepts_it(
    gateway: Any, recording_queued: Any
) -> None:
    sms = message()
    deferred = counter("clinic_notification_outcomes_deferred", "sms")
    sent = counter("clinic_notification_sends", "sms", "sent")
    disk_full = DiskFull(NotificationAttempt._meta.db_table)

    assert notifications.notification_send(message=sms, channel="sms", attempt=1) == "sent"
    assert recording_queued == [((), {"countdown": 1})]
    # The outbox runs the message again (its own write failed too, its claim ran out): no second SMS.
    assert notifications.notification_send(message=sms, channel="sms", attempt=2) == "sent"
    with pytest.raises(DatabaseError):
        tasks.record_notification_attempts()
    assert tasks.relay_notifications() == 0  # drains what it can, raises nothing
    assert len(gateway.received) == 1

    disk_full.clear()
    assert tasks.record_notification_attempts() == 1

    assert list(NotificationAttempt.objects.values_list("dedupe_key", "status", "attempt", "recipient")) == [
        (sms.dedupe_key("sms"), "sent", 1, "+91******2233")
    ]
    assert notifications.PENDING.fields() == []
    assert notifications.notification_send(message=sms, channel="sms", attempt=3) == "sent"
    assert len(gateway.received) == 1
    assert counter("clinic_notification_outcomes_deferred", "sms") == deferred + 1
    assert counter("clinic_notification_sends", "sms", "sent") == sent + 1


def test_an_unrecorded_sms_failure_is_not_kept_and_is_tried_again(gateway: Any, recording_queued: Any) -> None:
    gateway.statuses.append(503)
    sms = message()
    disk_full = DiskFull(NotificationAttempt._meta.db_table)

    with pytest.raises(DatabaseError):
        notifications.notification_send(message=sms, channel="sms", attempt=1)

    assert notifications.PENDING.fields() == []
    disk_full.clear()
    assert notifications.notification_send(message=sms, channel="sms", attempt=2) == "sent"
    assert len(gateway.received) == 2
    assert NotificationAttempt.objects.filter(status="sent").count() == 1
