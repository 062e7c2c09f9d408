"""The patient representations of docs/api-rules.md §9: the list summary and the profile.

Each shape is declared once, as the TypedDict its builder returns; the OpenAPI components of the same
names are derived from these classes (clinic.api.shapes), so the document and the bodies cannot drift.
"""

from __future__ import annotations

from datetime import date, datetime
from typing import Annotated, Any, Literal, TypedDict, cast
from zoneinfo import ZoneInfo

from clinic.lib.shapes import DateText, DateTimeText, Doc, Format, UUIDText
from patients import selectors
from patients.models import Patient

Gender = Literal["male", "female", "other", "unknown"]  # Patient.Gender (a test keeps the two equal)
VisitType = Literal["outpatient", "inpatient"]  # Visit.Type


class PatientSummary(TypedDict):
    id: UUIDText
    patient_id: str
    name: str
    phone: Annotated[str, Doc("E.164")]
    age: Annotated[int, Doc("Whole years")]
    gender: Gender
    last_visit_date: DateText | None


class PatientAddress(TypedDict):
    line1: str
    city: str
    # Text, not the enum of names: a record stored before states were checked may hold a value that names no
    # state (migration patients 0011 left those as they were, for staff to correct).
    state: Annotated[
        str,
        Doc(
            "The name of an Indian state or union territory, e.g. Karnataka (the names a branch's state takes); "
            "empty when unknown. "
            "Records registered before the state was checked may hold an unrecognised value."
        ),
    ]
    pincode: str


class PatientContact(TypedDict):
    phone: str
    email: Annotated[str | None, Format.EMAIL]


class PatientDemographics(TypedDict):
    first_name: str
    last_name: str
    name: str
    date_of_birth: DateText
    age: int
    gender: str
    blood_group: str | None
    address: PatientAddress
    contact: PatientContact


# The four sections below are read as JSON objects in SQL (selectors.patient_profile): dates are ISO text.
class PatientInsurance(TypedDict):
    provider: str
    policy_number: str
    valid_until: DateText | None


class PatientIdentifiers(TypedDict):
    patient_id: str
    national_health_id: Annotated[str | None, Doc("14-digit ABHA number")]
    national_id_masked: Annotated[str | None, Doc("XXXX-XXXX-1234")]
    insurance: list[PatientInsurance]


class PatientDiagnosis(TypedDict):
    code: str
    system: str
    description: str
    onset_date: DateText | None
    status: str


class PatientAllergy(TypedDict):
    substance: str
    reaction: str
    severity: Literal["mild", "moderate", "severe"]


class PatientMedication(TypedDict):
    name: str
    dosage: str
    frequency: str
    start_date: DateText | None


class PatientMedicalSummary(TypedDict):
    diagnoses: list[PatientDiagnosis]
    allergies: list[PatientAllergy]
    medications: list[PatientMedication]


class PatientVisitDoctor(TypedDict):
    id: UUIDText
    name: str


class PatientVisit(TypedDict):
    id: UUIDText
    type: VisitType
    start: DateTimeText
    end: DateTimeText | None
    doctor: PatientVisitDoctor | None
    department: str | None
    branch_id: UUIDText
    reason: str


class PatientProfile(TypedDict):
    id: UUIDText
    patient_id: str
    branch_id: UUIDText
    registered_at: DateTimeText
    demographics: PatientDemographics
    identifiers: PatientIdentifiers
    medical_summary: PatientMedicalSummary
    visit_history: list[PatientVisit]


def patient_summary(patient: Patient, today: date) -> PatientSummary:
    last_visit = getattr(patient, "last_visit_at", None)
    return {
        "id": str(patient.id),
        "patient_id": patient.patient_id,
        "name": patient.name,
        "phone": patient.phone,
        "age": patient.age_on(today),
        "gender": cast(Gender, patient.gender),
        "last_visit_date": last_visit.astimezone(patient.registration_branch.zone).date().isoformat()
        if last_visit
        else None,
    }


def patient_profile(profile: selectors.PatientProfile, today: date) -> PatientProfile:
    """The profile of docs/api-rules.md §9; the national ID only ever leaves masked."""
    patient = profile.patient
    branch_zone = patient.registration_branch.zone
    sections: dict[str, Any] = profile.sections  # JSON objects in the shapes above, built in SQL
    return {
        "id": str(patient.id),
        "patient_id": patient.patient_id,
        "branch_id": str(patient.registration_branch_id),
        "registered_at": patient.registered_at.astimezone(branch_zone).isoformat(),
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
            "insurance": sections["insurance"],
        },
        "medical_summary": {
            "diagnoses": sections["diagnoses"],
            "allergies": sections["allergies"],
            "medications": sections["medications"],
        },
        "visit_history": _visit_history(profile.visits),
    }


def _visit_history(visits: list[selectors.VisitRow]) -> list[PatientVisit]:
    """Each visit's times in its own branch's zone. Plain dicts from rows: a serializer per visit, or a
    model instance, was most of a long history's cost."""
    zones: dict[str, ZoneInfo] = {}
    history: list[PatientVisit] = []
    for visit_id, kind, start, end, doctor_id, doctor_name, department, branch_id, time_zone, reason in visits:
        zone = zones.get(time_zone) or zones.setdefault(time_zone, ZoneInfo(time_zone))
        history.append(
            {
                "id": visit_id,
                "type": cast(VisitType, kind),
                "start": datetime.fromisoformat(start).astimezone(zone).isoformat(),
                "end": datetime.fromisoformat(end).astimezone(zone).isoformat() if end else None,
                "doctor": {"id": doctor_id, "name": cast(str, doctor_name)} if doctor_id else None,
                "department": department,
                "branch_id": branch_id,
                "reason": reason,
            }
        )
    return history
