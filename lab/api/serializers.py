"""Lab request validation: the order and query-parameter serializers (docs/api-rules.md §13). The response
bodies are built by lab.representations."""

from __future__ import annotations

import uuid
from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from appointments.models import Appointment
from appointments.selectors import appointment_visible_get
from clinic.api.serializers import (
    BoundedListField,
    OffsetDateTimeField,
    StrictSerializer,
    filter_visible,
    filter_visible_branch,
    known_doctor,
    visible,
    visible_branch,
)
from clinic.models import Branch, Doctor
from lab.models import LabTest, OrderStatus, Priority, ResultStatus
from lab.results import MAX_RESULTS, ResultInput
from lab.services import MAX_TESTS
from patients.models import Patient
from patients.selectors import patient_visible_get

# --- Orders


class LabOrderCreateSerializer(StrictSerializer):
    """The create body. References are resolved here, field by field, so one 400 names every bad field; the
    rules that join them (the doctor at the branch, the appointment of the patient) are the service's. Needs
    context={"client": ApiClient}."""

    patient_id = serializers.CharField(max_length=64, help_text="Patient UUID or patient_id (PAT-000123).")
    branch_id = serializers.UUIDField(required=False, help_text="Default: the client's only branch.")
    doctor_id = serializers.UUIDField(help_text="The ordering doctor; must work at the branch.")
    tests = BoundedListField(
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
        return visible(self, patient_visible_get, ref=value)

    def validate_branch_id(self, value: uuid.UUID) -> Branch:
        return visible_branch(self, value)

    def validate_doctor_id(self, value: uuid.UUID) -> Doctor:
        return known_doctor(value)

    def validate_appointment_id(self, value: uuid.UUID | None) -> Appointment | None:
        return None if value is None else visible(self, appointment_visible_get, appointment_id=value)

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
        return filter_visible(self, patient_visible_get, ref=value)

    def validate_branch_id(self, value: uuid.UUID) -> Branch:
        return filter_visible_branch(self, value)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if "date_from" in attrs and "date_to" in attrs and attrs["date_from"] > attrs["date_to"]:
            raise serializers.ValidationError({"date_to": "Must not be before date_from."})
        return attrs


# --- Results


@extend_schema_field({"type": ["number", "string"]})
class RawValueField(serializers.Field):
    """The posted value as sent (a JSON number or string): lab.interpretation checks it against the analyte,
    which the serializer does not know yet."""

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, dict | list) or data is None:
            raise serializers.ValidationError("A number or a string.")
        return data

    def to_representation(self, value: Any) -> Any:
        return value


class PostedResultSerializer(StrictSerializer):
    test = serializers.CharField(max_length=30, help_text="The code of a test of this order.")
    analyte = serializers.CharField(
        max_length=30, required=False, help_text="The analyte's code; required for lab tests, absent for imaging."
    )
    value = RawValueField(
        help_text="Quantity: a number (or a numeric string, ASCII digits and one '.'), never negative; coded: one "
        "of the analyte's values; text, and imaging: the report."
    )
    unit = serializers.CharField(
        max_length=30, required=False, help_text="Optional; when sent, the analyte's UCUM unit (g/dL)."
    )
    note = serializers.CharField(max_length=1000, required=False, allow_blank=True, default="")


class LabResultsSerializer(StrictSerializer):
    results = PostedResultSerializer(many=True, min_length=1, max_length=MAX_RESULTS)  # type: ignore[call-arg]
    performed_at = OffsetDateTimeField(help_text="When the test was performed, with its UTC offset.")
    performer = serializers.CharField(max_length=200, help_text="Who performed (or verified) it.")
    status = serializers.ChoiceField(choices=ResultStatus.values)
    reason = serializers.CharField(
        max_length=500, required=False, allow_blank=True, default="", help_text="Required with status amended."
    )

    def validate_results(self, value: list[dict[str, Any]]) -> list[ResultInput]:
        return [ResultInput(**posted) for posted in value]
