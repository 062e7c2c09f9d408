"""Publication (the outbox): the appointment services write the event and one delivery per matching active
subscription in the transaction of the change (event kind and branch filter respected, inactive
subscriptions skipped); a rollback writes nothing and queues nothing; tasks are queued only after commit."""

from __future__ import annotations

import pytest
from django.db import transaction

from appointments import events as appointment_events
from appointments import services as appointment_services
from appointments.models import Appointment
from integrations import tasks
from integrations.webhooks.events import event_publish
from integrations.webhooks.models import WebhookDelivery, WebhookEvent
from tests.appointments.lifecycle_helpers import start_now
from tests.appointments.test_booking import DAY, at, booking, branch, doctor, patient, post_booking, writer
from tests.factories import BranchFactory
from tests.integrations.webhook_receiver import ALL_KINDS, fake_dns, subscribe

__all__ = ["branch", "doctor", "fake_dns", "patient", "writer"]

URL = "https://hooks.example.com/webhooks"


@pytest.fixture(autouse=True)
def public_dns(fake_dns):
    return fake_dns


@pytest.fixture
def queued(monkeypatch):
    """Every deliver task queued (delivery id, claim token), instead of sending it to the broker."""
    calls: list[tuple[int, str | None]] = []
    monkeypatch.setattr(tasks.deliver_webhook, "apply_async", lambda args, **options: calls.append(tuple(args)))
    return calls


def book(patient, doctor, branch, start="09:00", end="09:15"):
    return appointment_services.appointment_book(
        patient=patient, doctor=doctor, branch=branch, slot_start=at(DAY, start), slot_end=at(DAY, end)
    )


@pytest.mark.django_db
def test_a_booking_writes_one_delivery_per_matching_active_subscription(branch, doctor, patient):
    other_branch = BranchFactory(code="MUM")
    everywhere, _ = subscribe(URL, ["appointment.booked"], name="everywhere")
    here, _ = subscribe(URL, ["appointment.booked"], name="here", branch_ids=[branch.pk])
    subscribe(URL, ["appointment.booked"], name="elsewhere", branch_ids=[other_branch.pk])
    subscribe(URL, ["appointment.cancelled"], name="other kind")
    subscribe(URL, ["appointment.booked"], name="inactive", is_active=False)
    both, _ = subscribe(URL, ALL_KINDS, name="both branches", branch_ids=[branch.pk, other_branch.pk])

    appointment = book(patient, doctor, branch)

    event = WebhookEvent.objects.get()
    appointment = Appointment.objects.select_related("patient", "doctor__department", "branch").get()
    assert (event.type, event.branch_ref, event.is_test) == ("appointment.booked", branch.pk, False)
    assert event.payload == {"appointment": appointment_events.appointment_payload(appointment)}
    deliveries = WebhookDelivery.objects.filter(event=event)
    assert sorted(d.subscription.name for d in deliveries) == ["both branches", "everywhere", "here"]
    assert {(d.status, d.attempt_count, d.next_attempt_at) for d in deliveries} == {("pending", 0, event.created_at)}
    assert {d.subscription_id for d in deliveries} == {everywhere.pk, here.pk, both.pk}


@pytest.mark.django_db
def test_an_event_without_a_branch_goes_only_to_subscriptions_without_a_branch_filter(branch):
    everywhere, _ = subscribe(URL, ["appointment.booked"], name="everywhere")
    subscribe(URL, ["appointment.booked"], name="here", branch_ids=[branch.pk])

    event_publish(event_type="appointment.booked", payload={"appointment": {}})

    assert list(WebhookDelivery.objects.values_list("subscription_id", flat=True)) == [everywhere.pk]


@pytest.mark.django_db
def test_an_event_with_no_subscriber_is_still_recorded_without_deliveries():
    event_id = event_publish(event_type="appointment.no_show", payload={"appointment": {"status": "no_show"}})
    assert WebhookEvent.objects.get().id == event_id
    assert not WebhookDelivery.objects.exists()


@pytest.mark.django_db
def test_an_unknown_event_type_is_refused():
    with pytest.raises(ValueError, match=r"Unknown event type 'appointment\.deleted'"):
        event_publish(event_type="appointment.deleted", payload={})
    assert not WebhookEvent.objects.exists()


