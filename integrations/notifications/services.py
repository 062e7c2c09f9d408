"""Patient notifications (SMS and e-mail): whether to send, and sending one with its attempt logged.

The domain app decides when a notification is due and builds its text; this module knows only the event
kinds of the registry (integrations.webhooks.registry) and which of them the settings switch on. Every attempt is a NotificationAttempt row; a channel already sent for the same dedupe key
is never sent again, so a task redelivered after a worker crash does not text the patient twice.

A send whose attempt PostgreSQL refuses to record (a full disk: docs/operations.md §5) is handed to Redis
(integrations.pending_outcomes) and recorded later by a task that only records; until then the send
counts as recorded: the outbox's retry of the message finds it there and does not text the patient again.
"""

from __future__ import annotations

import logging
import time
import uuid
from dataclasses import dataclass
from datetime import datetime
from functools import cache

from django.core.mail import send_mail
from django.db import DatabaseError, IntegrityError, connection, transaction
from django.utils import timezone

from clinic.celery import task_get
from clinic.text import mask_phone
from clinic.worker_counters import counter_inc
from integrations.models import NotificationAttempt, NotificationSettings
from integrations.notifications.sms import SmsError, sms_backend
from integrations.pending_outcomes import PendingOutcomes
from integrations.webhooks.registry import event_kind_get

logger = logging.getLogger("integrations.notifications.services")

Channel = NotificationAttempt.Channel
PENDING = PendingOutcomes("notification-attempts")
RECORD_TASK = "integrations.tasks.record_notification_attempts"
_ROW_FIELDS = (
    "event_type",
    "subject_id",
    "patient_ref",
    "dedupe_key",
    "channel",
    "recipient",
    "attempt",
    "status",
    "detail",
    "duration_ms",
)


@dataclass(frozen=True)
class Message:
    event_type: str
    subject_id: uuid.UUID
    patient_ref: uuid.UUID
    version: int
    phone: str
    email: str
    subject: str
    text: str

    def dedupe_key(self, channel: str) -> str:
        return f"{self.subject_id}:{self.version}:{channel}"


@cache
def _channels_statement() -> str:
    settings_table = NotificationSettings._meta.db_table
    branches = NotificationSettings.branches.through._meta.db_table
    # The settings row's switches when it takes the kind and its branch filter is empty or holds the branch;
    # no row otherwise. A constant statement, not a composed queryset: every booking and every final result
    # reads it inside its transaction, and composing the equivalent queryset cost the booking path more CPU
    # than its budget allows (bench/results/plans_retired.md). tests/integrations/test_notification_channels.py
    # holds the ORM reading it must agree with; docs/architecture.md §6 lists it for a Django upgrade.
    return f"""
        SELECT n.sms_enabled, n.email_enabled FROM {settings_table} n
         WHERE n.id = 1 AND %(kind)s = ANY(n.event_kinds)
           AND (NOT EXISTS (SELECT 1 FROM {branches} b WHERE b.notificationsettings_id = n.id)
                OR EXISTS (SELECT 1 FROM {branches} b
                            WHERE b.notificationsettings_id = n.id AND b.branch_id = %(branch)s))
    """  # noqa: S608 - the identifiers are the models' own table names; every value is a parameter


def notification_channels(*, event_type: str, branch_id: uuid.UUID) -> list[str]:
    """The channels on which `event_type` (a registered kind) at that branch is to be sent (empty: notify
    nobody). Raises UnknownEventKind for a kind no app registered."""
    if not event_kind_get(event_type).notifies:
        return []
    with connection.cursor() as cursor:
        cursor.execute(_channels_statement(), {"kind": event_type, "branch": branch_id})
        switches = cursor.fetchone()
    if switches is None:
        return []
    sms_enabled, email_enabled = switches
    return [channel for channel, on in ((Channel.SMS, sms_enabled), (Channel.EMAIL, email_enabled)) if on]


def mask_email(email: str) -> str:
    local, _, domain = email.partition("@")
    return f"{local[:1]}***@{domain}"


class NotificationFailed(Exception):
    """A retryable failure on one channel; the caller may try again later."""


