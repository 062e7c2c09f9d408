"""Outbound HL7 v2.5.1: one message per matching active destination written with the event, every kind
validated by hl7apy, sent over MLLP by the real drain to a receiver built on the `hl7` package: AA ends it,
AE/AR/timeouts are retried on the webhook schedule with every attempt logged, order per destination, a down
destination delaying nobody else, a receiver restart losing nothing, replay keeping the control id."""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

import hl7
import pytest
from django.core.management import call_command
from django.db import transaction
from django.utils import timezone

from appointments import events as appointment_events
from appointments.models import Appointment
from integrations import tasks
from integrations.hl7 import outbox
from integrations.hl7.models import Hl7Attempt, Hl7Destination, Hl7Message
from integrations.webhooks.events import event_publish
from integrations.webhooks.models import WebhookDelivery, WebhookEvent
from lab import services
from patients import events as patient_events
from tests.appointments.factories import AppointmentFactory
from tests.integrations.hl7.support import Receiver, free_port, hl7apy_validate_with_z, lab_world
from tests.integrations.webhook_receiver import fake_dns, subscribe

__all__ = ["fake_dns"]

pytestmark = pytest.mark.django_db(transaction=True)

ALL = list(outbox.MESSAGE_KINDS)


@pytest.fixture(autouse=True)
def no_broker(monkeypatch: Any) -> list[tuple[Any, ...]]:
    """Drain tasks queued after commit are recorded instead of going to the broker; the tests drain."""
    calls: list[tuple[Any, ...]] = []
    monkeypatch.setattr(tasks.hl7_destination_drain, "apply_async", lambda args, **options: calls.append(tuple(args)))
    return calls


def destination(port: int, name: str = "LIS", events: list[str] | None = None, **extra: Any) -> Hl7Destination:
    values: dict[str, Any] = {
        "name": name,
        "host": "127.0.0.1",
        "port": port,
        "event_types": events or ALL,
        "receiving_application": name,
        "receiving_facility": "LAB",
        "sending_facility": "BLR",
        "connect_timeout_seconds": 0.5,
        "ack_timeout_seconds": 1,
        **extra,
    }
    return Hl7Destination.objects.create(**values)


def all_kinds() -> None:
    """One event of every kind, through the domain code that publishes them."""
    world = lab_world()
    patient_events.publish(patient_events.PATIENT_REGISTERED, world["patient"])
    patient_events.publish(patient_events.PATIENT_UPDATED, world["patient"])
    appointment = AppointmentFactory(branch=world["blr"], patient=world["patient"])
    appointment = Appointment.objects.select_related("patient", "doctor__department", "branch").get(pk=appointment.pk)
    for kind in ("booked", "rescheduled", "cancelled", "no_show"):
        appointment_events.publish(f"appointment.{kind}", appointment)
    order = services.lab_order_create(
        branch=world["blr"],
        patient=world["patient"],
        doctor=world["doctor"],
        tests=[world["xray"]],
        priority="stat",
        ordered_by="test",
        clinical_notes="cough | 3 weeks ^ fever",
    )
    services.lab_order_cancel(order=order, reason="ordered twice")


def moved_on(message: Hl7Message) -> None:
    """Time passes: the message's retry is due now."""
    Hl7Message.objects.filter(pk=message.pk).update(next_attempt_at=timezone.now() - timedelta(seconds=1))


def test_every_kind_is_written_with_its_event_validated_by_hl7apy_and_acknowledged() -> None:
    receiver = Receiver().start()
    try:
        lis = destination(receiver.port)
        destination(receiver.port, name="ADT only", events=["patient.registered"])
        destination(receiver.port, name="off", is_active=False)
        all_kinds()
        messages = list(Hl7Message.objects.filter(destination=lis).order_by("id"))
        assert [m.message_type for m in messages] == [
            "ORM^O01 NW",
            "ADT^A04",
            "ADT^A08",
            "SIU^S12",
            "SIU^S13",
            "SIU^S15",
            "SIU^S26",
            "ORM^O01 NW",
            "ORM^O01 CA",
        ]  # lab_world's order first, then the X-ray order and its cancellation
        assert Hl7Message.objects.filter(destination__name="ADT only").count() == 1
        assert not Hl7Message.objects.filter(destination__name="off").exists()
        assert len({m.control_id for m in Hl7Message.objects.all()}) == Hl7Message.objects.count()

        result = outbox.destination_drain(destination_id=lis.pk)

        assert result.acknowledged == 9
        assert result.failed == result.retrying == 0
        assert receiver.control_ids() == [m.control_id for m in messages]
        for text in receiver.received:
            hl7apy_validate_with_z(text)  # the X-ray orders' ZDS apart (test_outbound_fields checks it)
        first = hl7.parse(receiver.received[1])
        assert str(first.segment("MSH")(9)) == "ADT^A04^ADT_A01"
        assert str(first.segment("MSH")(12)) == "2.5.1"
        assert str(first.segment("MSH")(5)) == "LIS"
        orm = hl7.parse(receiver.received[7])
        assert str(orm.segment("ORC")(1)) == "NW"
        note = str(orm.segment("NTE")(3))
        assert note == "cough \\F\\ 3 weeks \\S\\ fever"  # escaped on the wire (HL7 2.7)
        assert orm.unescape(note) == "cough | 3 weeks ^ fever"
        assert str(hl7.parse(receiver.received[8]).segment("ORC")(1)) == "CA"
        assert set(
            Hl7Message.objects.filter(destination=lis).values_list("status", "attempt_count", "last_ack_code")
        ) == {("acknowledged", 1, "AA")}
        assert Hl7Attempt.objects.filter(message__destination=lis, ack_code="AA").count() == 9
    finally:
        receiver.stop()


