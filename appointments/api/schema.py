"""OpenAPI examples of the appointment operations (the shapes are appointments.representations)."""

from __future__ import annotations

from copy import deepcopy
from typing import Any

from drf_spectacular.utils import OpenApiExample

from appointments.representations import Appointment

SLOTS = OpenApiExample(
    "Morning slots",
    response_only=True,
    value=[
        {"start_time": "2026-11-23T09:00:00+05:30", "end_time": "2026-11-23T09:15:00+05:30"},
        {"start_time": "2026-11-23T09:15:00+05:30", "end_time": "2026-11-23T09:30:00+05:30"},
    ],
)
BOOKING = OpenApiExample(
    "Booking",
    request_only=True,
    value={
        "patient_id": "PAT-000123",
        "doctor_id": "7599fc20-8d9b-4406-96d0-16a9a77dff32",
        "branch_id": "58d9b34e-ba12-4ecf-ae69-0f0b0bf7a591",
        "slot_start": "2026-11-23T09:15:00+05:30",
        "slot_end": "2026-11-23T09:30:00+05:30",
        "visit_type": "consultation",
        "notes": "Fever for three days",
    },
)
RESCHEDULE = OpenApiExample(
    "Reschedule",
    request_only=True,
    value={
        "new_slot_start": "2026-11-23T11:00:00+05:30",
        "new_slot_end": "2026-11-23T11:15:00+05:30",
        "reason": "Patient asked for a later time",
    },
)

# Typed as the shape, so mypy holds the examples to it.
APPOINTMENT: Appointment = {
    "id": "5b8f5a8e-3c2d-4d7e-9a0b-1c2d3e4f5a6b",
    "appointment_id": "5b8f5a8e-3c2d-4d7e-9a0b-1c2d3e4f5a6b",
    "token_number": 7,
    "status": "booked",
    "patient_id": "PAT-000123",
    "patient": {"id": "3f1c9b0e-8f4a-4c55-9a36-1f3c6d2e7b10", "name": "Priya Sharma"},
    "doctor": {
        "id": "7599fc20-8d9b-4406-96d0-16a9a77dff32",
        "name": "Dr. Ananya Rao",
        "department": "General Medicine",
    },
    "branch_id": "58d9b34e-ba12-4ecf-ae69-0f0b0bf7a591",
    "slot_start": "2026-11-23T09:15:00+05:30",
    "slot_end": "2026-11-23T09:30:00+05:30",
    "visit_type": "consultation",
    "notes": "",
    "created_at": "2026-11-21T18:02:11+05:30",
    "updated_at": "2026-11-21T18:02:11+05:30",
    "checked_in_at": None,
    "completed_at": None,
    "cancelled_at": None,
    "cancellation_reason": None,
    "version": 1,
}


def appointment_example(name: str, status_code: str = "200", **changes: Any) -> OpenApiExample:
    value: dict[str, Any] = {**deepcopy(APPOINTMENT), **changes}
    return OpenApiExample(name, response_only=True, status_codes=[status_code], value=value)


APPOINTMENTS = OpenApiExample("Appointments", response_only=True, value=[APPOINTMENT])
BOOKED = appointment_example("Booked", "201")
RESCHEDULED = appointment_example(
    "Rescheduled",
    slot_start="2026-11-23T11:00:00+05:30",
    slot_end="2026-11-23T11:15:00+05:30",
    updated_at="2026-11-22T10:00:00+05:30",
    version=2,
)
CANCELLED = appointment_example(
    "Cancelled",
    status="cancelled",
    cancelled_at="2026-11-22T10:00:00+05:30",
    updated_at="2026-11-22T10:00:00+05:30",
    cancellation_reason="Patient travelling",
    version=2,
)
CHECKED_IN = appointment_example(
    "Checked in",
    status="checked_in",
    checked_in_at="2026-11-23T09:05:40+05:30",
    updated_at="2026-11-23T09:05:40+05:30",
    version=2,
)
COMPLETED = appointment_example(
    "Completed",
    status="completed",
    checked_in_at="2026-11-23T09:05:40+05:30",
    completed_at="2026-11-23T09:31:02+05:30",
    updated_at="2026-11-23T09:31:02+05:30",
    version=3,
)
NO_SHOW = appointment_example("No-show", status="no_show", updated_at="2026-11-23T10:00:00+05:30", version=2)

INVALID_STATE = OpenApiExample(
    "Invalid state",
    response_only=True,
    status_codes=["409"],
    value={
        "type": "/api/v1/problems/invalid_state",
        "title": "Invalid state",
        "status": 409,
        "detail": "Cannot check in an appointment that is cancelled; it must be booked.",
        "code": "invalid_state",
        "current_status": "cancelled",
        "request_id": "6f1d2c3b4a5e",
    },
)

SLOT_UNAVAILABLE = OpenApiExample(
    "Slot unavailable",
    response_only=True,
    status_codes=["409"],
    value={
        "type": "/api/v1/problems/slot_unavailable",
        "title": "Slot unavailable",
        "status": 409,
        "detail": "That slot was just booked by another request.",
        "code": "slot_unavailable",
        "request_id": "6f1d2c3b4a5e",
    },
)

CANCELLATION_WINDOW = OpenApiExample(
    "Inside the cancellation window",
    response_only=True,
    status_codes=["409"],
    value={
        "type": "/api/v1/problems/cancellation_window",
        "title": "Inside the cancellation window",
        "status": 409,
        "detail": "Appointments at this branch can be cancelled through the API only until 120 minutes before "
        "they start; ask the clinic's staff.",
        "code": "cancellation_window",
        "request_id": "6f1d2c3b4a5e",
        "cancellable_until": "2026-11-23T07:00:00+05:30",
    },
)
