"""Reads of integrations' own state for operators: the outboxes' backlog (the /metrics collector)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db.models import Count, Min

from integrations.hl7.models import Hl7Message
from integrations.notifications.models import NotificationOutboxMessage
from integrations.webhooks.models import WebhookDelivery


@dataclass(frozen=True)
class Backlog:
    messages: int
    oldest: datetime | None  # when the oldest unfinished message was written


def outbox_backlogs() -> dict[str, Backlog]:
    """{"webhook": ..., "notification": ..., "hl7": ...}: what is written but not yet delivered (or given up).
    Aggregate queries on partial indexes of the unfinished rows."""
    webhooks = WebhookDelivery.objects.filter(
        status__in=[WebhookDelivery.Status.PENDING, WebhookDelivery.Status.DELIVERING]
    ).aggregate(messages=Count("id"), oldest=Min("created_at"))
    notifications = NotificationOutboxMessage.objects.filter(finished_at__isnull=True).aggregate(
        messages=Count("id"), oldest=Min("created_at")
    )
    hl7 = Hl7Message.objects.filter(status=Hl7Message.Status.PENDING).aggregate(
        messages=Count("id"), oldest=Min("created_at")
    )
    return {
        "webhook": Backlog(webhooks["messages"], webhooks["oldest"]),
        "notification": Backlog(notifications["messages"], notifications["oldest"]),
        "hl7": Backlog(hl7["messages"], hl7["oldest"]),
    }