def test_rollback_writes_no_message() -> None:
    destination(free_port())

    def rolled_back() -> None:
        with transaction.atomic():
            event_publish(event_type="appointment.no_show", payload={"appointment": {}})
            raise RuntimeError

    with pytest.raises(RuntimeError):
        rolled_back()
    assert not Hl7Message.objects.exists()
    assert not WebhookEvent.objects.exists()


def _booked(n: int) -> list[Hl7Message]:
    world_appointment = AppointmentFactory()
    appointment = Appointment.objects.select_related("patient", "doctor__department", "branch").get(
        pk=world_appointment.pk
    )
    for _ in range(n):
        appointment_events.publish("appointment.booked", appointment)
    return list(Hl7Message.objects.order_by("id"))


def test_ae_ar_and_timeouts_are_retried_in_order_and_logged() -> None:
    answers = iter(["AE", "AR", "none", "AA", "AA", "AA"])
    receiver = Receiver(codes=lambda text: next(answers)).start()
    try:
        lis = destination(receiver.port, ack_timeout_seconds=0.5)
        first, second = _booked(2)
        for expected in ("AE", "AR", ""):
            result = outbox.destination_drain(destination_id=lis.pk)
            assert (result.acknowledged, result.retrying) == (0, 1)
            first.refresh_from_db()
            second.refresh_from_db()
            assert first.status == "pending"
            assert first.last_ack_code == expected
            assert second.attempt_count == 0  # N+1 waits for N
            delay = (first.next_attempt_at - timezone.now()).total_seconds()
            assert delay > 0
            moved_on(first)
        assert first.attempt_count == 3
        result = outbox.destination_drain(destination_id=lis.pk)
        assert result.acknowledged == 2
        attempts = list(Hl7Attempt.objects.filter(message=first).order_by("number"))
        assert [(a.number, a.ack_code) for a in attempts] == [(1, "AE"), (2, "AR"), (3, ""), (4, "AA")]
        assert "No ACK within" in attempts[2].error
        assert receiver.control_ids() == [first.control_id] * 4 + [second.control_id]  # same MSH-10 each time
    finally:
        receiver.stop()


def test_first_retry_waits_about_five_seconds_as_webhooks_do() -> None:
    receiver = Receiver(codes=lambda text: "AE").start()
    try:
        lis = destination(receiver.port)
        (message,) = _booked(1)
        before = timezone.now()
        outbox.destination_drain(destination_id=lis.pk)
        message.refresh_from_db()
        assert timedelta(seconds=3.9) <= message.next_attempt_at - before <= timedelta(seconds=6.5)
    finally:
        receiver.stop()


def test_a_message_is_given_up_after_the_schedule_and_the_next_one_goes() -> None:
    receiver = Receiver(codes=lambda text: "AE").start()
    try:
        lis = destination(receiver.port)
        first, second = _booked(2)
        Hl7Message.objects.filter(pk=first.pk).update(attempt_count=7)
        receiver.codes = lambda text: "AE" if first.control_id in text else "AA"
        outbox.destination_drain(destination_id=lis.pk)
        first.refresh_from_db()
        second.refresh_from_db()
        assert first.status == "failed"
        assert "Gave up after 8 attempts" in first.last_error
        assert second.status == "acknowledged"
    finally:
        receiver.stop()


