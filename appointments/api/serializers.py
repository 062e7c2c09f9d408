"""Request bodies and query parameters of the appointment endpoints."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from appointments.models import Appointment
from clinic.api.serializers import OffsetDateTimeField, StrictSerializer


class SlotParams(serializers.Serializer):
    doctor_id = serializers.UUIDField()
    date = serializers.DateField()
    branch_id = serializers.UUIDField(required=False)
    duration = serializers.IntegerField(required=False, min_value=5, max_value=240)


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


class RescheduleSerializer(StrictSerializer):
    new_slot_start = OffsetDateTimeField()
    new_slot_end = OffsetDateTimeField()
    reason = serializers.CharField(required=False, allow_blank=True, max_length=500, default="")


class CancelParams(serializers.Serializer):
    reason = serializers.CharField(max_length=500, help_text="Why the appointment is cancelled (required).")


class EmptyBody(StrictSerializer):
    """check-in, complete and no-show take no body; a stray field is refused like everywhere else."""


class AppointmentListParams(serializers.Serializer):
    patient_id = serializers.CharField(required=False, max_length=64)
    doctor_id = serializers.UUIDField(required=False)
    branch_id = serializers.UUIDField(required=False)
    date = serializers.DateField(required=False)
    date_from = serializers.DateField(required=False)
    date_to = serializers.DateField(required=False)
    status = serializers.ChoiceField(choices=Appointment.Status.choices, required=False)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if "date_from" in attrs and "date_to" in attrs and attrs["date_from"] > attrs["date_to"]:
            raise serializers.ValidationError({"date_to": "Must not be before date_from."})
        return attrs
