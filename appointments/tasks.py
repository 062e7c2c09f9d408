"""Celery tasks of the appointments app: thin, by id."""

from __future__ import annotations

from celery import shared_task
from django.conf import settings

from appointments.models import Appointment
from appointments.notifications import NOTIFY_TASK, message_build
from integrations.notifications.services import NotificationFailed, notification_channels, notification_send

RETRY_DELAY_SECONDS = 60


@shared_task(name=NOTIFY_TASK)
def appointment_notify(appointment_id: str, event_type: str, version: int, attempt: int = 1) -> dict[str, str]:
    """Send the patient the notification of `event_type` on every enabled channel. Channels already sent
    for this appointment version are skipped, so the task is safe to run twice; a channel that failed
    in a way that may pass is tried again a minute later, up to NOTIFICATION_MAX_ATTEMPTS in all."""
    appointment = Appointment.objects.select_related("patient", "doctor", "branch").filter(pk=appointment_id).first()
    if appointment is None:
        return {}
    message = message_build(event_type, appointment, version=version)
    outcome: dict[str, str] = {}
    retry = False
    for channel in notification_channels(event_type=event_type, branch_id=appointment.branch_id):
        try:
            outcome[channel] = notification_send(message=message, channel=channel, attempt=attempt)
        except NotificationFailed:
            outcome[channel], retry = "failed", True
    if retry and attempt < settings.NOTIFICATION_MAX_ATTEMPTS:
        # A new message rather than Celery's retry(): the attempt number travels with it, and it behaves
        # the same when tasks run in-process (no broker).
        appointment_notify.apply_async(
            (appointment_id, event_type, version), {"attempt": attempt + 1}, countdown=RETRY_DELAY_SECONDS
        )
    return outcome
