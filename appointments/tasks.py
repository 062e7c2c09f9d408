"""Celery tasks of the appointments app: thin, by id."""

from __future__ import annotations

from celery import shared_task
from django.conf import settings

from appointments.models import Appointment
from appointments.notifications import message_build
from integrations.notifications import NotificationFailed, notification_channels, notification_send

RETRY_DELAY_SECONDS = 60


@shared_task(bind=True, max_retries=None)
def appointment_notify(self, appointment_id: str, event_type: str, version: int) -> dict[str, str]:
    """Send the patient the notification of `event_type` on every enabled channel. Channels already sent
    for this appointment version are skipped, so the task is safe to run twice."""
    appointment = Appointment.objects.select_related("patient", "doctor", "branch").filter(pk=appointment_id).first()
    if appointment is None:
        return {}
    message = message_build(event_type, appointment, version=version)
    attempt = self.request.retries + 1
    outcome: dict[str, str] = {}
    retry = False
    for channel in notification_channels(event_type=event_type, branch_id=appointment.branch_id):
        try:
            outcome[channel] = notification_send(message=message, channel=channel, attempt=attempt)
        except NotificationFailed:
            outcome[channel], retry = "failed", True
    if retry and attempt < settings.NOTIFICATION_MAX_ATTEMPTS:
        raise self.retry(countdown=RETRY_DELAY_SECONDS)
    return outcome