def notification_send(*, message: Message, channel: str, attempt: int) -> str:
    """Send `message` on `channel` once and log the attempt; returns the attempt's status. Raises
    NotificationFailed when the failure may pass (gateway down), after logging it."""
    key = message.dedupe_key(channel)
    if NotificationAttempt.objects.filter(dedupe_key=key, status=NotificationAttempt.Status.SENT).exists():
        return NotificationAttempt.Status.SENT
    if PENDING.get(key) is not None:  # sent, its attempt waiting in Redis to be recorded
        return NotificationAttempt.Status.SENT
    recipient = message.phone if channel == Channel.SMS else message.email
    masked = (mask_phone if channel == Channel.SMS else mask_email)(recipient) if recipient else ""
    row = NotificationAttempt(
        created_at=timezone.now(),
        event_type=message.event_type,
        subject_id=message.subject_id,
        patient_ref=message.patient_ref,
        dedupe_key=key,
        channel=channel,
        recipient=masked,
        attempt=attempt,
    )
    if not recipient:
        row.status = NotificationAttempt.Status.SKIPPED
        row.detail = "The patient has no phone number." if channel == Channel.SMS else "The patient has no e-mail."
        row.save()
        counter_inc("clinic_notification_sends", channel, row.status)
        return row.status
    started = time.monotonic()
    retryable = False
    try:
        if channel == Channel.SMS:
            row.detail = sms_backend().send(to=recipient, message=message.text)
        else:
            send_mail(message.subject, message.text, None, [recipient])
        row.status = NotificationAttempt.Status.SENT
    except SmsError as exc:
        row.status, row.detail, retryable = NotificationAttempt.Status.FAILED, str(exc)[:500], exc.retryable
    except OSError as exc:  # SMTP and socket errors
        row.status, row.detail, retryable = (
            NotificationAttempt.Status.FAILED,
            f"{type(exc).__name__}: {exc}"[:500],
            True,
        )
    row.duration_ms = (time.monotonic() - started) * 1000
    try:
        with transaction.atomic():
            row.save()
    except IntegrityError:
        # Another worker sent the same notification in the meantime; its row is the record.
        return NotificationAttempt.Status.SENT
    except DatabaseError:
        # Only a send that went out must be kept: a failure or a skip unrecorded is simply tried again.
        if row.status != NotificationAttempt.Status.SENT or not _attempt_defer(row):
            raise
        logger.warning("%s %s for %s: sent, attempt kept in Redis (database error)", message.event_type, channel, key)
        counter_inc("clinic_notification_outcomes_deferred", channel)
        return row.status
    counter_inc("clinic_notification_sends", channel, row.status)
    if row.status == NotificationAttempt.Status.FAILED:
        logger.warning("%s %s for %s failed: %s", message.event_type, channel, message.subject_id, row.detail)
        if retryable:
            raise NotificationFailed(row.detail)
    return row.status


def _attempt_defer(row: NotificationAttempt) -> bool:
    value = {name: getattr(row, name) for name in _ROW_FIELDS}
    value.update(created_at=row.created_at.isoformat(), subject_id=str(row.subject_id))
    value["patient_ref"] = str(row.patient_ref) if row.patient_ref else None
    if not PENDING.put(row.dedupe_key, value):
        return False
    try:
        task_get(RECORD_TASK).apply_async(countdown=1)
    except Exception:  # the broker is Redis too: the notification relay drains the hash anyway
        logger.warning(
            "notification attempt %s: recording task not queued; the relay records it", row.dedupe_key, exc_info=True
        )
    return True


def pending_attempts_drain(*, raise_refused: bool = False) -> int:
    """Record the attempts Redis holds (sends PostgreSQL refused to record); returns how many were written.
    With `raise_refused`, the first DatabaseError is raised (the task retries); the rest stay in Redis."""
    written = 0
    for key in PENDING.fields():
        value = PENDING.get(key)
        if value is None:
            continue
        row = NotificationAttempt(**{**value, "created_at": datetime.fromisoformat(value["created_at"])})
        try:
            with transaction.atomic():
                row.save()
        except IntegrityError:
            pass  # recorded already (the deletion from Redis failed), or another send's row is the record
        except DatabaseError:
            if raise_refused:
                raise
            continue
        else:
            written += 1
            counter_inc("clinic_notification_sends", row.channel, row.status)
        PENDING.delete(key)
    return written
