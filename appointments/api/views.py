"""The appointment endpoints: slots, booking, list, detail, reschedule, cancel and the status changes.

Views parse, call one selector or service and answer with the appointment object of CONTRACT section 7
(appointment_payload, the same builder the events use).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

from drf_spectacular.utils import OpenApiExample, OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from appointments import services
from appointments.api import schema
from appointments.api.serializers import (
    AppointmentListParams,
    BookingSerializer,
    CancelParams,
    EmptyBody,
    RescheduleSerializer,
    SlotParams,
)
from appointments.events import appointment_payload
from appointments.models import Appointment
from appointments.selectors import appointment_get, appointment_list, doctor_branch_resolve
from appointments.slots import free_cells
from clinic.api.pagination import HeaderPagination, PageParams
from clinic.api.schema import location_header, pagination_parameters
from clinic.api.views import ClinicAPIView
from clinic.errors import FieldError, NotFound
from clinic.selectors import doctor_get
from patients.models import Patient
from patients.selectors import patient_get

_ID = OpenApiParameter("id", str, OpenApiParameter.PATH, description="Appointment UUID (appointment_id).")
_NOT_FOUND = OpenApiResponse(
    description="`not_found`: unknown id, or an appointment at a branch the client may not see."
)
_INVALID_STATE = OpenApiResponse(
    description="`invalid_state`: not allowed from the current status (see current_status)."
)


class AppointmentView(ClinicAPIView):
    @property
    def actor(self) -> str:
        """Who made a change, for the appointment's history."""
        return f"api:{self.api_client.name}"

    def respond(self, appointment: Appointment, status: int = 200, **kwargs: object) -> Response:
        self.audit_patients([appointment.patient_id])
        return Response(appointment_payload(appointment), status=status, **kwargs)  # type: ignore[arg-type]


class SlotListView(ClinicAPIView):
    required_scopes = {"GET": "appointments:read"}
    query_params = {"GET": (SlotParams,)}

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
            OpenApiParameter(
                "X-Total-Count",
                int,
                location=OpenApiParameter.HEADER,
                response=[200],
                required=True,
                description="Number of free slots returned.",
            )
        ],
        responses={200: schema.SlotSchema, 404: OpenApiResponse(description="`not_found`: no such doctor.")},
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


class AppointmentListCreateView(AppointmentView):
    required_scopes = {"GET": "appointments:read", "POST": "appointments:write"}
    query_params = {"GET": (PageParams, AppointmentListParams)}

    @extend_schema(
        operation_id="appointments_list",
        summary="List appointments",
        description=(
            "Appointments at the branches the client may see, in slot order (then id). `date`, `date_from` and "
            "`date_to` are the branch-local day of the slot. A `patient_id`, `doctor_id` or `branch_id` that does "
            "not exist (or is not visible to the client) is a 400 naming it. Scope: `appointments:read`."
        ),
        parameters=pagination_parameters(),
        responses={200: OpenApiResponse(schema.AppointmentSchema(many=True), description="A bare JSON array.")},
        examples=[OpenApiExample("Appointments", response_only=True, value=[schema.APPOINTMENT])],
    )
    def get(self, request: Request) -> Response:
        params = AppointmentListParams(data=request.query_params, context={"client": self.api_client})
        pagination = HeaderPagination(request, params)
        filters = pagination.filters
        patient = filters.pop("patient_id", None)
        if patient is not None:
            self.audit_patients([patient.id])
        page = pagination.paginate(
            appointment_list(client=self.api_client, patient=patient, day=filters.pop("date", None), **filters)
        )
        self.audit_patients(appointment.patient_id for appointment in page)
        return pagination.response([appointment_payload(appointment) for appointment in page])

    @extend_schema(
        operation_id="appointments_create",
        summary="Book an appointment",
        description=(
            "Accepted exactly when `[slot_start, slot_end)` is one of the free cells GET slots returns for that "
            "doctor, branch, date and duration; datetimes need a UTC offset. The token number is the next of "
            "that doctor's local day. 409 `slot_unavailable` otherwise, or when the patient already has an "
            "overlapping active appointment. `visit_type` defaults to `consultation`. Notifies the patient when "
            "notifications are enabled. Honours `Idempotency-Key`. Scope: `appointments:write`."
        ),
        request=BookingSerializer,
        parameters=[location_header("/api/v1/appointments/{id}")],
        responses={201: schema.AppointmentSchema, 409: OpenApiResponse(description="`slot_unavailable`.")},
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
            schema.BOOKED,
        ],
    )
    def post(self, request: Request) -> Response:
        body = BookingSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        client = self.api_client
        patient = _patient_param(self, data["patient_id"])
        try:
            doctor = doctor_get(client=client, doctor_id=str(data["doctor_id"]))
        except NotFound:
            raise FieldError({"doctor_id": "No such doctor available to this client."}) from None
        branch = doctor_branch_resolve(client=client, doctor=doctor, branch_id=data.get("branch_id"))
        appointment = services.appointment_book(
            patient=patient,  # type: ignore[arg-type]
            doctor=doctor,
            branch=branch,
            slot_start=data["slot_start"],
            slot_end=data["slot_end"],
            visit_type=data["visit_type"],
            notes=data["notes"],
            actor=self.actor,
        )
        return self.respond(appointment, 201, headers={"Location": f"/api/v1/appointments/{appointment.id}"})


