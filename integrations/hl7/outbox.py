"""The HL7 outbox: messages written with the event, then sent one at a time per destination, in order.

- `hl7_messages_add` (called by integrations.webhooks.events in the transaction of the change) writes one
  Hl7Message per active destination taking the event's kind, and queues a drain of each destination after
  commit (a broker that is down then costs nothing: the relay finds the due messages later).
- `destination_drain` takes the destination's lease (SELECT ... FOR UPDATE SKIP LOCKED, then
  `claimed_until`), so one worker at a time sends its messages. It sends the head (the destination's first
  pending message by id) and moves on only when the head is acknowledged (AA) or given up, so message N+1
  never leaves before message N is settled. A failure (AE, AR, timeout, refused connection) schedules the
  head on the webhook retry schedule and ends the drain: the destination waits, nobody else does.
- `hl7_relay` (Celery beat) queues a drain for every destination whose head is due and whose lease is free
  or ran out (a worker killed mid-drain).

Logs name ids, control ids and ACK codes only, never the message (it holds patient data).
"""

from __future__ import annotations

import logging
import time
import uuid
from dataclasses import dataclass, field
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Exists, OuterRef, Q

from clinic.celery import task_get
from integrations.hl7 import client
from integrations.hl7.kinds import MESSAGE_KINDS
from integrations.hl7.messages import MessageBuildError, message_build
from integrations.hl7.models import Hl7Attempt, Hl7Destination, Hl7Message
from integrations.webhooks import clock, schedule
from integrations.webhooks.models import WebhookEvent

logger = logging.getLogger("integrations.hl7")

DRAIN_TASK = "integrations.tasks.hl7_destination_drain"
Status = Hl7Message.Status
LOST_ATTEMPT = "No result: the worker stopped during the attempt and its lease expired."
# Waits up to this long are queued with a broker countdown too; longer ones are left to the relay.
COUNTDOWN_MAX = timedelta(seconds=60)
_RETRY_POLICY = {"max_retries": 1, "interval_start": 0, "interval_step": 0.2, "interval_max": 0.2}


def control_id_new() -> str:
    """MSH-10: 20 characters (the length every HL7 v2 version accepts), random, unique in the table."""
    return uuid.uuid4().hex[:20].upper()


def drains_enqueue(destination_ids: list[uuid.UUID], *, countdown: float = 0) -> None:
    """Queue one drain task per destination now (call it after commit)."""
    drain = task_get(DRAIN_TASK)
    for destination_id in destination_ids:
        try:
            drain.apply_async((str(destination_id),), countdown=countdown, retry=True, retry_policy=_RETRY_POLICY)
        except Exception:  # noqa: BLE001 - any broker failure: the messages stay due and the relay queues the drain
            logger.warning("could not queue the drain of HL7 destination %s: the relay will", destination_id)
            return


def hl7_messages_add(event: WebhookEvent, destinations: list[uuid.UUID]) -> int:
    """One message per destination (active, taking `event`'s kind); in the caller's transaction."""
    if not destinations or event.type not in MESSAGE_KINDS:
        return 0
    label = MESSAGE_KINDS[event.type].label
    Hl7Message.objects.bulk_create(
        Hl7Message(
            destination_id=destination_id,
            event=event,
            message_type=label,
            control_id=control_id_new(),
            status=Status.PENDING,
            next_attempt_at=event.created_at,
            created_at=event.created_at,
        )
        for destination_id in destinations
    )
    transaction.on_commit(lambda: drains_enqueue(destinations))
    return len(destinations)


def _lease_for(destination: Hl7Destination) -> timedelta:
    # Long enough for one attempt at the destination's timeouts, renewed before every attempt.
    return timedelta(
        seconds=settings.HL7_CLAIM_LEASE_SECONDS + destination.connect_timeout_seconds + destination.ack_timeout_seconds
    )


def _claim(destination_id: uuid.UUID) -> tuple[Hl7Destination, uuid.UUID] | None:
    now = clock.now()
    with transaction.atomic():
        destination = Hl7Destination.objects.select_for_update(skip_locked=True).filter(pk=destination_id).first()
        if destination is None or (destination.claimed_until is not None and destination.claimed_until > now):
            return None
        token = uuid.uuid4()
        destination.claim_token, destination.claimed_until = token, now + _lease_for(destination)
        destination.save(update_fields=["claim_token", "claimed_until"])
    return destination, token


