"""GET /api/v1/appointments/slots, POST /api/v1/appointments, GET /api/v1/appointments/{id}.

Rescheduling, cancelling, check-in, completion, no-show and the appointment list come in the next slice.
"""

from __future__ import annotations

from datetime import timedelta

from drf_spectacular.utils import OpenApiExample, OpenApiParameter, OpenApiResponse, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from appointments import services
from appointments.events import appointment_payload
from appointments.models import Appointment
from appointments.selectors import appointment_get, doctor_branch_resolve
from appointments.slots import free_cells
from clinic.api.errors import register_problem
from clinic.api.serializers import OffsetDateTimeField, StrictSerializer
from clinic.api.views import ClinicAPIView
from clinic.errors import FieldError, NotFound
from clinic.selectors import doctor_get
from patients.selectors import patient_get

register_problem(
    "slot_unavailable",
    409,
    "Slot unavailable",
    "The interval is not a free slot of the doctor, or the patient already has an appointment then.",
)


class SlotParams(serializers.Serializer):
    doctor_id = serializers.UUIDField()
    date = serializers.DateField()
    branch_id = serializers.UUIDField(required=False)
    duration = serializers.IntegerField(required=False, min_value=5, max_value=240)


SlotSchema = inline_serializer(
    "Slot", {"start_time": serializers.DateTimeField(), "end_time": serializers.DateTimeField()}, many=True
)


class SlotListView(ClinicAPIView):
    required_scopes = {"GET": "appointments:read"}

    @extend_schema(
        operation_id="appointments_slots",
        summary="Free slots of a doctor on a day",
        description=(
            "The doctor's sessions at the branch on that local date (the branch's time zone), minus leave and "
            "holidays, cut into cells of `duration` minutes from each session's start, minus cells overlapping "
            "an active appointment and cells already started. A booking is accepted exactly for one of these "
            "cells. `branch_id` is required when the doctor consults at more than one branch visible to the "
            "client. The whole day is returned (not paginated). Scope: `appointments:read`."
        ),
        parameters=[
            OpenApiParameter("doctor_id", str, required=True, description="Doctor UUID (404 if unknown)."),
            OpenApiParameter("date", str, required=True, description="Local date, YYYY-MM-DD."),
            OpenApiParameter("branch_id", str, description="Branch UUID; required for doctors at several branches."),
            OpenApiParameter("duration", int, description="Cell length in minutes, 5..240 (default: the doctor's)."),
        ],
        responses={200: SlotSchema},
        examples=[
            OpenApiExample(
                "Morning slots",
                response_only=True,
                value=[
                    {"start_time": "2026-11-23T09:00:00+05:30", "end_time": "2026-11-23T09:15:00+05:30"},
                    {"start_time": "2026-11-23T09:15:00+05:30", "end_time": "2026-11-23T09:30:00+05:30"},
                ],
            )
        ],
    )
    def get(self, request: Request) -> Response:
        params = SlotParams(data=request.query_params)
        params.is_valid(raise_exception=True)
        doctor = doctor_get(client=self.api_client, doctor_id=str(params.validated_data["doctor_id"]))
        branch = doctor_branch_resolve(
            client=self.api_client, doctor=doctor, branch_id=params.validated_data.get("branch_id")
        )
        minutes = params.validated_data.get("duration") or doctor.default_slot_minutes
        cells = free_cells(
            doctor=doctor, branch=branch, day=params.validated_data["date"], duration=timedelta(minutes=minutes)
        )
        zone = branch.zone
        slots = [
            {"start_time": c.start.astimezone(zone).isoformat(), "end_time": c.end.astimezone(zone).isoformat()}
            for c in cells
        ]
        return Response(slots, headers={"X-Total-Count": str(len(slots))})


class BookingSerializer(StrictSerializer):
    patient_id = serializers.CharField(max_length=64, help_text="Patient UUID or patient_id (PAT-000123).")
    doctor_id = serializers.UUIDField()
    branch_id = serializers.UUIDField(required=False, help_text="Required for doctors at several branches.")
    slot_start = OffsetDateTimeField()
    slot_end = OffsetDateTimeField()
    visit_type = serializers.ChoiceField(
        choices=Appointment.VisitType.choices, default=Appointment.VisitType.CONSULTATION
    )
    notes = serializers.CharField(required=False, allow_blank=True, max_length=2000, default="")


