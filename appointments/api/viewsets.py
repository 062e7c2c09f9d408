"""The appointment resource: slots, booking, list, detail, cancel, reschedule and the status changes.

Handlers parse, call one selector or service and answer with the appointment object of docs/api-rules.md §10
(appointments.representations.appointment_payload, the same builder the events use).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

from drf_spectacular.utils import OpenApiExample, OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from appointments import representations, services
from appointments.api import schema
from appointments.api.serializers import (
    AppointmentListParams,
    BookingSerializer,
    CancelParams,
    EmptyBody,
    RescheduleSerializer,
    SlotParams,
)
from appointments.models import Appointment
from appointments.representations import appointment_payload, slot_list
from appointments.selectors import appointment_get, appointment_list, doctor_branch_resolve
from appointments.slots import free_cells
from clinic.api.pagination import HeaderPagination, PageParams
from clinic.api.schema import location_header, pagination_parameters
from clinic.api.shapes import shape
from clinic.api.viewsets import ClinicViewSet, created
from clinic.errors import FieldError, NotFound
from clinic.selectors import doctor_get
from patients.models import Patient
from patients.selectors import patient_get

_READ, _WRITE = "appointments:read", "appointments:write"
_ID = OpenApiParameter("id", str, OpenApiParameter.PATH, description="Appointment UUID (appointment_id).")
_APPOINTMENT = shape(representations.Appointment)
_NOT_FOUND = OpenApiResponse(
    description="`not_found`: unknown id, or an appointment at a branch the client may not see."
)
_INVALID_STATE = OpenApiResponse(
    description="`invalid_state`: not allowed from the current status (see current_status)."
)
_SLOT_COUNT = OpenApiParameter(
    "X-Total-Count",
    int,
    location=OpenApiParameter.HEADER,
    response=[200],
    required=True,
    description="Number of free slots returned.",
)
# The OPTIONS answers name each route as the per-route views this ViewSet replaced did (by its GET action).
_ROUTE_NAMES = {"list": "Appointment List Create", "slots": "Slot List", "retrieve": "Appointment Detail"}


def _transition(operation: str, summary: str, example: OpenApiExample) -> Callable[[Any], Any]:
    """The schema of POST …/{id}/<action>: no body, 200 with the appointment, 409 from any other status."""
    return extend_schema(
        operation_id=f"appointments_{operation}",
        summary=summary,
        parameters=[_ID],
        request=None,
        responses={200: _APPOINTMENT, 404: _NOT_FOUND, 409: _INVALID_STATE},
        examples=[example, schema.INVALID_STATE],
    )


class AppointmentViewSet(ClinicViewSet):
    patient_data = True
    partial_patch = False  # PATCH is reschedule: the new slot is required, a move and not a partial update
    required_scopes = {
        "list": _READ,
        "slots": _READ,
        "retrieve": _READ,
        "create": _WRITE,
        "destroy": _WRITE,
        "reschedule": _WRITE,
        "check_in": _WRITE,
        "complete": _WRITE,
        "no_show": _WRITE,
    }
    query_params = {"list": (PageParams, AppointmentListParams), "slots": (SlotParams,), "destroy": (CancelParams,)}

    @extend_schema(
        operation_id="appointments_list",
        summary="List appointments",
        parameters=pagination_parameters(),
        responses={
            200: OpenApiResponse(shape(representations.Appointment, many=True), description="A bare JSON array.")
        },
        examples=[schema.APPOINTMENTS],
    )
    def list(self, request: Request) -> Response:
        """Appointments at the branches the client may see, in slot order (then id). `date`, `date_from` and
        `date_to` are the branch-local day of the slot. A `patient_id`, `doctor_id` or `branch_id` naming nothing
        the client may see (at another branch or nowhere) answers an empty list; an empty or malformed one is
        a 400 naming it. Scope: `appointments:read`."""
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
        operation_id="appointments_slots",
        summary="Free slots of a doctor on a day",
        parameters=[_SLOT_COUNT],
        responses={
            200: shape(representations.Slot, many=True),
            404: OpenApiResponse(description="`not_found`: no such doctor."),
        },
        examples=[schema.SLOTS],
    )
    @action(detail=False, methods=["get"], url_path="slots")
    def slots(self, request: Request) -> Response:
        """The doctor's sessions at the branch on that local date (the branch's time zone), minus leave and
        holidays, cut into cells of `duration` minutes from each session's start, minus cells overlapping an
        active appointment and cells already started. A booking is accepted exactly for one of these cells.
        `branch_id` is required when the doctor consults at more than one branch visible to the client. The
        whole day is returned (not paginated). Scope: `appointments:read`."""
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
        slots = slot_list(cells=cells, zone=branch.zone)
        self.audit_patients([])  # free cells name no patient
        return Response(slots, headers={"X-Total-Count": str(len(slots))})

    @extend_schema(
        operation_id="appointments_create",
        summary="Book an appointment",
        request=BookingSerializer,
        parameters=[location_header("/api/v1/appointments/{id}")],
        responses={201: _APPOINTMENT, 409: OpenApiResponse(description="`slot_unavailable`.")},
        examples=[schema.BOOKING, schema.BOOKED, schema.SLOT_UNAVAILABLE],
    )
    def create(self, request: Request) -> Response:
        """Accepted exactly when `[slot_start, slot_end)` is one of the free cells GET slots returns for that
        doctor, branch, date and duration; datetimes need a UTC offset. The token number is the next of that
        doctor's local day. 409 `slot_unavailable` otherwise, or when the patient already has an overlapping
        active appointment. `visit_type` defaults to `consultation`. Notifies the patient when notifications
        are enabled. Honours `Idempotency-Key`. Scope: `appointments:write`."""
        body = BookingSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        patient = self._body_patient(data["patient_id"])
        try:
            doctor = doctor_get(client=self.api_client, doctor_id=str(data["doctor_id"]))
        except NotFound:
            raise FieldError({"doctor_id": "No such doctor available to this client."}) from None
        branch = doctor_branch_resolve(client=self.api_client, doctor=doctor, branch_id=data.get("branch_id"))
        appointment = services.appointment_book(
            patient=patient,
            doctor=doctor,
            branch=branch,
            slot_start=data["slot_start"],
            slot_end=data["slot_end"],
            visit_type=data["visit_type"],
            notes=data["notes"],
            actor=self._actor,
        )
        self.audit_patients([appointment.patient_id])
        return created(appointment_payload(appointment), f"/api/v1/appointments/{appointment.id}")

    @extend_schema(
        operation_id="appointments_retrieve",
        summary="Get an appointment",
        parameters=[_ID],
        responses={200: _APPOINTMENT, 404: _NOT_FOUND},
        examples=[schema.BOOKED, schema.COMPLETED],
    )
    def retrieve(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """Scope: `appointments:read`."""
        return self._respond(self._appointment())

    @extend_schema(
        operation_id="appointments_cancel",
        summary="Cancel an appointment",
        parameters=[_ID],
        responses={
            200: _APPOINTMENT,
            404: _NOT_FOUND,
            409: OpenApiResponse(description="`invalid_state` (not booked) or `cancellation_window`."),
        },
        examples=[schema.CANCELLED, schema.INVALID_STATE, schema.CANCELLATION_WINDOW],
    )
    def destroy(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """Cancels a `booked` appointment; `reason` is required. From the branch's cancellation window before
        `slot_start` on (and once it has started), the API refuses with 409 `cancellation_window` and
        `cancellable_until`; staff can still cancel in the admin. The token number stays with the cancelled
        appointment and is not reused; the slot becomes free. Notifies the patient when notifications are
        enabled. Scope: `appointments:write`."""
        appointment = self._appointment()  # 404 before 400
        params = CancelParams(data=request.query_params)
        params.is_valid(raise_exception=True)
        return self._respond(
            services.appointment_cancel(
                appointment=appointment, reason=params.validated_data["reason"], actor=self._actor
            )
        )

    @extend_schema(
        operation_id="appointments_reschedule",
        summary="Reschedule an appointment",
        parameters=[_ID],
        request=RescheduleSerializer,
        responses={
            200: _APPOINTMENT,
            404: _NOT_FOUND,
            409: OpenApiResponse(
                description="`slot_unavailable`, `invalid_state` (not booked) or `cancellation_window` (the "
                "current slot starts within the branch's cancellation window; with `cancellable_until`)."
            ),
        },
        examples=[
            schema.RESCHEDULE,
            schema.RESCHEDULED,
            schema.INVALID_STATE,
            schema.SLOT_UNAVAILABLE,
            schema.CANCELLATION_WINDOW,
        ],
    )
    @action(detail=True, methods=["patch"])
    def reschedule(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """Moves a `booked` appointment to another free cell of the same doctor at the same branch (the rule of
        booking: one of the cells GET slots returns; the appointment's own time does not count as taken). Within
        the same local day the token number is kept; on another day the appointment takes that day's next
        number. `reason` is kept in the appointment's history. The `appointment.rescheduled` event carries the
        previous appointment. Honours `Idempotency-Key`. Scope: `appointments:write`."""
        body = RescheduleSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        return self._respond(
            services.appointment_reschedule(
                appointment=self._appointment(),
                slot_start=body.validated_data["new_slot_start"],
                slot_end=body.validated_data["new_slot_end"],
                reason=body.validated_data["reason"],
                actor=self._actor,
            )
        )

    @_transition("check_in", "Check a patient in", schema.CHECKED_IN)
    @action(detail=True, methods=["post"], url_path="check-in")
    def check_in(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """`booked` -> `checked_in`; sets `checked_in_at` and publishes `appointment.checked_in`. Only on the
        appointment's local day at its branch (any time that day): otherwise 409 `outside_allowed_time` with
        `allowed_from` and `allowed_until` (that day's start and the next day's start, exclusive). Takes no
        body. Scope: `appointments:write`."""
        return self._transition(request, services.appointment_check_in)

    @_transition("complete", "Complete an appointment", schema.COMPLETED)
    @action(detail=True, methods=["post"])
    def complete(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """`checked_in` -> `completed`; sets `completed_at`, adds an outpatient visit to the patient's history
        (shown in the patient profile) and publishes `appointment.completed`. Takes no body. Scope:
        `appointments:write`."""
        return self._transition(request, services.appointment_complete)

    @_transition("no_show", "Mark a no-show", schema.NO_SHOW)
    @action(detail=True, methods=["post"], url_path="no-show")
    def no_show(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """`booked` -> `no_show`; frees the slot, keeps the token number and publishes `appointment.no_show`.
        Only once the appointment has started: before `slot_start`, 409 `outside_allowed_time` with
        `allowed_from`. Takes no body. Scope: `appointments:write`."""
        return self._transition(request, services.appointment_no_show)

    # --- Helpers ------------------------------------------------------------------------------------------

    def _appointment(self) -> Appointment:
        """The appointment of the URL, through the client's branch restriction (404 otherwise)."""
        return appointment_get(client=self.api_client, appointment_id=self.kwargs[self.lookup_field])

    def _body_patient(self, ref: str) -> Patient:
        """A patient named in the body: unknown or not visible is a 400 on patient_id, not a 404."""
        try:
            patient = patient_get(client=self.api_client, ref=ref)
        except NotFound:
            raise FieldError({"patient_id": "No such patient available to this client."}) from None
        self.audit_patients([patient.id])
        return patient

    def _transition(self, request: Request, service: Callable[..., Appointment]) -> Response:
        EmptyBody(data=request.data or {}).is_valid(raise_exception=True)
        return self._respond(service(appointment=self._appointment(), actor=self._actor))

    def _respond(self, appointment: Appointment) -> Response:
        self.audit_patients([appointment.patient_id])
        return Response(appointment_payload(appointment))

    @property
    def _actor(self) -> str:
        """Who made a change, for the appointment's history."""
        return f"api:{self.api_client.name}"

    def get_view_name(self) -> str:
        # The OPTIONS `name` of each path, as its view class had it before the ViewSet.
        return _ROUTE_NAMES.get(self.action_map.get("get", ""), super().get_view_name())