def _renew(destination: Hl7Destination, token: uuid.UUID) -> bool:
    until = clock.now() + _lease_for(destination)
    return Hl7Destination.objects.filter(pk=destination.pk, claim_token=token).update(claimed_until=until) == 1


def _release(destination: Hl7Destination, token: uuid.UUID) -> None:
    Hl7Destination.objects.filter(pk=destination.pk, claim_token=token).update(claim_token=None, claimed_until=None)


def _close(message: Hl7Message, status: str, error: str = "") -> None:
    message.status = status
    message.next_attempt_at = None
    message.attempt_started_at = None
    if error:
        message.last_error = error[:500]
    message.save(
        update_fields=[
            "status",
            "next_attempt_at",
            "attempt_started_at",
            "last_error",
            "last_ack_code",
            "acknowledged_at",
        ]
    )


@dataclass
class DrainResult:
    acknowledged: int = 0
    failed: int = 0
    retrying: int = 0
    skipped: bool = False
    control_ids: list[str] = field(default_factory=list)


class _Acknowledged:
    """AA outcomes not yet written: flushed in one transaction every FLUSH_EVERY messages, before any other
    outcome is written and when the drain ends. Each message was marked in flight (attempt_started_at) before
    it was sent, so a worker that dies before the flush leaves them pending with that mark: the next drain
    logs the lost attempt and sends them again under the same control id (at least once, never reordered)."""

    FLUSH_EVERY = 50

    def __init__(self) -> None:
        self.attempts: list[Hl7Attempt] = []

    def add(self, attempt: Hl7Attempt) -> None:
        self.attempts.append(attempt)
        if len(self.attempts) >= self.FLUSH_EVERY:
            self.flush()

    def flush(self) -> None:
        if not self.attempts:
            return
        now = clock.now()
        with transaction.atomic():
            Hl7Attempt.objects.bulk_create(self.attempts)
            Hl7Message.objects.filter(pk__in=[a.message_id for a in self.attempts]).update(
                status=Status.ACKNOWLEDGED,
                next_attempt_at=None,
                attempt_started_at=None,
                last_ack_code="AA",
                last_error="",
                acknowledged_at=now,
            )
        self.attempts = []


def _attempt(
    destination: Hl7Destination,
    message: Hl7Message,
    connection: client.Connection,
    result: DrainResult,
    acknowledged: _Acknowledged,
) -> bool:
    """One attempt of the head; True when the drain may go on to the next message."""
    now = clock.now()
    message.attempt_count += 1
    message.attempt_started_at = now
    Hl7Message.objects.filter(pk=message.pk).update(attempt_count=message.attempt_count, attempt_started_at=now)
    started = time.monotonic()
    ack: client.Ack | None = None
    error = ""
    try:
        text = message_build(
            event_type=message.event.type,
            payload=message.event.payload,
            destination=destination,
            control_id=message.control_id,
            created_at=message.event.created_at,
        )
    except MessageBuildError as exc:
        # It will never build: failing it at once lets the messages after it go.
        acknowledged.flush()
        Hl7Attempt.objects.create(message=message, number=message.attempt_count, started_at=now, error=str(exc)[:500])
        _close(message, Status.FAILED, str(exc))
        result.failed += 1
        logger.error("HL7 message %s (%s) cannot be built: failed", message.pk, message.control_id)
        return True
    try:
        ack = connection.send(text, message.control_id)
    except client.TransportError as exc:
        error = str(exc)
    attempt = Hl7Attempt(
        message=message,
        number=message.attempt_count,
        started_at=now,
        duration_ms=(time.monotonic() - started) * 1000,
        ack_code=ack.code if ack else "",
        ack_text=ack.text if ack else "",
        error=error[:500],
    )
    if ack is not None and ack.accepted:
        acknowledged.add(attempt)
        result.acknowledged += 1
        result.control_ids.append(message.control_id)
        return True
    acknowledged.flush()
    finished = clock.now()
    with transaction.atomic():
        attempt.save()
        message.attempt_started_at = None
        message.last_ack_code = ack.code if ack else ""
        problem = error or f"{ack.code if ack else '?'}: {ack.text if ack else ''}".strip()
        delay = schedule.retry_delay(message.attempt_count, retry_after=None, retry_after_max=timedelta(0))
        if delay is None:
            _close(message, Status.FAILED, f"Gave up after {message.attempt_count} attempts. Last: {problem}")
            result.failed += 1
            logger.warning(
                "HL7 message %s (%s) failed after %d attempts", message.pk, message.control_id, message.attempt_count
            )
            return True
        message.next_attempt_at = finished + delay
        message.last_error = problem[:500]
        message.save(update_fields=["next_attempt_at", "attempt_started_at", "last_ack_code", "last_error"])
    result.retrying += 1
    logger.info(
        "HL7 message %s (%s) to destination %s: %s, retry in %.0f s",
        message.pk,
        message.control_id,
        destination.pk,
        ack.code if ack else "no ACK",
        delay.total_seconds(),
    )
    if delay <= COUNTDOWN_MAX:
        drains_enqueue([destination.pk], countdown=delay.total_seconds())
    return False