def _patient_param(view: ClinicAPIView, ref: str | None) -> Patient | None:
    """A patient named in a body or query: unknown or not visible is a 400 on patient_id, not a 404."""
    if ref is None:
        return None
    try:
        patient = patient_get(client=view.api_client, ref=ref)
    except NotFound:
        raise FieldError({"patient_id": "No such patient available to this client."}) from None
    view.audit_patients([patient.id])
    return patient


class AppointmentDetailView(AppointmentView):
    required_scopes = {"GET": "appointments:read", "DELETE": "appointments:write"}
    query_params = {"DELETE": (CancelParams,)}

    @extend_schema(
        operation_id="appointments_retrieve",
        summary="Get an appointment",
        description="Scope: `appointments:read`.",
        parameters=[_ID],
        responses={200: schema.AppointmentSchema, 404: _NOT_FOUND},
        examples=[schema.BOOKED, schema.COMPLETED],
    )
    def get(self, request: Request, id: str) -> Response:
        return self.respond(appointment_get(client=self.api_client, appointment_id=id))

    @extend_schema(
        operation_id="appointments_cancel",
        summary="Cancel an appointment",
        description=(
            "Cancels a `booked` appointment; `reason` is required. From the branch's cancellation window before "
            "`slot_start` on (and once it has started), the API refuses with 409 `cancellation_window` and "
            "`cancellable_until`; staff can still cancel in the admin. The token number stays with the "
            "cancelled appointment and is not reused; the slot becomes free. Notifies the patient when "
            "notifications are enabled. Scope: `appointments:write`."
        ),
        parameters=[_ID],
        responses={
            200: schema.AppointmentSchema,
            404: _NOT_FOUND,
            409: OpenApiResponse(description="`invalid_state` (not booked) or `cancellation_window`."),
        },
        examples=[schema.CANCELLED, schema.INVALID_STATE],
    )
    def delete(self, request: Request, id: str) -> Response:
        appointment = appointment_get(client=self.api_client, appointment_id=id)  # 404 before 400
        params = CancelParams(data=request.query_params)
        params.is_valid(raise_exception=True)
        return self.respond(
            services.appointment_cancel(
                appointment=appointment, reason=params.validated_data["reason"], actor=self.actor
            )
        )


