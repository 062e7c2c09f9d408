"""Celery tasks of the lab app: thin, by id."""

from __future__ import annotations

from celery import shared_task
from django.conf import settings

from integrations.notifications.services import NotificationFailed, notification_channels, notification_send
from lab.events import LAB_RESULT_FINALIZED
from lab.models import LabOrder
from lab.notifications import NOTIFY_TASK, results_ready_message

RETRY_DELAY_SECONDS = 60


@shared_task(name=NOTIFY_TASK)
def lab_results_ready_notify(order_id: str, attempt: int = 1) -> dict[str, str]:
    """Tell the patient the results of the order are ready, on every enabled channel. Channels already
    sent for this order are skipped, so the task is safe to run twice; a channel that failed in a way
    that may pass is tried again a minute later, up to NOTIFICATION_MAX_ATTEMPTS in all."""
    order = LabOrder.objects.select_related("patient", "branch").filter(pk=order_id).first()
    if order is None:
        return {}
    message = results_ready_message(order)
    outcome: dict[str, str] = {}
    retry = False
    for channel in notification_channels(event_type=LAB_RESULT_FINALIZED, branch_id=order.branch_id):
        try:
            outcome[channel] = notification_send(message=message, channel=channel, attempt=attempt)
        except NotificationFailed:
            outcome[channel], retry = "failed", True
    if retry and attempt < settings.NOTIFICATION_MAX_ATTEMPTS:
        # A new message rather than Celery's retry(), as appointments.tasks does: the attempt number
        # travels with it, and it behaves the same when tasks run in-process (no broker).
        lab_results_ready_notify.apply_async((order_id,), {"attempt": attempt + 1}, countdown=RETRY_DELAY_SECONDS)
    return outcome