_APPOINTMENT_EXAMPLE = {
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


class AppointmentSchema(serializers.Serializer):
    """The appointment object of the responses and events (appointment_payload builds it)."""

    appointment_id = serializers.UUIDField()
    token_number = serializers.IntegerField()
    status = serializers.ChoiceField(choices=Appointment.Status.choices)
    patient_id = serializers.CharField()
    patient = inline_serializer("AppointmentPatient", {"id": serializers.UUIDField(), "name": serializers.CharField()})
    doctor = inline_serializer(
        "AppointmentDoctor",
        {"id": serializers.UUIDField(), "name": serializers.CharField(), "department": serializers.CharField()},
    )
    branch_id = serializers.UUIDField()
    slot_start = serializers.DateTimeField()
    slot_end = serializers.DateTimeField()
    visit_type = serializers.ChoiceField(choices=Appointment.VisitType.choices)
    notes = serializers.CharField()
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()
    checked_in_at = serializers.DateTimeField(allow_null=True)
    completed_at = serializers.DateTimeField(allow_null=True)
    cancelled_at = serializers.DateTimeField(allow_null=True)
    cancellation_reason = serializers.CharField(allow_null=True)
    version = serializers.IntegerField()


class AppointmentCreateView(ClinicAPIView):
    required_scopes = {"POST": "appointments:write"}

    @extend_schema(
        operation_id="appointments_create",
        summary="Book an appointment",
        description=(
            "Accepted exactly when `[slot_start, slot_end)` is one of the free cells GET slots returns for that "
            "doctor, branch, date and duration; datetimes need a UTC offset. The token number is the next of "
            "that doctor's local day. 409 `slot_unavailable` otherwise, or when the patient already has an "
            "overlapping active appointment. Honours `Idempotency-Key`. Scope: `appointments:write`."
        ),
        request=BookingSerializer,
        responses={201: AppointmentSchema, 409: OpenApiResponse(description="`slot_unavailable`.")},
        examples=[
            OpenApiExample(
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
            ),
            OpenApiExample("Booked", response_only=True, status_codes=["201"], value=_APPOINTMENT_EXAMPLE),
        ],
    )
    def post(self, request: Request) -> Response:
        body = BookingSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        client = self.api_client
        try:
            patient = patient_get(client=client, ref=data["patient_id"])
        except NotFound:
            raise FieldError({"patient_id": "No such patient available to this client."}) from None
        try:
            doctor = doctor_get(client=client, doctor_id=str(data["doctor_id"]))
        except NotFound:
            raise FieldError({"doctor_id": "No such doctor available to this client."}) from None
        branch = doctor_branch_resolve(client=client, doctor=doctor, branch_id=data.get("branch_id"))
        self.audit_patients([patient.id])
        appointment = services.appointment_book(
            patient=patient,
            doctor=doctor,
            branch=branch,
            slot_start=data["slot_start"],
            slot_end=data["slot_end"],
            visit_type=data["visit_type"],
            notes=data["notes"],
        )
        return Response(
            appointment_payload(appointment),
            status=201,
            headers={"Location": f"/api/v1/appointments/{appointment.id}"},
        )


class AppointmentDetailView(ClinicAPIView):
    required_scopes = {"GET": "appointments:read"}

    @extend_schema(
        operation_id="appointments_retrieve",
        summary="Get an appointment",
        description="Scope: `appointments:read`. 404 for an unknown id or an appointment at another branch.",
        parameters=[OpenApiParameter("id", str, OpenApiParameter.PATH, description="Appointment UUID.")],
        responses={200: AppointmentSchema},
        examples=[OpenApiExample("Appointment", response_only=True, value=_APPOINTMENT_EXAMPLE)],
    )
    def get(self, request: Request, id: str) -> Response:
        appointment = appointment_get(client=self.api_client, appointment_id=id)
        self.audit_patients([appointment.patient_id])
        return Response(appointment_payload(appointment))