class AppointmentRescheduleView(AppointmentView):
    required_scopes = {"PATCH": "appointments:write"}
    partial_patch = False  # the new slot is required: a move, not a partial update

    @extend_schema(
        operation_id="appointments_reschedule",
        summary="Reschedule an appointment",
        description=(
            "Moves a `booked` appointment to another free cell of the same doctor at the same branch (the rule "
            "of booking: one of the cells GET slots returns; the appointment's own time does not count as "
            "taken). Within the same local day the token number is kept; on another day the appointment takes "
            "that day's next number. `reason` is kept in the appointment's history. The "
            "`appointment.rescheduled` event carries the previous appointment. Honours `Idempotency-Key`. "
            "Scope: `appointments:write`."
        ),
        parameters=[_ID],
        request=RescheduleSerializer,
        responses={
            200: schema.AppointmentSchema,
            404: _NOT_FOUND,
            409: OpenApiResponse(
                description="`slot_unavailable`, `invalid_state` (not booked) or `cancellation_window` (the "
                "current slot starts within the branch's cancellation window; with `cancellable_until`)."
            ),
        },
        examples=[
            OpenApiExample(
                "Reschedule",
                request_only=True,
                value={
                    "new_slot_start": "2026-11-23T11:00:00+05:30",
                    "new_slot_end": "2026-11-23T11:15:00+05:30",
                    "reason": "Patient asked for a later time",
                },
            ),
            schema.RESCHEDULED,
            schema.INVALID_STATE,
        ],
    )
    def patch(self, request: Request, id: str) -> Response:
        body = RescheduleSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        appointment = appointment_get(client=self.api_client, appointment_id=id)
        return self.respond(
            services.appointment_reschedule(
                appointment=appointment,
                slot_start=body.validated_data["new_slot_start"],
                slot_end=body.validated_data["new_slot_end"],
                reason=body.validated_data["reason"],
                actor=self.actor,
            )
        )


class _TransitionView(AppointmentView):
    """POST …/{id}/<action>: no body, 200 with the appointment, 409 invalid_state from any other status."""

    required_scopes = {"POST": "appointments:write"}
    service: Callable[..., Appointment]

    def post(self, request: Request, id: str) -> Response:
        EmptyBody(data=request.data or {}).is_valid(raise_exception=True)
        appointment = appointment_get(client=self.api_client, appointment_id=id)
        return self.respond(type(self).service(appointment=appointment, actor=self.actor))


def _transition_schema(operation: str, summary: str, description: str, example: OpenApiExample):
    return extend_schema(
        operation_id=f"appointments_{operation}",
        summary=summary,
        description=f"{description} Takes no body. Scope: `appointments:write`.",
        parameters=[_ID],
        request=None,
        responses={200: schema.AppointmentSchema, 404: _NOT_FOUND, 409: _INVALID_STATE},
        examples=[example, schema.INVALID_STATE],
    )


class AppointmentCheckInView(_TransitionView):
    service = staticmethod(services.appointment_check_in)

    @_transition_schema(
        "check_in",
        "Check a patient in",
        "`booked` -> `checked_in`; sets `checked_in_at` and publishes `appointment.checked_in`. Only on the "
        "appointment's local day at its branch (any time that day): otherwise 409 `outside_allowed_time` with "
        "`allowed_from` and `allowed_until` (that day's start and the next day's start, exclusive).",
        schema.CHECKED_IN,
    )
    def post(self, request: Request, id: str) -> Response:
        return super().post(request, id)


class AppointmentCompleteView(_TransitionView):
    service = staticmethod(services.appointment_complete)

    @_transition_schema(
        "complete",
        "Complete an appointment",
        "`checked_in` -> `completed`; sets `completed_at`, adds an outpatient visit to the patient's history "
        "(shown in the patient profile) and publishes `appointment.completed`.",
        schema.COMPLETED,
    )
    def post(self, request: Request, id: str) -> Response:
        return super().post(request, id)


class AppointmentNoShowView(_TransitionView):
    service = staticmethod(services.appointment_no_show)

    @_transition_schema(
        "no_show",
        "Mark a no-show",
        "`booked` -> `no_show`; frees the slot, keeps the token number and publishes `appointment.no_show`. Only "
        "once the appointment has started: before `slot_start`, 409 `outside_allowed_time` with `allowed_from`.",
        schema.NO_SHOW,
    )
    def post(self, request: Request, id: str) -> Response:
        return super().post(request, id)
