"""Delivering: claims, attempts, outcomes and the relay.

Every task is idempotent. A worker first claims the delivery row (SELECT ... FOR UPDATE SKIP LOCKED, then
a lease until `claimed_until`); a delivery that is not due, already claimed, or finished is left alone,
so a redelivered or duplicated task does nothing. The attempt itself runs outside any transaction, and
its outcome is written with the next attempt time in the row; short waits (the 5 s retry) are also queued
with a countdown, longer ones are left to the relay. A worker that dies mid-attempt leaves its claim
behind; when the lease runs out the relay hands the delivery to another worker, logging the lost attempt.

An outcome PostgreSQL refuses to record (a full disk: docs/operations.md §5) is handed to Redis
(integrations.pending_outcomes) and recorded by a task that only records, retried until PostgreSQL accepts
it; while it waits there, neither the relay nor a task reclaims the delivery when its lease runs out, so
the receiver is not sent it again. At least once remains only where the outcome is lost before it reaches
Redis or PostgreSQL: the worker dies (or is killed) between the receiver's answer and the handing on, or
Redis and PostgreSQL both refuse it (docs/operations.md §5).
"""

from __future__ import annotations

import logging
import time
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import DatabaseError, transaction
from django.db.models import Q

from clinic.celery import task_get
from clinic.worker_counters import counter_inc
from integrations.pending_outcomes import PendingOutcomes
from integrations.webhooks import clock, schedule, transport
from integrations.webhooks.dispatch import deliveries_enqueue
from integrations.webhooks.models import WebhookAttempt, WebhookDelivery, WebhookSubscription
from integrations.webhooks.signing import signature_header
from integrations.webhooks.targets import TargetRefused, target_addresses, target_parse

logger = logging.getLogger("integrations.webhooks")

Status = WebhookDelivery.Status
USER_AGENT = "ClinicWebhooks/1.0 (+https://www.standardwebhooks.com/)"
# Waits up to this long are queued with a broker countdown as well; longer ones only through the relay.
COUNTDOWN_MAX = timedelta(seconds=60)
# A task arriving this early for its retry still counts as due (clocks of hosts differ a little).
DUE_TOLERANCE = timedelta(seconds=1)
LOST_ATTEMPT = "No result: the worker stopped during the attempt and its claim expired."
RECORD_TASK = "integrations.tasks.record_webhook_outcome"
PENDING = PendingOutcomes("webhook-deliveries")
# clinic_webhook_attempts' outcome label for each result of _record.
_COUNTED = {
    "succeeded": "delivered",
    "retry": "retrying",
    "failed": "gave_up",
    "gone": "gone",
    "superseded": "superseded",
}
_CLAIM_FIELDS = ["status", "claim_token", "claimed_until", "attempt_count", "attempt_started_at", "next_attempt_at"]


@dataclass(frozen=True)
class Outcome:
    started_at: datetime
    duration_ms: float
    status_code: int | None = None
    error: str = ""
    excerpt: str = ""
    address: str | None = None
    retry_after: str | None = None

    @property
    def succeeded(self) -> bool:
        return self.status_code is not None and 200 <= self.status_code < 300


def _lease() -> timedelta:
    return timedelta(seconds=settings.WEBHOOK_CLAIM_LEASE_SECONDS)


def _due(now: datetime) -> Q:
    return Q(status=Status.PENDING, next_attempt_at__lte=now) | Q(status=Status.DELIVERING, claimed_until__lte=now)


def _close(delivery: WebhookDelivery, status: str, error: str = "") -> None:
    delivery.status = status
    delivery.next_attempt_at = None
    delivery.claim_token = None
    delivery.claimed_until = None
    delivery.attempt_started_at = None
    if error:
        delivery.last_error = error[:500]


def _settle_lost_attempt(delivery: WebhookDelivery, now: datetime) -> None:
    """A claim that ran out with an attempt in flight: log that attempt as lost."""
    if delivery.attempt_started_at is None:
        return
    WebhookAttempt.objects.create(
        delivery=delivery,
        number=delivery.attempt_count,
        started_at=delivery.attempt_started_at,
        duration_ms=(now - delivery.attempt_started_at).total_seconds() * 1000,
        error=LOST_ATTEMPT,
    )
    delivery.attempt_started_at = None
    delivery.last_error = LOST_ATTEMPT


