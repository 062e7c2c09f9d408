"""Payloads of the appointment events (the appointment object of CONTRACT section 7)."""

from __future__ import annotations

from typing import Any

from appointments.models import Appointment
from appointments.representations import Appointment as AppointmentPayload
from appointments.representations import appointment_payload
from integrations.webhooks.events import event_publish


def publish(event_type: str, appointment: Appointment, previous: AppointmentPayload | None = None) -> None:
    data: dict[str, Any] = {"appointment": appointment_payload(appointment)}
    if previous is not None:
        data["previous"] = previous
    event_publish(event_type=event_type, payload=data, branch_id=appointment.branch_id)
