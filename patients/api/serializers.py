"""Patient request validation: the create and update bodies and the list parameters (docs/api-rules.md §9).
The representations are in patients.representations."""

from __future__ import annotations

from datetime import date
from typing import Any

from django.utils import timezone
from rest_framework import serializers
from rest_framework.fields import empty

from clinic.api.serializers import IndianStateField, StrictSerializer
from patients.identifiers import normalise_aadhaar, normalise_abha, normalise_phone
from patients.models import Patient

EARLIEST_BIRTH_DATE = date(1900, 1, 1)


class AddressSerializer(StrictSerializer):
    line1 = serializers.CharField(max_length=200, required=False, allow_blank=True)
    city = serializers.CharField(max_length=100, required=False, allow_blank=True)
    state = IndianStateField(required=False, allow_blank=True)
    pincode = serializers.RegexField(
        r"^[1-9][0-9]{5}$",  # [0-9], not \d: Unicode digits passed \d and then failed the database CHECK
        required=False,
        allow_blank=True,
        error_messages={"invalid": "A pincode is six digits and does not start with 0."},
    )


class _EntryCharField(serializers.CharField):
    """Required even inside a PATCH. DRF's partial mode (decided by the root serializer) skips missing
    required fields of nested serializers too; but a sent `insurance` list replaces the stored one, so
    each entry must be complete (else a PATCH with an entry lacking `provider` crashed with a 500)."""

    def validate_empty_values(self, data: Any) -> tuple[bool, Any]:
        if data is empty and self.required:
            self.fail("required")
        return super().validate_empty_values(data)


class InsuranceSerializer(StrictSerializer):
    provider = _EntryCharField(max_length=100)
    policy_number = _EntryCharField(max_length=50)
    valid_until = serializers.DateField(required=False, allow_null=True)


class PatientWriteSerializer(StrictSerializer):
    """The create body; with partial=True, the PATCH body (any subset of the same fields)."""

    first_name = serializers.CharField(min_length=1, max_length=100)
    last_name = serializers.CharField(min_length=1, max_length=100)
    date_of_birth = serializers.DateField()
    gender = serializers.ChoiceField(choices=Patient.Gender.choices)
    phone = serializers.CharField(max_length=30)
    email = serializers.EmailField(max_length=254, required=False, allow_blank=True)
    address = AddressSerializer(required=False)
    blood_group = serializers.ChoiceField(choices=Patient.BloodGroup.choices, required=False, allow_blank=True)
    branch_id = serializers.UUIDField(required=False)
    national_health_id = serializers.CharField(max_length=20, required=False, allow_null=True, allow_blank=True)
    national_id = serializers.CharField(
        max_length=20, required=False, allow_null=True, allow_blank=True, write_only=True
    )
    insurance = InsuranceSerializer(many=True, required=False, max_length=10)  # type: ignore[call-arg]

    def validate_date_of_birth(self, value: date) -> date:
        if value > timezone.localdate():
            raise serializers.ValidationError("The date of birth cannot be in the future.")
        if value < EARLIEST_BIRTH_DATE:
            raise serializers.ValidationError("The date of birth cannot be before 1900-01-01.")
        return value

    def validate_phone(self, value: str) -> str:
        try:
            return normalise_phone(value)
        except ValueError as exc:
            raise serializers.ValidationError(f"{exc} Send it with its country prefix, e.g. +919876543210.") from None

    def validate_national_health_id(self, value: str | None) -> str | None:
        if not value:
            return None
        try:
            return normalise_abha(value)
        except ValueError as exc:
            raise serializers.ValidationError(str(exc)) from None

    def validate_national_id(self, value: str | None) -> str | None:
        if not value:
            return None
        try:
            return normalise_aadhaar(value)
        except ValueError as exc:
            raise serializers.ValidationError(str(exc)) from None


class PatientListParams(serializers.Serializer):
    search = serializers.CharField(
        required=False,
        min_length=2,
        max_length=100,
        trim_whitespace=True,
        help_text="Name (fuzzy), phone digits, patient_id or ABHA number; best match first.",
    )
    branch_id = serializers.UUIDField(required=False, help_text="Only patients registered at this branch.")
    registered_after = serializers.DateField(required=False, help_text="Only patients registered after this day.")
