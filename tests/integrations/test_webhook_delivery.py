"""Attempts and their outcomes against a real local receiver, with a controlled clock where the schedule
spans hours: 2xx succeeds, 500 is retried at 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h (+-20 %) and then
fails, 410 disables the subscription, 3xx is not followed, Retry-After is honoured, timeouts are enforced;
claims make every task idempotent and the relay skips rows locked by others."""

from __future__ import annotations

import threading
import time
import uuid
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest
from django.db import connections, transaction

from integrations import tasks
from integrations.webhooks import clock, delivery, schedule
from integrations.webhooks.delivery import deliveries_relay, delivery_attempt
from integrations.webhooks.events import event_publish
from integrations.webhooks.models import WebhookAttempt, WebhookDelivery, WebhookEvent
from integrations.webhooks.services import subscription_set_active
from tests.integrations.webhook_receiver import Reply, receiver, subscribe, verify

pytestmark = pytest.mark.django_db
__all__ = ["receiver"]

PAYLOAD = {"appointment": {"appointment_id": "0b6a1e0c-52c1-4a8e-8f8f-6d0f0a3c9b11", "status": "booked"}}
SCHEDULE = [5, 300, 1800, 7200, 18000, 36000, 36000]


class FakeClock:
    def __init__(self) -> None:
        self.value = datetime.now(UTC).replace(microsecond=0)

    def __call__(self) -> datetime:
        return self.value

    def advance_to(self, moment: datetime) -> None:
        self.value = moment

    def advance(self, seconds: float) -> None:
        self.value += timedelta(seconds=seconds)


@pytest.fixture
def fake_clock(monkeypatch) -> FakeClock:
    fake = FakeClock()
    monkeypatch.setattr(clock, "now", fake)
    return fake


@pytest.fixture
def queued(monkeypatch):
    calls = []
    monkeypatch.setattr(
        tasks.deliver_webhook, "apply_async", lambda args, **options: calls.append((tuple(args), options))
    )
    return calls


def publish() -> WebhookDelivery:
    event_publish(event_type="appointment.booked", payload=PAYLOAD)
    return WebhookDelivery.objects.latest("id")


def reload(row: WebhookDelivery) -> WebhookDelivery:
    row.refresh_from_db()
    return row


def test_a_2xx_answer_succeeds_and_a_second_task_for_it_does_nothing(receiver):
    _, secret = subscribe(receiver.url())
    receiver.reply_with(Reply(status=204, body=b""))
    row = publish()

    assert delivery_attempt(delivery_id=row.pk) == "succeeded"
    assert tasks.deliver_webhook(row.pk) == "skipped"
    assert tasks.deliver_webhook(row.pk, str(uuid.uuid4())) == "skipped"

    assert len(receiver.requests) == 1
    verify(receiver.requests[0], secret)
    row = reload(row)
    assert (row.status, row.attempt_count, row.last_status_code, row.last_error) == ("succeeded", 1, 204, "")
    assert row.delivered_at is not None
    assert WebhookAttempt.objects.count() == 1


def test_a_receiver_answering_500_gets_every_scheduled_attempt_and_then_the_delivery_fails(
    receiver, fake_clock, queued, django_capture_on_commit_callbacks
):
    subscribe(receiver.url())
    receiver.default = Reply(status=500, body=b"internal error")
    row = publish()
    attempt_times = [fake_clock()]

    with django_capture_on_commit_callbacks(execute=True):
        assert delivery_attempt(delivery_id=row.pk) == "retry"
        for number, step in enumerate(SCHEDULE, start=2):
            row = reload(row)
            wait = (row.next_attempt_at - fake_clock()).total_seconds()
            assert step * 0.8 <= wait <= step * 1.2, (number, wait)
            assert row.status == "pending"
            # Not due yet: neither a task nor the relay sends it early.
            fake_clock.advance(wait - 2)
            assert delivery_attempt(delivery_id=row.pk) == "skipped"
            assert deliveries_relay() == 0
            fake_clock.advance_to(row.next_attempt_at)
            attempt_times.append(fake_clock())
            expected = "failed" if number == schedule.MAX_ATTEMPTS else "retry"
            if number % 2:  # the relay's path: claim under a token, then the task with that token
                assert deliveries_relay() == 1
                assert delivery_attempt(delivery_id=row.pk, token=reload(row).claim_token) == expected
            else:  # the task's own path
                assert delivery_attempt(delivery_id=row.pk) == expected

    row = reload(row)
    assert (row.status, row.attempt_count, row.last_status_code, row.next_attempt_at) == ("failed", 8, 500, None)
    assert row.last_error == "HTTP 500"
    assert len(receiver.requests) == 8 == schedule.MAX_ATTEMPTS
    assert {r.webhook_id for r in receiver.requests} == {str(row.event_id)}
    assert [int(r.headers["webhook-timestamp"]) for r in receiver.requests] == [
        int(t.timestamp()) for t in attempt_times
    ]
    attempts = list(WebhookAttempt.objects.order_by("number"))
    assert [(a.number, a.status_code, a.response_excerpt) for a in attempts] == [
        (n, 500, "internal error") for n in range(1, 9)
    ]
    assert [a.started_at for a in attempts] == attempt_times
    # Only the 5 s wait went to the broker as a countdown; every longer one waited in the row for the relay.
    countdowns = [options["countdown"] for _, options in queued if options.get("countdown")]
    assert len(countdowns) == 1
    assert 4 <= countdowns[0] <= 6
    assert delivery_attempt(delivery_id=row.pk) == "skipped"
    assert deliveries_relay() == 0


