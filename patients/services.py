"""Writes on patients: registration with race-safe duplicate detection, and partial updates."""

from __future__ import annotations

from datetime import date
from typing import Any

from django.db import IntegrityError, connection, transaction

from clinic import crypto
from clinic.errors import Conflict, FieldError
from clinic.models import Branch
from patients.identifiers import format_patient_id
from patients.models import Insurance, Patient

PATIENT_NUMBER_SEQUENCE = "patients_patient_number_seq"

# Create/PATCH fields (API and admin) that map one-to-one onto model columns.
COLUMN_FIELDS = (
    "first_name",
    "last_name",
    "date_of_birth",
    "gender",
    "phone",
    "email",
    "blood_group",
    "national_health_id",
    "is_active",
)
ADDRESS_FIELDS = {
    "line1": "address_line1",
    "city": "address_city",
    "state": "address_state",
    "pincode": "address_pincode",
}


class DuplicatePatient(Conflict):
    code = "duplicate_patient"
    title = "Duplicate patient"


def _lock_identity(phone: str, date_of_birth: date) -> None:
    """Serialise registrations of one phone+birth date until commit, so two concurrent creates of the
    same person cannot both pass the duplicate check (a transaction-scoped advisory lock)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", [f"patient:{phone}:{date_of_birth}"])


def patient_duplicate_find(*, phone: str, date_of_birth: date, exclude_id: Any = None) -> Patient | None:
    """The active patient registered first with this phone and birth date (the duplicate rule)."""
    existing = Patient.objects.filter(phone=phone, date_of_birth=date_of_birth, is_active=True)
    if exclude_id is not None:
        existing = existing.exclude(id=exclude_id)
    return existing.order_by("registered_at").only("id", "patient_id").first()


def _check_duplicate(*, phone: str, date_of_birth: date, exclude_id: Any = None) -> None:
    match = patient_duplicate_find(phone=phone, date_of_birth=date_of_birth, exclude_id=exclude_id)
    if match is not None:
        raise DuplicatePatient(
            f"Patient {match.patient_id} already has this phone number and date of birth.",
            existing_patient_id=match.patient_id,
            existing_id=str(match.id),
        )


def _save(patient: Patient) -> None:
    """Save, turning a taken ABHA number (unique column) into a 400 on national_health_id instead of a 500.
    The savepoint keeps the surrounding transaction usable; a concurrent registration of the same ABHA
    number is caught the same way."""
    try:
        with transaction.atomic():
            patient.save()
    except IntegrityError as exc:
        if "national_health_id" in str(exc):
            raise FieldError(
                {"national_health_id": "This ABHA number is already registered to another patient."}
            ) from None
        raise


def _set_national_id(patient: Patient, national_id: str | None) -> None:
    if national_id:
        patient.national_id_encrypted = crypto.encrypt(national_id)
        patient.national_id_hash = crypto.lookup_hash(national_id)
        patient.national_id_last4 = national_id[-4:]
    else:
        patient.national_id_encrypted = patient.national_id_hash = patient.national_id_last4 = ""


def _apply(patient: Patient, data: dict[str, Any]) -> None:
    for field in COLUMN_FIELDS:
        if field in data:
            setattr(patient, field, data[field] if data[field] is not None or field == "national_health_id" else "")
    for key, column in ADDRESS_FIELDS.items():
        if key in (data.get("address") or {}):
            setattr(patient, column, data["address"][key] or "")
    if "national_id" in data:
        _set_national_id(patient, data["national_id"])
    if "branch" in data:
        patient.registration_branch = data["branch"]


@transaction.atomic
def patient_create(*, branch: Branch, data: dict[str, Any]) -> Patient:
    """Register a patient. `data` holds validated create fields; raises DuplicatePatient (409)."""
    _lock_identity(data["phone"], data["date_of_birth"])
    _check_duplicate(phone=data["phone"], date_of_birth=data["date_of_birth"])
    with connection.cursor() as cursor:
        cursor.execute("SELECT nextval(%s)", [PATIENT_NUMBER_SEQUENCE])
        number = cursor.fetchone()[0]
    patient = Patient(patient_id=format_patient_id(number), registration_branch=branch)
    _apply(patient, data)
    _save(patient)
    _replace_insurance(patient, data.get("insurance") or [])
    return patient


@transaction.atomic
def patient_update(*, patient: Patient, data: dict[str, Any]) -> Patient:
    """Apply a partial update; the duplicate rule is checked again when phone or birth date change."""
    locked = Patient.objects.select_for_update().get(pk=patient.pk)
    phone = data.get("phone", locked.phone)
    date_of_birth = data.get("date_of_birth", locked.date_of_birth)
    if (phone, date_of_birth) != (locked.phone, locked.date_of_birth):
        _lock_identity(phone, date_of_birth)
        _check_duplicate(phone=phone, date_of_birth=date_of_birth, exclude_id=locked.pk)
    _apply(locked, data)
    _save(locked)
    if "insurance" in data:
        _replace_insurance(locked, data["insurance"] or [])
    return locked


def _replace_insurance(patient: Patient, entries: list[dict[str, Any]]) -> None:
    patient.insurance.all().delete()
    Insurance.objects.bulk_create(
        Insurance(
            patient=patient,
            provider=entry["provider"],
            policy_number=entry["policy_number"],
            valid_until=entry.get("valid_until"),
        )
        for entry in entries
    )
