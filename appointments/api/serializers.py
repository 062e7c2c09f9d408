"""Request bodies and query parameters of the appointment endpoints."""

from __future__ import annotations

import uuid
from typing import Any

from rest_framework import serializers

from appointments.models import Appointment
from appointments.selectors import branch_filter_check, doctor_filter_check
from clinic.api.serializers import NAMES_NOTHING, OffsetDateTimeField, StrictSerializer, filter_visible
from patients.models import Patient
from patients.selectors import patient_get


class SlotParams(serializers.Serializer):
    doctor_id = serializers.UUIDField(help_text="The doctor (404 if unknown).")
    date = serializers.DateField(help_text="The branch-local day.")
    branch_id = serializers.UUIDField(required=False, help_text="Required for a doctor at several branches.")
    duration = serializers.IntegerField(
        required=False, min_value=5, max_value=240, help_text="Cell length in minutes (default: the doctor's)."
    )


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
    """The list's filters. References are looked up here, field by field, so one 400 names every bad
    parameter (an unknown doctor and a bad status together). Needs context={"client": ApiClient}."""

    patient_id = serializers.CharField(
        required=False, max_length=64, help_text="Patient UUID or patient_id (PAT-000123)."
    )
    doctor_id = serializers.UUIDField(required=False)
    branch_id = serializers.UUIDField(required=False)
    date = serializers.DateField(required=False, help_text="Branch-local day of the slot.")
    date_from = serializers.DateField(required=False, help_text="From this branch-local day (inclusive).")
    date_to = serializers.DateField(required=False, help_text="Up to this branch-local day (inclusive).")
    status = serializers.ChoiceField(choices=Appointment.Status.choices, required=False)

    def validate_patient_id(self, value: str) -> Patient:
        return filter_visible(self, patient_get, ref=value)

    def validate_doctor_id(self, value: uuid.UUID) -> Any:
        # The check answers None when the doctor is one the client may see, else NAMES_NOTHING.
        return value if filter_visible(self, doctor_filter_check, doctor_id=value) is None else NAMES_NOTHING

    def validate_branch_id(self, value: uuid.UUID) -> Any:
        return value if filter_visible(self, branch_filter_check, branch_id=value) is None else NAMES_NOTHING

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if "date_from" in attrs and "date_to" in attrs and attrs["date_from"] > attrs["date_to"]:
            raise serializers.ValidationError({"date_to": "Must not be before date_from."})
        return attrs