def _refusal(delivery: WebhookDelivery) -> str | None:
    """Why a claimed delivery must not be attempted again (it is then closed as failed)."""
    if not delivery.subscription.is_active and not delivery.event.is_test:
        return "The subscription is disabled."
    if delivery.attempt_count >= schedule.MAX_ATTEMPTS:
        return f"Gave up after {delivery.attempt_count} attempts."
    return None


def delivery_claim(*, delivery_id: int, token: uuid.UUID | None = None) -> WebhookDelivery | None:
    """Take the delivery for one attempt; None when it is not this caller's to send (not due, claimed
    by another worker, finished, or locked right now by someone else).

    Without a token the delivery must be due. With the token the relay claimed it under, it must still
    hold that claim (a newer relay run may have reclaimed it since).
    """
    now = clock.now()
    with transaction.atomic():
        delivery = (
            WebhookDelivery.objects.select_for_update(skip_locked=True, of=("self",))
            .select_related("event", "subscription")
            .filter(pk=delivery_id)
            .first()
        )
        if delivery is None:
            return None
        if token is not None:
            ours = delivery.status == Status.DELIVERING and delivery.claim_token == token
        else:
            ours = (
                delivery.status == Status.PENDING
                and delivery.next_attempt_at is not None
                and delivery.next_attempt_at <= now + DUE_TOLERANCE
            ) or (
                delivery.status == Status.DELIVERING
                and delivery.claimed_until is not None
                and delivery.claimed_until <= now
            )
        if not ours:
            return None
        if delivery.status == Status.DELIVERING and token is None and _outcome_waiting(delivery):
            return None  # the attempt was made; its outcome waits in Redis to be recorded
        _settle_lost_attempt(delivery, now)
        refusal = _refusal(delivery)
        if refusal:
            _close(delivery, Status.FAILED, refusal)
            delivery.save(update_fields=[*_CLAIM_FIELDS, "last_error"])
            return None
        delivery.status = Status.DELIVERING
        delivery.claim_token = uuid.uuid4()
        delivery.claimed_until = now + _lease()
        delivery.attempt_count += 1
        delivery.attempt_started_at = now
        delivery.save(update_fields=[*_CLAIM_FIELDS, "last_error"])
    return delivery


def _send(delivery: WebhookDelivery) -> Outcome:
    event, subscription = delivery.event, delivery.subscription
    started_at = clock.now()
    started = time.monotonic()

    def took() -> float:
        return (time.monotonic() - started) * 1000

    body = event.body()
    timestamp = int(started_at.timestamp())
    headers = {
        **subscription.extra_headers,
        "Content-Type": "application/json",
        "User-Agent": USER_AGENT,
        "webhook-id": str(event.id),
        "webhook-timestamp": str(timestamp),
        "webhook-signature": signature_header(
            secrets=subscription.signing_secrets(started_at), msg_id=str(event.id), timestamp=timestamp, body=body
        ),
    }
    allow_private = settings.WEBHOOK_ALLOW_PRIVATE_TARGETS
    try:
        target = target_parse(subscription.target_url, allow_private=allow_private)
        addresses = target_addresses(target, allow_private=allow_private)
        response = transport.post(
            target=target,
            addresses=addresses,
            headers=headers,
            body=body,
            connect_timeout=settings.WEBHOOK_CONNECT_TIMEOUT_SECONDS,
            total_timeout=settings.WEBHOOK_TIMEOUT_SECONDS,
        )
    except TargetRefused as exc:
        return Outcome(started_at=started_at, duration_ms=took(), error=f"Target refused: {exc}")
    except transport.TransportError as exc:
        return Outcome(started_at=started_at, duration_ms=took(), error=str(exc))
    error = ""
    if 300 <= response.status < 400:
        error = f"Redirect not followed (Location: {response.headers.get('location', '-')})."
    return Outcome(
        started_at=started_at,
        duration_ms=took(),
        status_code=response.status,
        error=error,
        excerpt=response.excerpt,
        address=response.address,
        retry_after=response.headers.get("retry-after"),
    )