def test_a_410_disables_the_subscription_and_its_other_deliveries_fail_unsent(receiver):
    subscription, _ = subscribe(receiver.url())
    receiver.reply_with(Reply(status=410, body=b"gone"))
    first, second = publish(), publish()

    assert delivery_attempt(delivery_id=first.pk) == "gone"

    subscription.refresh_from_db()
    assert subscription.is_active is False
    assert subscription.disabled_reason.startswith("The target answered 410 Gone on ")
    first = reload(first)
    assert (first.status, first.last_status_code, first.next_attempt_at) == ("failed", 410, None)
    assert first.last_error == "HTTP 410 Gone: the subscription was disabled."
    assert delivery_attempt(delivery_id=second.pk) == "skipped"
    second = reload(second)
    assert (second.status, second.attempt_count, second.last_error) == (
        "failed",
        0,
        "The subscription is disabled.",
    )
    assert len(receiver.requests) == 1
    event_publish(event_type="appointment.booked", payload=PAYLOAD)
    assert WebhookDelivery.objects.count() == 2  # no delivery for a disabled subscription


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_a_redirect_is_not_followed_and_is_retried(receiver, status):
    subscribe(receiver.url())
    elsewhere = receiver.url("/elsewhere")
    receiver.reply_with(Reply(status=status, headers={"Location": elsewhere}, body=b""))
    row = publish()

    assert delivery_attempt(delivery_id=row.pk) == "retry"

    assert [r.path for r in receiver.requests] == ["/hooks"]
    attempt = WebhookAttempt.objects.get()
    assert (attempt.status_code, attempt.error) == (status, f"Redirect not followed (Location: {elsewhere}).")
    row = reload(row)
    assert (row.status, row.last_status_code) == ("pending", status)


@pytest.mark.parametrize(
    ("retry_after", "expected_seconds"),
    [
        ("120", 120),  # longer than the 5 s step: the receiver's wish wins
        ("1", None),  # shorter: the schedule still applies
        ("999999", 600),  # capped by WEBHOOK_RETRY_AFTER_MAX_SECONDS
        ("HTTP-DATE+3600", 600),  # an HTTP date, capped as well
        ("HTTP-DATE+90", 90),
        ("soon", None),  # invalid: ignored
    ],
)
def test_retry_after_postpones_the_next_attempt(receiver, fake_clock, settings, retry_after, expected_seconds):
    settings.WEBHOOK_RETRY_AFTER_MAX_SECONDS = 600
    if retry_after.startswith("HTTP-DATE+"):
        retry_after = format_datetime(fake_clock() + timedelta(seconds=int(retry_after[10:])), usegmt=True)
    subscribe(receiver.url())
    receiver.reply_with(Reply(status=503, headers={"Retry-After": retry_after}))
    row = publish()

    delivery_attempt(delivery_id=row.pk)

    wait = (reload(row).next_attempt_at - fake_clock()).total_seconds()
    if expected_seconds is None:
        assert 4 <= wait <= 6
    else:
        assert wait == expected_seconds


