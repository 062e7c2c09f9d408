"""Patient notifications for appointments: when one is due (booking, reschedule, cancellation, if the
admin enabled them) and its text. Sending happens in a Celery task after commit; integrations sends
and logs each attempt."""

from __future__ import annotations

import logging

from appointments.events import APPOINTMENT_BOOKED, APPOINTMENT_CANCELLED, APPOINTMENT_RESCHEDULED
from appointments.models import Appointment
from integrations.notifications.outbox import notification_outbox_add
from integrations.notifications.services import Message, notification_channels

logger = logging.getLogger("appointments.notifications")

# The task is named, not imported: appointments.tasks imports this module to build the message.
NOTIFY_TASK = "appointments.tasks.appointment_notify"

_SUBJECTS = {
    APPOINTMENT_BOOKED: "Appointment confirmed",
    APPOINTMENT_RESCHEDULED: "Appointment rescheduled",
    APPOINTMENT_CANCELLED: "Appointment cancelled",
}


def schedule(event_type: str, appointment: Appointment) -> None:
    """Queue the notification of `event_type` in the outbox, in the current transaction: sent after commit
    (nothing for a change that rolls back), and still sent if the broker is down at commit or the worker
    dies (integrations.notifications.outbox)."""
    if not notification_channels(event_type=event_type, branch_id=appointment.branch_id):
        return
    notification_outbox_add(task=NOTIFY_TASK, args=[str(appointment.pk), event_type, appointment.version])


def message_build(event_type: str, appointment: Appointment, *, version: int) -> Message:
    """The text of the notification; `version` is the appointment's version when it was queued (the
    dedupe key), since the appointment may have changed again before the task runs."""
    patient, doctor, branch = appointment.patient, appointment.doctor, appointment.branch
    when = appointment.slot_start.astimezone(branch.zone).strftime("%a %d %b %Y, %I:%M %p")
    at = f"with {doctor.name} at {branch.name} on {when}"
    if event_type == APPOINTMENT_CANCELLED:
        text = f"Your appointment {at} (token {appointment.token_number}) has been cancelled."
    elif event_type == APPOINTMENT_RESCHEDULED:
        text = f"Your appointment has been moved: it is now {at}, token {appointment.token_number}."
    else:
        text = f"Your appointment {at} is confirmed. Your token number is {appointment.token_number}."
    return Message(
        event_type=event_type,
        subject_id=appointment.pk,
        patient_ref=patient.pk,
        version=version,
        phone=patient.phone,
        email=patient.email,
        subject=f"{_SUBJECTS[event_type]}: {when}",
        text=f"Dear {patient.first_name}, {text[0].lower()}{text[1:]}",
    )
