"""The appointment events: their names, their registration, their payloads (the appointment object of
docs/api-rules.md §10) and their publication (docs/api-rules.md §8).

Every other module names an appointment event by its constant here; the wire names are the values.
"""

from __future__ import annotations

from typing import Any

from appointments.models import Appointment
from appointments.representations import Appointment as AppointmentPayload
from appointments.representations import appointment_payload
from integrations.webhooks.events import event_publish
from integrations.webhooks.registry import EventKind, PayloadPart, event_kind_register

APPOINTMENT_BOOKED = "appointment.booked"
APPOINTMENT_RESCHEDULED = "appointment.rescheduled"
APPOINTMENT_CANCELLED = "appointment.cancelled"
APPOINTMENT_CHECKED_IN = "appointment.checked_in"
APPOINTMENT_COMPLETED = "appointment.completed"
APPOINTMENT_NO_SHOW = "appointment.no_show"

_APPOINTMENT = PayloadPart("appointment", "Appointment")
_PREVIOUS = PayloadPart("previous", "Appointment", "The representation before the change.")

EVENT_KINDS = (
    EventKind(
        APPOINTMENT_BOOKED,
        label="booked",
        description="An appointment was booked.",
        payload=(_APPOINTMENT,),
        notification_label="when an appointment is booked",
    ),
    EventKind(
        APPOINTMENT_RESCHEDULED,
        label="rescheduled",
        description="An appointment moved to another slot; `previous` is the appointment before the move.",
        payload=(_APPOINTMENT, _PREVIOUS),
        notification_label="when an appointment is rescheduled",
    ),
    EventKind(
        APPOINTMENT_CANCELLED,
        label="cancelled",
        description="An appointment was cancelled.",
        payload=(_APPOINTMENT,),
        notification_label="when an appointment is cancelled",
    ),
    EventKind(
        APPOINTMENT_CHECKED_IN,
        label="checked_in",
        description="The patient checked in.",
        payload=(_APPOINTMENT,),
    ),
    EventKind(
        APPOINTMENT_COMPLETED,
        label="completed",
        description="The consultation was completed.",
        payload=(_APPOINTMENT,),
    ),
    EventKind(
        APPOINTMENT_NO_SHOW,
        label="no_show",
        description="The patient did not come.",
        payload=(_APPOINTMENT,),
    ),
)


def events_register() -> None:
    """Called by AppointmentsConfig.ready()."""
    event_kind_register(*EVENT_KINDS)


def publish(event_type: str, appointment: Appointment, previous: AppointmentPayload | None = None) -> None:
    data: dict[str, Any] = {"appointment": appointment_payload(appointment)}
    if previous is not None:
        data["previous"] = previous
    event_publish(event_type=event_type, payload=data, branch_id=appointment.branch_id)