def test_an_attempt_is_cut_off_at_the_total_timeout(receiver, settings):
    settings.WEBHOOK_TIMEOUT_SECONDS = 1
    subscribe(receiver.url())
    receiver.reply_with(Reply(delay=5))
    row = publish()
    started = time.monotonic()

    assert delivery_attempt(delivery_id=row.pk) == "retry"

    assert time.monotonic() - started < 4.5  # cut at 1 s, not at the receiver's 5
    attempt = WebhookAttempt.objects.get()
    assert (attempt.status_code, attempt.error) == (None, "No complete response within 1 s.")
    assert 900 <= attempt.duration_ms < 2500


def test_a_refused_connection_is_a_failed_attempt(receiver):
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    subscribe(f"http://127.0.0.1:{port}/hooks")
    row = publish()

    assert delivery_attempt(delivery_id=row.pk) == "retry"

    error = WebhookAttempt.objects.get().error
    assert error.startswith("Could not connect: 127.0.0.1: ")
    assert "refused" in error.lower()


def test_only_the_first_kilobyte_of_the_response_is_kept(receiver):
    subscribe(receiver.url())
    receiver.reply_with(Reply(status=400, body=b"x" * 1000 + "é".encode() * 3000))
    delivery_attempt(delivery_id=publish().pk)

    excerpt = WebhookAttempt.objects.get().response_excerpt
    assert excerpt.startswith("x" * 1000)
    assert len(excerpt.encode()) <= 1024 + 3  # 1024 bytes, a cut multibyte character shown as one U+FFFD


def test_an_error_inside_the_sender_is_logged_on_the_attempt_and_retried(receiver, monkeypatch):
    from django.core.exceptions import ImproperlyConfigured

    from integrations.webhooks.models import WebhookSubscription

    def broken(self, now):
        raise ImproperlyConfigured("Encrypted value cannot be decrypted with FIELD_ENCRYPTION_KEY.")

    subscribe(receiver.url())
    row = publish()
    monkeypatch.setattr(WebhookSubscription, "signing_secrets", broken)

    assert delivery_attempt(delivery_id=row.pk) == "retry"

    assert WebhookAttempt.objects.get().error == (
        "Internal error: ImproperlyConfigured: Encrypted value cannot be decrypted with FIELD_ENCRYPTION_KEY."
    )
    row = reload(row)
    assert (row.status, row.attempt_count, row.claimed_until, row.attempt_started_at) == ("pending", 1, None, None)
    assert receiver.requests == []


def test_a_disabled_subscription_gets_nothing_and_its_pending_deliveries_fail(receiver):
    subscription, _ = subscribe(receiver.url())
    row = publish()
    subscription_set_active(subscription=subscription, active=False, reason="Receiver retired")

    assert deliveries_relay() == 0

    row = reload(row)
    assert (row.status, row.last_error, row.attempt_count) == ("failed", "The subscription is disabled.", 0)
    assert receiver.requests == []
    subscription.refresh_from_db()
    assert subscription.disabled_reason == "Receiver retired"


def test_a_claim_left_by_a_dead_worker_is_taken_over_and_the_lost_attempt_logged(receiver, fake_clock, settings):
    settings.WEBHOOK_CLAIM_LEASE_SECONDS = 60
    subscribe(receiver.url())
    row = publish()
    claimed = delivery.delivery_claim(delivery_id=row.pk)  # a worker claims it, then dies before answering
    assert claimed is not None
    assert claimed.attempt_count == 1

    fake_clock.advance(59)
    assert deliveries_relay() == 0  # the lease still holds
    assert delivery_attempt(delivery_id=row.pk) == "skipped"
    fake_clock.advance(1)
    assert deliveries_relay() == 1
    assert delivery_attempt(delivery_id=row.pk, token=claimed.claim_token) == "skipped"  # the dead worker's token
    assert delivery_attempt(delivery_id=row.pk, token=reload(row).claim_token) == "succeeded"

    attempts = list(WebhookAttempt.objects.values_list("number", "status_code", "error", "duration_ms"))
    assert attempts == [(1, None, delivery.LOST_ATTEMPT, 60_000.0), (2, 200, "", attempts[1][3])]
    assert len(receiver.requests) == 1


