"""Patient notifications (SMS and e-mail): whether to send, and sending one with its attempt logged.

The domain app decides when a notification is due and builds its text; this module knows only the event
kinds of the registry (integrations.webhooks.registry) and which of them the settings switch on. Every attempt is a NotificationAttempt row; a channel already sent for the same dedupe key
is never sent again, so a task redelivered after a worker crash does not text the patient twice.
"""

from __future__ import annotations

import logging
import time
import uuid
from dataclasses import dataclass

from django.contrib.postgres.aggregates import ArrayAgg
from django.core.mail import send_mail
from django.db import IntegrityError, transaction
from django.db.models import Value
from django.utils import timezone

from integrations.models import NotificationAttempt, NotificationSettings
from integrations.notifications.sms import SmsError, sms_backend
from integrations.webhooks.registry import event_kind_get

logger = logging.getLogger("integrations.notifications.services")

Channel = NotificationAttempt.Channel


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


def notification_channels(*, event_type: str, branch_id: uuid.UUID) -> list[str]:
    """The channels on which `event_type` (a registered kind) at that branch is to be sent (empty: notify
    nobody). Raises UnknownEventKind for a kind no app registered."""
    if not event_kind_get(event_type).notifies:
        return []
    # One statement, the branch filter aggregated into the settings row (read on every booking and result).
    config = (
        NotificationSettings.objects.filter(id=1)
        .annotate(branch_ids=ArrayAgg("branches__id", default=Value([])))
        .order_by()
        .first()
    )
    if config is None or event_type not in config.event_kinds:
        return []
    branch_ids = {branch for branch in config.branch_ids if branch is not None}
    if branch_ids and branch_id not in branch_ids:
        return []
    return [channel for channel, on in ((Channel.SMS, config.sms_enabled), (Channel.EMAIL, config.email_enabled)) if on]


def mask_phone(phone: str) -> str:
    return phone[:3] + "*" * max(len(phone) - 7, 0) + phone[-4:] if len(phone) > 7 else "*" * len(phone)


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
    if row.status == NotificationAttempt.Status.FAILED:
        logger.warning("%s %s for %s failed: %s", message.event_type, channel, message.subject_id, row.detail)
        if retryable:
            raise NotificationFailed(row.detail)
    return row.status