def _record(delivery: WebhookDelivery, outcome: Outcome) -> str:
    """Log the attempt and move the delivery on: succeeded, failed, or pending with its next time."""
    now = clock.now()
    with transaction.atomic():
        current = (
            WebhookDelivery.objects.select_for_update(of=("self",))
            .select_related("event", "subscription")
            .get(pk=delivery.pk)
        )
        WebhookAttempt.objects.create(
            delivery=current,
            number=delivery.attempt_count,
            started_at=outcome.started_at,
            duration_ms=outcome.duration_ms,
            address=outcome.address,
            status_code=outcome.status_code,
            response_excerpt=outcome.excerpt,
            error=outcome.error[:500],
        )
        if current.claim_token != delivery.claim_token:
            # Our claim ran out and another worker took the delivery over: its attempt decides.
            logger.warning("webhook delivery %s: claim lost during the attempt", delivery.pk)
            return "superseded"
        current.last_status_code = outcome.status_code
        current.last_attempt_at = outcome.started_at
        current.last_error = (outcome.error or (f"HTTP {outcome.status_code}" if not outcome.succeeded else ""))[:500]
        result: str
        if outcome.succeeded:
            _close(current, Status.SUCCEEDED)
            current.delivered_at = now
            result = Status.SUCCEEDED
        elif outcome.status_code == 410:
            _close(current, Status.FAILED, "HTTP 410 Gone: the subscription was disabled.")
            WebhookSubscription.objects.filter(pk=current.subscription_id).update(
                is_active=False,
                disabled_at=now,
                disabled_reason=f"The target answered 410 Gone on {now:%Y-%m-%d %H:%M} UTC (delivery {current.pk}).",
                updated_at=now,
            )
            logger.warning("webhook subscription %s disabled: its target answered 410", current.subscription_id)
            result = "gone"
        else:
            delay = None
            if not current.event.is_test:  # a test event is tried once; the admin can replay it
                delay = schedule.retry_delay(
                    current.attempt_count,
                    retry_after=schedule.retry_after_parse(outcome.retry_after, now=now),
                    retry_after_max=timedelta(seconds=settings.WEBHOOK_RETRY_AFTER_MAX_SECONDS),
                )
            if delay is None:
                _close(current, Status.FAILED)
                result = Status.FAILED
            else:
                _close(current, Status.PENDING)
                current.next_attempt_at = now + delay
                if delay <= COUNTDOWN_MAX:
                    deliveries_enqueue([(current.pk, None)], countdown=delay.total_seconds())
                result = "retry"
        current.save(
            update_fields=[
                *_CLAIM_FIELDS,
                "last_status_code",
                "last_attempt_at",
                "last_error",
                "delivered_at",
            ]
        )
    return result


def _record_counted(delivery: WebhookDelivery, outcome: Outcome) -> str:
    result = _record(delivery, outcome)
    counter_inc("clinic_webhook_attempts", _COUNTED.get(result, result))
    return result


def delivery_attempt(*, delivery_id: int, token: uuid.UUID | None = None) -> str:
    """Claim the delivery and make one attempt; returns what happened ("skipped" when it was not ours,
    "deferred" when PostgreSQL refused the outcome and Redis holds it until it is recorded)."""
    delivery = delivery_claim(delivery_id=delivery_id, token=token)
    if delivery is None:
        return "skipped"
    started_at = clock.now()
    try:
        outcome = _send(delivery)
    except Exception as exc:
        # A bug or a broken configuration (an undecryptable secret...): logged here and on the attempt,
        # and retried on the schedule like any failure, rather than left for the lease to expire.
        logger.exception("webhook delivery %s: attempt failed inside the sender", delivery.pk)
        outcome = Outcome(started_at=started_at, duration_ms=0, error=f"Internal error: {type(exc).__name__}: {exc}")
    try:
        return _record_counted(delivery, outcome)
    except DatabaseError:
        if not _outcome_defer(delivery, outcome):
            raise  # the lease runs out and the relay sends it again: the at-least-once case
        logger.warning("webhook delivery %s: outcome not recorded (database error); kept in Redis", delivery.pk)
        counter_inc("clinic_webhook_outcomes_deferred")
        return "deferred"


# --- Outcomes PostgreSQL refused (integrations.pending_outcomes) ---------------------------------------------


