"""Payloads of the appointment events (the appointment object of CONTRACT section 7)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from appointments.models import Appointment
from integrations.webhooks.events import event_publish


def _local(value: datetime | None, appointment: Appointment) -> str | None:
    return value.astimezone(appointment.branch.zone).isoformat() if value else None


def appointment_payload(appointment: Appointment) -> dict[str, Any]:
    doctor = appointment.doctor
    return {
        "appointment_id": str(appointment.id),
        "token_number": appointment.token_number,
        "status": appointment.status,
        "patient_id": appointment.patient.patient_id,
        "patient": {"id": str(appointment.patient_id), "name": appointment.patient.name},
        "doctor": {"id": str(doctor.id), "name": doctor.name, "department": doctor.department.name},
        "branch_id": str(appointment.branch_id),
        "slot_start": _local(appointment.slot_start, appointment),
        "slot_end": _local(appointment.slot_end, appointment),
        "visit_type": appointment.visit_type,
        "notes": appointment.notes,
        "created_at": _local(appointment.created_at, appointment),
        "updated_at": _local(appointment.updated_at, appointment),
        "checked_in_at": _local(appointment.checked_in_at, appointment),
        "completed_at": _local(appointment.completed_at, appointment),
        "cancelled_at": _local(appointment.cancelled_at, appointment),
        "cancellation_reason": appointment.cancellation_reason or None,
        "version": appointment.version,
    }


def publish(event_type: str, appointment: Appointment, previous: dict[str, Any] | None = None) -> None:
    data: dict[str, Any] = {"appointment": appointment_payload(appointment)}
    if previous is not None:
        data["previous"] = previous
    event_publish(event_type=event_type, payload=data, branch_id=appointment.branch_id)
