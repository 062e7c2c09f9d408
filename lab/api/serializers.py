"""Lab request validation: the order and query-parameter serializers (CONTRACT section 14). The response
bodies are built by lab.representations."""

from __future__ import annotations

import uuid
from typing import Any

from rest_framework import serializers

from appointments.models import Appointment
from clinic.api.serializers import StrictSerializer
from clinic.errors import NotFound
from clinic.models import Branch, Doctor
from clinic.selectors import client_branch_ids
from integrations.models import ApiClient
from lab import selectors
from lab.models import LabTest, OrderStatus, Priority
from lab.services import MAX_TESTS
from patients.models import Patient
from patients.selectors import patient_get

# --- Orders


def _client(serializer: serializers.Serializer) -> ApiClient:
    return serializer.context["client"]


def _patient(serializer: serializers.Serializer, ref: str) -> Patient:
    try:
        return patient_get(client=_client(serializer), ref=ref)
    except NotFound:
        raise serializers.ValidationError("No such patient available to this client.") from None


def _branch(serializer: serializers.Serializer, branch_id: uuid.UUID) -> Branch:
    try:
        return selectors.lab_branch_get(client=_client(serializer), branch_id=branch_id)
    except NotFound as exc:
        raise serializers.ValidationError(exc.detail) from None


class LabOrderCreateSerializer(StrictSerializer):
    """The create body. References are resolved here, field by field, so one 400 names every bad field; the
    rules that join them (the doctor at the branch, the appointment of the patient) are the service's. Needs
    context={"client": ApiClient}."""

    patient_id = serializers.CharField(max_length=64, help_text="Patient UUID or patient_id (PAT-000123).")
    branch_id = serializers.UUIDField(required=False, help_text="Default: the client's only branch.")
    doctor_id = serializers.UUIDField(help_text="The ordering doctor; must work at the branch.")
    tests = serializers.ListField(
        child=serializers.CharField(max_length=30),
        min_length=1,
        max_length=MAX_TESTS,
        help_text=f"Catalogue test codes (GET /api/v1/lab/tests), 1 to {MAX_TESTS}, each at most once.",
    )
    priority = serializers.ChoiceField(choices=Priority.choices, default=Priority.ROUTINE)
    clinical_notes = serializers.CharField(max_length=2000, required=False, allow_blank=True, default="")
    appointment_id = serializers.UUIDField(
        required=False, allow_null=True, help_text="The patient's appointment at this branch the order comes from."
    )
    bill = serializers.BooleanField(
        default=False,
        help_text="Add each test's catalogue item to the patient's open draft invoice at the branch (or a new one).",
    )

    def validate_patient_id(self, value: str) -> Patient:
        return _patient(self, value)

    def validate_branch_id(self, value: uuid.UUID) -> Branch:
        return _branch(self, value)

    def validate_doctor_id(self, value: uuid.UUID) -> Doctor:
        doctor = Doctor.objects.filter(id=value).first()
        if doctor is None:
            raise serializers.ValidationError(f"No doctor {value}.")
        return doctor

    def validate_appointment_id(self, value: uuid.UUID | None) -> Appointment | None:
        if value is None:
            return None
        allowed = client_branch_ids(_client(self))
        appointment = Appointment.objects.filter(id=value).first()
        if appointment is None or (allowed is not None and appointment.branch_id not in allowed):
            raise serializers.ValidationError(f"No appointment {value} available to this client.")
        return appointment

    def validate_tests(self, value: list[str]) -> list[LabTest]:
        """Codes to tests in the order sent; an unknown code is named by its index (tests.1)."""
        found = {test.code: test for test in LabTest.objects.filter(code__in=value).select_related("billable_service")}
        missing = {
            str(index): [f"No test {code!r} in the catalogue."] for index, code in enumerate(value) if code not in found
        }
        if missing:
            raise serializers.ValidationError(missing)
        return [found[code] for code in value]


class LabOrderCancelSerializer(StrictSerializer):
    reason = serializers.CharField(max_length=500, help_text="Why the order is cancelled (required).")


class EmptyBody(StrictSerializer):
    """collect takes no body; a stray field is refused like everywhere else."""


class LabOrderListParams(serializers.Serializer):
    """The list's filters; patient and branch are looked up here so one 400 names every bad parameter.
    Needs context={"client": ApiClient}."""

    patient_id = serializers.CharField(
        required=False, max_length=64, help_text="Patient UUID or patient_id (PAT-000123)."
    )
    branch_id = serializers.UUIDField(required=False)
    status = serializers.ChoiceField(choices=OrderStatus.choices, required=False)
    test = serializers.CharField(required=False, max_length=30, help_text="Orders with an item of this test code.")
    date_from = serializers.DateField(required=False, help_text="Orders placed on or after this day (branch-local).")
    date_to = serializers.DateField(required=False, help_text="Orders placed on or before this day (branch-local).")
    priority = serializers.ChoiceField(choices=Priority.choices, required=False)

    def validate_patient_id(self, value: str) -> Patient:
        return _patient(self, value)

    def validate_branch_id(self, value: uuid.UUID) -> uuid.UUID:
        return _branch(self, value).id

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if "date_from" in attrs and "date_to" in attrs and attrs["date_from"] > attrs["date_to"]:
            raise serializers.ValidationError({"date_to": "Must not be before date_from."})
        return attrs
