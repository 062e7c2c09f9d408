"""The notification outbox: patient notifications queued in the transaction of the change they announce.

Like webhook deliveries (integrations.webhooks.delivery), and for the same reasons: a task published
after commit is lost when the broker (Redis) is down at that moment or the worker that took it is killed
(it came back after the broker's visibility timeout, an hour). Here the row is the record; the broker
only carries its id and a claim token.

- `notification_outbox_add` writes the row, claimed for NOTIFICATION_CLAIM_LEASE_SECONDS, and publishes it
  after commit; a publish that fails releases the claim, so the next relay run queues it.
- `notification_outbox_run` (the worker) takes the message only with the token it was queued under, runs
  the domain app's task in-process, and marks the message finished. The domain task logs each channel's
  attempt and never sends a channel twice (NotificationAttempt's `notification_sent_once`), so running a
  message again after a lost claim texts nobody twice.
- `notification_outbox_relay` (Celery beat) re-queues unfinished messages whose claim ran out or was
  released, with SKIP LOCKED so relays on several beats (or a relay and a worker) never wait on each other.
"""

from __future__ import annotations

import logging
import uuid
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import F, Min, Q
from django.utils import timezone

import clinic.metrics as metrics
from clinic.celery import task_get
from integrations.notifications.models import NotificationOutboxMessage

logger = logging.getLogger("integrations.notifications.outbox")

RUN_TASK = "integrations.tasks.notification_outbox_run"
# Publishing is tried twice at most: a dead broker costs the committed request little time.
_RETRY_POLICY = {"max_retries": 1, "interval_start": 0, "interval_step": 0.2, "interval_max": 0.2}


def _lease() -> timedelta:
    return timedelta(seconds=settings.NOTIFICATION_CLAIM_LEASE_SECONDS)


def _publish(messages: list[tuple[int, uuid.UUID]]) -> None:
    """Queue (id, token) pairs; on a broker failure release the claims of those not queued."""
    run = task_get(RUN_TASK)
    for sent, (message_id, token) in enumerate(messages):
        try:
            run.apply_async((message_id, str(token)), retry=True, retry_policy=_RETRY_POLICY)
        except Exception:  # any broker failure: the rows stay unfinished and the relay sends them
            unsent = messages[sent:]
            metrics.OUTBOX_PUBLISH_FAILED.labels(kind="notification").inc(len(unsent))
            logger.warning(
                "could not queue %d notifications (first outbox id %s): the relay will send them",
                len(unsent),
                message_id,
                exc_info=True,
            )
            NotificationOutboxMessage.objects.filter(
                pk__in=[pk for pk, _ in unsent], claim_token__in=[t for _, t in unsent]
            ).update(claim_token=None, claimed_until=None)
            return


def notification_outbox_add(*, task: str, args: list[Any]) -> NotificationOutboxMessage:
    """Queue `task(*args)` (a registered Celery task name; ids only in `args`) to run once the current
    transaction commits. Nothing is sent for a change that rolls back: the row rolls back with it."""
    now = timezone.now()
    message = NotificationOutboxMessage.objects.create(
        task=task, args=args, created_at=now, claim_token=uuid.uuid4(), claimed_until=now + _lease()
    )
    pair = (message.pk, message.claim_token)
    assert pair[1] is not None
    transaction.on_commit(lambda: _publish([(pair[0], pair[1])]))  # type: ignore[list-item]
    return message


def notification_outbox_run(*, message_id: int, token: uuid.UUID) -> str:
    """Send one outbox message if it is still this token's to send: "sent", "failed" (to be retried
    when its claim runs out, or given up after NOTIFICATION_MAX_ATTEMPTS) or "skipped"."""
    now = timezone.now()
    claimed = NotificationOutboxMessage.objects.filter(
        pk=message_id, claim_token=token, finished_at__isnull=True
    ).update(claimed_until=now + _lease(), attempt_count=F("attempt_count") + 1)
    if not claimed:
        return "skipped"  # finished already, or re-queued under a newer token
    message = NotificationOutboxMessage.objects.get(pk=message_id)
    try:
        task_get(message.task)(*message.args)
    except Exception as exc:
        logger.exception("notification outbox message %s (%s) failed", message.pk, message.task)
        error = f"{type(exc).__name__}: {exc}"[:500]
        give_up = message.attempt_count >= settings.NOTIFICATION_MAX_ATTEMPTS
        NotificationOutboxMessage.objects.filter(pk=message.pk, claim_token=token).update(
            last_error=error, finished_at=timezone.now() if give_up else None
        )
        return "failed"
    NotificationOutboxMessage.objects.filter(pk=message.pk).update(finished_at=timezone.now(), last_error="")
    return "sent"


def notification_outbox_relay(*, limit: int = 500) -> int:
    """Queue again every unfinished message whose claim ran out or was released; returns how many."""
    now = timezone.now()
    with transaction.atomic():
        due = list(
            NotificationOutboxMessage.objects.select_for_update(skip_locked=True)
            .filter(finished_at__isnull=True)
            .filter(Q(claimed_until__isnull=True) | Q(claimed_until__lt=now))
            .order_by("id")[:limit]
        )
        for message in due:
            message.claim_token = uuid.uuid4()
            message.claimed_until = now + _lease()
        NotificationOutboxMessage.objects.bulk_update(due, ["claim_token", "claimed_until"])
        pairs = [(m.pk, m.claim_token) for m in due]
        transaction.on_commit(lambda: _publish(pairs))  # type: ignore[arg-type]
    if due:
        logger.info("notification relay: %d messages queued again", len(due))
    return len(due)


def notification_outbox_purge(*, older_than: datetime) -> int:
    deleted, _ = NotificationOutboxMessage.objects.filter(finished_at__lt=older_than).delete()
    return deleted


def notification_outbox_oldest() -> datetime | None:
    """When the oldest unfinished message was written (None: no backlog), for the backlog-age metric."""
    oldest: datetime | None = NotificationOutboxMessage.objects.filter(finished_at__isnull=True).aggregate(
        oldest=Min("created_at")
    )["oldest"]
    return oldest