def test_a_delivery_whose_workers_keep_dying_gives_up_after_the_last_attempt(receiver, fake_clock):
    subscribe(receiver.url())
    row = publish()
    for _ in range(schedule.MAX_ATTEMPTS):
        assert delivery.delivery_claim(delivery_id=row.pk) is not None
        fake_clock.advance(3600)

    assert deliveries_relay() == 0

    row = reload(row)
    assert (row.status, row.attempt_count, row.last_error) == ("failed", 8, "Gave up after 8 attempts.")
    assert WebhookAttempt.objects.filter(error=delivery.LOST_ATTEMPT).count() == 8
    assert receiver.requests == []


@pytest.mark.django_db(transaction=True)
def test_two_workers_racing_for_one_delivery_send_it_once(receiver, queued):
    subscribe(receiver.url())
    receiver.default = Reply(delay=0.5)
    row = publish()
    results = []

    def work() -> None:
        try:
            results.append(delivery_attempt(delivery_id=row.pk))
        finally:
            connections.close_all()

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert sorted(results) == ["skipped", "skipped", "skipped", "succeeded"]
    assert len(receiver.requests) == 1


@pytest.mark.django_db(transaction=True)
def test_the_relay_skips_rows_locked_by_another_transaction_without_waiting(receiver, queued):
    subscribe(receiver.url())
    locked, free = publish(), publish()
    holding, release = threading.Event(), threading.Event()

    def hold_lock() -> None:
        try:
            with transaction.atomic():
                WebhookDelivery.objects.select_for_update().get(pk=locked.pk)
                holding.set()
                release.wait(10)
        finally:
            connections.close_all()

    holder = threading.Thread(target=hold_lock)
    holder.start()
    holding.wait(5)
    started = time.monotonic()
    try:
        assert deliveries_relay() == 1
        assert time.monotonic() - started < 5  # did not wait for the lock, held for 10 s
        assert delivery_attempt(delivery_id=locked.pk) == "skipped"  # locked: not this worker's now
    finally:
        release.set()
        holder.join()

    assert (reload(locked).status, reload(free).status) == ("pending", "delivering")
    relayed = [args for args, _ in queued if args[1] is not None]  # the tasks queued at commit carry no token
    assert relayed == [(free.pk, str(reload(free).claim_token))]
    assert deliveries_relay() == 1  # once the lock is gone, the next run takes it


def test_finished_events_are_purged_after_the_retention_period(receiver, settings):
    settings.WEBHOOK_RETENTION_DAYS = 30
    subscribe(receiver.url())
    old_done, old_pending, recent = publish(), publish(), publish()
    WebhookDelivery.objects.filter(pk=old_done.pk).update(status="succeeded", next_attempt_at=None)
    long_ago = clock.now() - timedelta(days=31)
    WebhookEvent.objects.filter(pk__in=[old_done.event_id, old_pending.event_id]).update(created_at=long_ago)

    tasks.purge_webhook_events()

    assert set(WebhookEvent.objects.values_list("id", flat=True)) == {old_pending.event_id, recent.event_id}


def test_the_schedule_and_retry_after_parsing():
    for attempts_made, step in enumerate(SCHEDULE, start=1):
        delays = [
            schedule.retry_delay(attempts_made, retry_after=None, retry_after_max=timedelta(hours=10))
            for _ in range(200)
        ]
        seconds = [d.total_seconds() for d in delays]
        assert step * 0.8 <= min(seconds)
        assert max(seconds) <= step * 1.2
        assert max(seconds) - min(seconds) > step * 0.1  # jittered, not constant
    assert schedule.retry_delay(8, retry_after=None, retry_after_max=timedelta(hours=10)) is None
    now = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
    assert schedule.retry_after_parse("30", now=now) == timedelta(seconds=30)
    assert schedule.retry_after_parse("Sat, 21 Nov 2026 12:02:00 GMT", now=now) == timedelta(minutes=2)
    assert schedule.retry_after_parse("Sat, 21 Nov 2026 11:00:00 GMT", now=now) == timedelta(0)
    assert schedule.retry_after_parse("-5", now=now) is None
    assert schedule.retry_after_parse("", now=now) is None


def test_the_relay_runs_periodically_from_celery_beat(settings):
    entry = settings.CELERY_BEAT_SCHEDULE["relay-webhook-deliveries"]
    assert entry["task"] == "integrations.tasks.relay_webhook_deliveries"
    assert entry["schedule"] == settings.WEBHOOK_RELAY_INTERVAL_SECONDS == 10
    assert "integrations.tasks.relay_webhook_deliveries" in tasks.relay_webhook_deliveries.app.tasks
