"""The response shapes of the appointment API, each declared once: the TypedDict its builder returns, which
the OpenAPI document derives its component from (clinic.api.shapes.shape) and the events carry."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Annotated, TypedDict
from zoneinfo import ZoneInfo

from appointments import models
from appointments.slots import Cell
from clinic.lib.shapes import Doc, Format


class AppointmentPatient(TypedDict):
    id: Annotated[str, Format.UUID]
    name: str


class AppointmentDoctor(TypedDict):
    id: Annotated[str, Format.UUID]
    name: str
    department: str


class Appointment(TypedDict):
    """An appointment, as the API returns it and the appointment events carry it."""

    id: Annotated[str, Format.UUID]
    appointment_id: Annotated[str, Format.UUID]
    token_number: Annotated[int, Doc("Queue position, per doctor per branch-local day.")]
    status: Annotated[str, models.Appointment.Status]
    patient_id: Annotated[str, Doc("The patient's business id.")]
    patient: AppointmentPatient
    doctor: AppointmentDoctor
    branch_id: Annotated[str, Format.UUID]
    slot_start: Annotated[str, Format.DATE_TIME, Doc("With the branch's UTC offset.")]
    slot_end: Annotated[str, Format.DATE_TIME]
    visit_type: Annotated[str, models.Appointment.VisitType]
    notes: str
    created_at: Annotated[str, Format.DATE_TIME]
    updated_at: Annotated[str, Format.DATE_TIME]
    checked_in_at: Annotated[str | None, Format.DATE_TIME]
    completed_at: Annotated[str | None, Format.DATE_TIME]
    cancelled_at: Annotated[str | None, Format.DATE_TIME]
    cancellation_reason: str | None
    version: Annotated[int, Doc("Increases with every change.")]


# One free cell of GET appointments/slots (no description: the operation's says what the cells are).
class Slot(TypedDict):
    start_time: Annotated[str, Format.DATE_TIME]
    end_time: Annotated[str, Format.DATE_TIME]


def _local(value: datetime, appointment: models.Appointment) -> str:
    return value.astimezone(appointment.branch.zone).isoformat()


def _local_or_none(value: datetime | None, appointment: models.Appointment) -> str | None:
    return _local(value, appointment) if value else None


def appointment_payload(appointment: models.Appointment) -> Appointment:
    doctor = appointment.doctor
    return {
        "id": str(appointment.id),
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
        "checked_in_at": _local_or_none(appointment.checked_in_at, appointment),
        "completed_at": _local_or_none(appointment.completed_at, appointment),
        "cancelled_at": _local_or_none(appointment.cancelled_at, appointment),
        "cancellation_reason": appointment.cancellation_reason or None,
        "version": appointment.version,
    }


def slot_list(*, cells: Iterable[Cell], zone: ZoneInfo) -> list[Slot]:
    """Free cells with the branch's UTC offset."""
    return [
        {"start_time": c.start.astimezone(zone).isoformat(), "end_time": c.end.astimezone(zone).isoformat()}
        for c in cells
    ]
