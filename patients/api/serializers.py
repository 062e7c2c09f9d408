"""Patient request validation and the summary/profile representations (CONTRACT section 5)."""

from __future__ import annotations

from datetime import date, datetime
from typing import Any
from zoneinfo import ZoneInfo

from django.utils import timezone
from rest_framework import serializers
from rest_framework.fields import empty

from clinic.api.serializers import StrictSerializer
from patients.identifiers import normalise_aadhaar, normalise_abha, normalise_phone
from patients.models import Patient
from patients.selectors import PatientProfile, VisitRow

EARLIEST_BIRTH_DATE = date(1900, 1, 1)


class AddressSerializer(StrictSerializer):
    line1 = serializers.CharField(max_length=200, required=False, allow_blank=True)
    city = serializers.CharField(max_length=100, required=False, allow_blank=True)
    state = serializers.CharField(max_length=100, required=False, allow_blank=True)
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


def _local(value: datetime | None, zone: Any) -> str | None:
    return value.astimezone(zone).isoformat() if value else None


def patient_summary(patient: Patient, today: date) -> dict[str, Any]:
    last_visit = getattr(patient, "last_visit_at", None)
    return {
        "id": str(patient.id),
        "patient_id": patient.patient_id,
        "name": patient.name,
        "phone": patient.phone,
        "age": patient.age_on(today),
        "gender": patient.gender,
        "last_visit_date": last_visit.astimezone(patient.registration_branch.zone).date().isoformat()
        if last_visit
        else None,
    }


def patient_profile(profile: PatientProfile, today: date) -> dict[str, Any]:
    """The profile of CONTRACT section 5; the national ID only ever leaves masked."""
    patient = profile.patient
    branch_zone = patient.registration_branch.zone
    return {
        "id": str(patient.id),
        "patient_id": patient.patient_id,
        "branch_id": str(patient.registration_branch_id),
        "registered_at": _local(patient.registered_at, branch_zone),
        "demographics": {
            "first_name": patient.first_name,
            "last_name": patient.last_name,
            "name": patient.name,
            "date_of_birth": patient.date_of_birth.isoformat(),
            "age": patient.age_on(today),
            "gender": patient.gender,
            "blood_group": patient.blood_group or None,
            "address": {
                "line1": patient.address_line1,
                "city": patient.address_city,
                "state": patient.address_state,
                "pincode": patient.address_pincode,
            },
            "contact": {"phone": patient.phone, "email": patient.email or None},
        },
        "identifiers": {
            "patient_id": patient.patient_id,
            "national_health_id": patient.national_health_id,
            "national_id_masked": patient.national_id_masked,
            "insurance": profile.sections["insurance"],
        },
        "medical_summary": {
            "diagnoses": profile.sections["diagnoses"],
            "allergies": profile.sections["allergies"],
            "medications": profile.sections["medications"],
        },
        "visit_history": _visit_history(profile.visits),
    }


def _visit_history(visits: list[VisitRow]) -> list[dict[str, Any]]:
    """Each visit's times in its own branch's zone. Plain dicts from rows: a serializer per visit, or a
    model instance, was most of a long history's cost."""
    zones: dict[str, ZoneInfo] = {}
    history = []
    for visit_id, kind, start, end, doctor_id, doctor_name, department, branch_id, time_zone, reason in visits:
        zone = zones.get(time_zone) or zones.setdefault(time_zone, ZoneInfo(time_zone))
        history.append(
            {
                "id": visit_id,
                "type": kind,
                "start": datetime.fromisoformat(start).astimezone(zone).isoformat(),
                "end": datetime.fromisoformat(end).astimezone(zone).isoformat() if end else None,
                "doctor": {"id": doctor_id, "name": doctor_name} if doctor_id else None,
                "department": department,
                "branch_id": branch_id,
                "reason": reason,
            }
        )
    return history