def _outcome_defer(delivery: WebhookDelivery, outcome: Outcome) -> bool:
    kept = PENDING.put(
        str(delivery.pk),
        {
            "claim_token": str(delivery.claim_token),
            "attempt_count": delivery.attempt_count,
            "started_at": outcome.started_at.isoformat(),
            "duration_ms": outcome.duration_ms,
            "status_code": outcome.status_code,
            "error": outcome.error,
            "excerpt": outcome.excerpt,
            "address": outcome.address,
            "retry_after": outcome.retry_after,
        },
    )
    if kept:
        try:
            task_get(RECORD_TASK).apply_async((delivery.pk,), countdown=1)
        except Exception:  # the broker is Redis too: the relay drains the hash anyway
            logger.warning(
                "webhook delivery %s: recording task not queued; the relay records it", delivery.pk, exc_info=True
            )
    return kept


def _outcome_waiting(delivery: WebhookDelivery) -> bool:
    pending = PENDING.get(str(delivery.pk))
    return pending is not None and pending["claim_token"] == str(delivery.claim_token)


def outcome_record(*, delivery_id: int) -> str:
    """Record the outcome Redis holds for the delivery ("none" when it holds none). Raises DatabaseError
    while PostgreSQL still refuses it (the caller tries again later); the outcome stays in Redis."""
    pending = PENDING.get(str(delivery_id))
    if pending is None:
        return "none"
    token = uuid.UUID(pending["claim_token"])
    if not WebhookDelivery.objects.filter(pk=delivery_id, claim_token=token).exists():
        # Recorded already (the deletion from Redis failed), or the delivery is gone: nothing to do.
        PENDING.delete(str(delivery_id))
        return "stale"
    delivery = WebhookDelivery(pk=delivery_id, claim_token=token, attempt_count=pending["attempt_count"])
    outcome = Outcome(
        started_at=datetime.fromisoformat(pending["started_at"]),
        duration_ms=pending["duration_ms"],
        status_code=pending["status_code"],
        error=pending["error"],
        excerpt=pending["excerpt"],
        address=pending["address"],
        retry_after=pending["retry_after"],
    )
    result = _record_counted(delivery, outcome)
    PENDING.delete(str(delivery_id))
    logger.info("webhook delivery %s: deferred outcome recorded (%s)", delivery_id, result)
    return result


def outcomes_drain() -> set[int]:
    """Record every outcome Redis holds; returns the deliveries whose outcome PostgreSQL still refuses."""
    refused: set[int] = set()
    for field in PENDING.fields():
        try:
            outcome_record(delivery_id=int(field))
        except DatabaseError:
            refused.add(int(field))
    return refused


def deliveries_relay(*, limit: int | None = None) -> int:
    """Claim up to `limit` due deliveries (pending and due, or with an expired claim) and queue them.

    SKIP LOCKED lets several relays and workers run at once without waiting on each other's rows. The
    claim (a lease under a fresh token) keeps the next relay run from queueing them again; if the queued
    messages are lost the lease runs out and a later run queues them anew.
    """
    # First the outcomes waiting in Redis: recorded, their deliveries move on; still refused, their expired
    # claims are not taken over (the receiver has them already).
    waiting = outcomes_drain()
    now = clock.now()
    limit = limit or settings.WEBHOOK_RELAY_BATCH_SIZE
    with transaction.atomic():
        candidates = (
            WebhookDelivery.objects.select_for_update(skip_locked=True, of=("self",))
            .select_related("event", "subscription")
            .filter(_due(now))
        )
        if waiting:
            candidates = candidates.exclude(status=Status.DELIVERING, pk__in=waiting)
        due = list(candidates.order_by("next_attempt_at", "id")[:limit])
        queued: list[tuple[int, uuid.UUID | None]] = []
        for delivery in due:
            _settle_lost_attempt(delivery, now)
            refusal = _refusal(delivery)
            if refusal:
                _close(delivery, Status.FAILED, refusal)
                continue
            delivery.status = Status.DELIVERING
            delivery.claim_token = uuid.uuid4()
            delivery.claimed_until = now + _lease()
            queued.append((delivery.pk, delivery.claim_token))
        WebhookDelivery.objects.bulk_update(due, [*_CLAIM_FIELDS, "last_error"])
        deliveries_enqueue(queued)
    if due:
        logger.info("webhook relay: %d due deliveries, %d queued", len(due), len(queued))
    return len(queued)