def test_a_down_destination_delays_neither_another_destination_nor_a_webhook(no_broker: Any, fake_dns: Any) -> None:
    receiver = Receiver().start()
    try:
        down = destination(free_port(), name="down")  # nothing listens there: refused at once
        up = destination(receiver.port, name="up")
        subscribe("https://hooks.example.com/w", ["appointment.booked"])
        _booked(3)
        assert WebhookDelivery.objects.count() == 3  # the webhooks are written with the event as before
        started = time.monotonic()
        blocked = outbox.destination_drain(destination_id=down.pk)
        assert time.monotonic() - started < 2
        assert blocked.retrying == 1
        sent = outbox.destination_drain(destination_id=up.pk)
        assert sent.acknowledged == 3
        assert Hl7Message.objects.filter(destination=down, status="pending").count() == 3
        # A drain of the same destination while one holds its lease does nothing (one sender per destination).
        Hl7Destination.objects.filter(pk=up.pk).update(claimed_until=timezone.now() + timedelta(seconds=30))
        assert outbox.destination_drain(destination_id=up.pk).skipped
    finally:
        receiver.stop()


def test_a_receiver_restart_loses_nothing_and_sends_nothing_twice() -> None:
    receiver = Receiver().start()
    port = receiver.port
    lis = destination(port)
    messages = _booked(6)
    receiver.codes = lambda text: "AA"
    try:
        # Acknowledge the first three, then the receiver goes away.
        receiver.codes = lambda text: "AA"
        outbox.destination_drain(destination_id=lis.pk, budget_seconds=0)  # budget spent: sends nothing
        assert receiver.received == []
        for message in messages[3:]:
            Hl7Message.objects.filter(pk=message.pk).update(next_attempt_at=timezone.now() + timedelta(hours=1))
        assert outbox.destination_drain(destination_id=lis.pk).acknowledged == 3
        receiver.stop()
        Hl7Message.objects.filter(pk__in=[m.pk for m in messages[3:]]).update(next_attempt_at=timezone.now())
        down = outbox.destination_drain(destination_id=lis.pk)
        assert down.retrying == 1
        assert down.acknowledged == 0
        receiver = Receiver(port=port).start()
        moved_on(messages[3])
        assert outbox.destination_drain(destination_id=lis.pk).acknowledged == 3
        assert receiver.control_ids() == [m.control_id for m in messages[3:]]
        assert Hl7Message.objects.filter(status="acknowledged").count() == 6
    finally:
        receiver.stop()


def test_the_relay_queues_due_destinations_and_replay_keeps_the_control_id(no_broker: Any) -> None:
    receiver = Receiver().start()
    try:
        lis = destination(receiver.port)
        (message,) = _booked(1)
        assert no_broker == [(str(lis.pk),)]  # queued after commit
        no_broker.clear()
        assert outbox.hl7_relay() == 1
        assert no_broker == [(str(lis.pk),)]
        outbox.destination_drain(destination_id=lis.pk)
        assert outbox.hl7_relay() == 0
        outbox.message_replay(message=message)
        outbox.destination_drain(destination_id=lis.pk)
        assert receiver.control_ids() == [message.control_id, message.control_id]
        assert Hl7Attempt.objects.filter(message=message).count() == 2
    finally:
        receiver.stop()


def test_create_hl7_destination_command(capsys: Any) -> None:
    call_command(
        "create_hl7_destination",
        "--name",
        "City lab",
        "--host",
        "lis.local",
        "--port",
        "2575",
        "--events",
        "lab_order.created lab_order.cancelled",
        "--json",
    )
    out = capsys.readouterr().out
    created = Hl7Destination.objects.get()
    assert f'"id": "{created.pk}"' in out
    assert '"messages": ["ORM^O01 NW", "ORM^O01 CA"]' in out
    with pytest.raises(Exception, match="Unknown or missing event kinds"):
        call_command(
            "create_hl7_destination", "--name", "x", "--host", "h", "--port", "1", "--events", "invoice.finalized"
        )


def test_admin_shows_the_message_with_its_attempts_and_replays_it(admin_client: Any, fake_dns: Any) -> None:
    receiver = Receiver(codes=lambda text: "AE").start()
    try:
        lis = destination(receiver.port)
        (message,) = _booked(1)
        outbox.destination_drain(destination_id=lis.pk)
        page = admin_client.get(f"/admin/integrations/hl7message/{message.pk}/change/")
        assert page.status_code == 200
        body = page.content.decode()
        assert f"SIU^S12^SIU_S12|{message.control_id}|P|2.5.1" in body
        assert "AE" in body
        listing = admin_client.post(
            "/admin/integrations/hl7message/",
            {"action": "replay", "_selected_action": [message.pk]},
            follow=True,
        )
        assert listing.status_code == 200
        message.refresh_from_db()
        assert (message.status, message.attempt_count) == ("pending", 0)
        for page_url in ("hl7destination", "hl7sender", "hl7receivedmessage", f"hl7destination/{lis.pk}/change"):
            assert admin_client.get(f"/admin/integrations/{page_url}/").status_code == 200
    finally:
        receiver.stop()