def _pending(destination: Hl7Destination, after_id: int, limit: int = 100) -> list[Hl7Message]:
    """The destination's next pending messages in order (the head first)."""
    return list(
        Hl7Message.objects.select_related("event")
        .filter(destination=destination, status=Status.PENDING, id__gt=after_id)
        .order_by("id")[:limit]
    )


def destination_drain(*, destination_id: uuid.UUID, budget_seconds: float | None = None) -> DrainResult:
    """Send the destination's due messages in order until one fails, none is due, or the time budget is
    spent (then another drain is queued). Does nothing when another worker holds the destination."""
    result = DrainResult()
    claimed = _claim(destination_id)
    if claimed is None:
        result.skipped = True
        return result
    destination, token = claimed
    budget = settings.HL7_DRAIN_SECONDS if budget_seconds is None else budget_seconds
    stop_at = time.monotonic() + budget
    lease = _lease_for(destination).total_seconds()
    renew_at = time.monotonic() + lease / 2  # the lease is renewed when half of it is left
    connection = client.Connection(
        destination.host,
        destination.port,
        connect_timeout=destination.connect_timeout_seconds,
        ack_timeout=destination.ack_timeout_seconds,
    )
    acknowledged = _Acknowledged()
    more = False
    last_id = 0
    try:
        while True:
            batch = _pending(destination, last_id)
            if not batch:
                break
            go_on = True
            for head in batch:
                last_id = head.pk
                if time.monotonic() >= stop_at:
                    more = go_on = False
                    break
                now = clock.now()
                if head.attempt_started_at is not None:  # a worker died during this attempt
                    Hl7Attempt.objects.create(
                        message=head,
                        number=head.attempt_count,
                        started_at=head.attempt_started_at,
                        duration_ms=(now - head.attempt_started_at).total_seconds() * 1000,
                        error=LOST_ATTEMPT,
                    )
                    head.attempt_started_at = None
                    head.save(update_fields=["attempt_started_at"])
                if not destination.is_active:
                    _close(head, Status.FAILED, "The destination is disabled.")
                    result.failed += 1
                    continue
                assert head.next_attempt_at is not None
                if head.next_attempt_at > now:
                    go_on = False
                    break
                if time.monotonic() >= renew_at:
                    if not _renew(destination, token):
                        logger.warning("HL7 destination %s: lease lost during the drain", destination.pk)
                        acknowledged.flush()
                        return result
                    renew_at = time.monotonic() + lease / 2
                if not _attempt(destination, head, connection, result, acknowledged):
                    go_on = False
                    break
            if not go_on:
                break
    finally:
        connection.close()
        acknowledged.flush()
        _release(destination, token)
    if more:
        drains_enqueue([destination.pk])
    return result


def hl7_relay() -> int:
    """Queue a drain for each destination with a due head and no live lease."""
    now = clock.now()
    due = Hl7Message.objects.filter(destination=OuterRef("pk"), status=Status.PENDING, next_attempt_at__lte=now)
    destinations = list(
        Hl7Destination.objects.filter(Q(claimed_until__isnull=True) | Q(claimed_until__lte=now))
        .filter(Exists(due))
        .values_list("id", flat=True)
    )
    drains_enqueue(destinations)
    if destinations:
        logger.info("HL7 relay: %d destinations with due messages", len(destinations))
    return len(destinations)


@transaction.atomic
def message_replay(*, message: Hl7Message) -> Hl7Message:
    """Send the message again (same control id) from the start of the schedule, in its place by id."""
    locked = Hl7Message.objects.select_for_update().get(pk=message.pk)
    locked.status = Status.PENDING
    locked.attempt_count = 0
    locked.next_attempt_at = clock.now()
    locked.attempt_started_at = None
    locked.save(update_fields=["status", "attempt_count", "next_attempt_at", "attempt_started_at"])
    destination_id = locked.destination_id
    transaction.on_commit(lambda: drains_enqueue([destination_id]))
    return locked
