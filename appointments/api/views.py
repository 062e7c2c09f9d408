"""GET /api/v1/appointments/slots (booking and the appointment lifecycle come in the next slice)."""

from __future__ import annotations

from datetime import timedelta

from drf_spectacular.utils import OpenApiExample, OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from appointments.slots import free_cells
from clinic.api.views import ClinicAPIView
from clinic.errors import FieldError
from clinic.selectors import doctor_branches_visible, doctor_get


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
        branches = doctor_branches_visible(client=self.api_client, doctor=doctor)
        branch_id = params.validated_data.get("branch_id")
        if branch_id is not None:
            branch = next((b for b in branches if b.id == branch_id), None)
            if branch is None:
                raise FieldError({"branch_id": "This doctor does not consult at that branch."})
        elif len(branches) == 1:
            branch = branches[0]
        else:
            raise FieldError({"branch_id": "Required: this doctor consults at more than one branch."})
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