@pytest.mark.django_db
def test_publication_costs_a_constant_number_of_queries(django_assert_num_queries, branch):
    for n in range(5):
        subscribe(URL, ["appointment.booked"], name=f"s{n}", branch_ids=[branch.pk] if n % 2 else [])
    # matching subscriptions, event insert, deliveries bulk insert (no savepoint: it joins the caller's transaction)
    with django_assert_num_queries(3):
        event_publish(event_type="appointment.booked", payload={"appointment": {}}, branch_id=branch.pk)
    assert WebhookDelivery.objects.count() == 5


@pytest.mark.django_db
def test_each_lifecycle_change_publishes_its_event_with_the_appointment_as_it_is_after_the_change(
    branch, doctor, patient
):
    subscription, _ = subscribe(URL, ALL_KINDS)
    first = book(patient, doctor, branch, "09:00", "09:15")
    before_reschedule = appointment_events.appointment_payload(
        Appointment.objects.select_related("patient", "doctor__department", "branch").get(pk=first.pk)
    )
    appointment_services.appointment_reschedule(
        appointment=first, slot_start=at(DAY, "10:00"), slot_end=at(DAY, "10:15")
    )
    appointment_services.appointment_cancel(appointment=first, reason="Unwell", enforce_window=False)
    second = book(patient, doctor, branch, "11:00", "11:15")
    start_now(second.pk)  # check-in only on the appointment's day
    appointment_services.appointment_check_in(appointment=second)
    appointment_services.appointment_complete(appointment=second)
    third = book(patient, doctor, branch, "12:00", "12:15")
    start_now(third.pk, minutes_ago=30)  # no-show only once started; clear of the second's moved slot
    appointment_services.appointment_no_show(appointment=third)

    published = [
        (
            e.type,
            e.payload["appointment"]["appointment_id"],
            e.payload["appointment"]["status"],
            e.payload["appointment"]["version"],
        )
        for e in WebhookEvent.objects.order_by("created_at", "id")
    ]
    assert published == [
        ("appointment.booked", str(first.pk), "booked", 1),
        ("appointment.rescheduled", str(first.pk), "booked", 2),
        ("appointment.cancelled", str(first.pk), "cancelled", 3),
        ("appointment.booked", str(second.pk), "booked", 1),
        ("appointment.checked_in", str(second.pk), "checked_in", 2),
        ("appointment.completed", str(second.pk), "completed", 3),
        ("appointment.booked", str(third.pk), "booked", 1),
        ("appointment.no_show", str(third.pk), "no_show", 2),
    ]
    rescheduled = WebhookEvent.objects.get(type="appointment.rescheduled")
    assert rescheduled.payload["previous"] == before_reschedule
    assert rescheduled.payload["appointment"]["slot_start"] == f"{DAY.isoformat()}T10:00:00+05:30"
    assert all("previous" not in e.payload for e in WebhookEvent.objects.exclude(type="appointment.rescheduled"))
    assert WebhookDelivery.objects.filter(subscription=subscription).count() == 8


@pytest.mark.django_db(transaction=True)
def test_a_rolled_back_change_writes_no_event_and_queues_nothing(branch, doctor, patient, queued):
    subscribe(URL, ["appointment.booked"])

    def change_then_fail() -> None:
        with transaction.atomic():
            book(patient, doctor, branch)
            assert WebhookDelivery.objects.count() == 1  # written, inside the transaction
            raise RuntimeError("something later in the same transaction failed")

    with pytest.raises(RuntimeError):
        change_then_fail()

    assert not Appointment.objects.exists()
    assert not WebhookEvent.objects.exists()
    assert not WebhookDelivery.objects.exists()
    assert queued == []


@pytest.mark.django_db(transaction=True)
def test_a_refused_booking_publishes_nothing(client, branch, doctor, patient, writer, queued):
    subscribe(URL, ["appointment.booked"])
    closed_cell = booking(patient, doctor, at(DAY, "14:00"), at(DAY, "14:15"))  # outside every session

    assert post_booking(client, writer, closed_cell).status_code == 409

    assert not WebhookEvent.objects.exists()
    assert queued == []


@pytest.mark.django_db(transaction=True)
def test_delivery_tasks_are_queued_only_after_commit_carrying_ids_only(branch, doctor, patient, queued):
    subscribe(URL, ["appointment.booked"], name="first")
    subscribe(URL, ["appointment.booked"], name="second")

    with transaction.atomic():
        book(patient, doctor, branch)
        assert queued == []

    ids = sorted(WebhookDelivery.objects.values_list("id", flat=True))
    assert sorted(queued) == [(ids[0], None), (ids[1], None)]
