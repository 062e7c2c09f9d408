"""The clinical record's shape (GET /api/v1/patients/{id}/record), declared once as TypedDicts: the API and
the OpenAPI document (clinic.api.shapes) both use these."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import Annotated, Any, TypedDict, cast
from zoneinfo import ZoneInfo

from clinic.lib.shapes import DateText, Deprecated, Doc, Format, Number, UUIDText
from emr.selectors import ClinicalRecord, SectionPage
from lab import models as lab_models
from patients import models as patient_models
from patients.representations import VisitType
from pharmacy import models as pharmacy_models

ResultValue = Annotated[Decimal | None, Number(max_digits=14, decimal_places=4)]
Limit = Annotated[Decimal | None, Number(max_digits=12, decimal_places=4)]
NextLink = Annotated[str | None, Format.URI, Doc("Absolute URL of this section's next page; null on the last.")]


class RecordPatient(TypedDict):
    id: UUIDText
    patient_id: Annotated[str, Doc("The patient's business id.")]
    name: str
    gender: Annotated[str, Doc("male, female, other or unknown.")]
    date_of_birth: DateText


class RecordDoctor(TypedDict):
    id: UUIDText
    name: str


class Encounter(TypedDict):
    """A visit: an outpatient consultation (a completed appointment adds one) or an inpatient stay."""

    id: Annotated[str, Format.UUID]
    encounter_id: Annotated[str, Format.UUID, Deprecated("id")]
    type: VisitType
    start: Annotated[str, Format.DATE_TIME, Doc("With the visit branch's UTC offset.")]
    end: Annotated[str | None, Format.DATE_TIME]
    doctor: RecordDoctor | None
    department: str | None
    branch_id: UUIDText
    reason: str | None


class RecordDiagnosis(TypedDict):
    id: Annotated[str, Format.UUID]
    diagnosis_id: Annotated[str, Format.UUID, Deprecated("id")]
    code: Annotated[str, Doc("e.g. E11.9")]
    system: Annotated[str, Doc("e.g. ICD-10")]
    description: str
    onset_date: DateText | None
    status: Annotated[str, Doc("active, resolved or inactive.")]


class RecordAllergy(TypedDict):
    id: Annotated[str, Format.UUID]
    allergy_id: Annotated[str, Format.UUID, Deprecated("id")]
    substance: str
    reaction: str | None
    severity: Annotated[str, Doc("mild, moderate or severe.")]


class RecordMedication(TypedDict):
    id: Annotated[str, Format.UUID]
    medication_id: Annotated[str, Format.UUID, Deprecated("id")]
    name: str
    dosage: str | None
    frequency: str | None
    start_date: DateText | None
    end_date: Annotated[DateText | None, Doc("Null while the patient still takes it.")]


class RecordPrescriptionItem(TypedDict):
    drug: Annotated[str, Doc("The drug's code, e.g. PARA500.")]
    name: Annotated[str, Doc("Generic name and strength.")]
    dose: str
    frequency: str
    route: str
    duration_days: int
    quantity: int
    dispensed_quantity: int
    instructions: str | None


class RecordPrescription(TypedDict):
    id: Annotated[str, Format.UUID]
    prescription_id: Annotated[str, Format.UUID, Deprecated("id")]
    prescription_number: str
    status: Annotated[str, Doc("active, completed or cancelled.")]
    branch_id: UUIDText
    doctor: RecordDoctor
    created_at: Annotated[str, Format.DATE_TIME, Doc("With the branch's UTC offset.")]
    items: list[RecordPrescriptionItem]


class RecordDispenseLine(TypedDict):
    drug: str
    name: str
    batch: Annotated[str, Doc("The batch number.")]
    quantity: int
    returned_quantity: int


class RecordDispense(TypedDict):
    id: Annotated[str, Format.UUID]
    dispense_id: Annotated[str, Format.UUID, Deprecated("id")]
    dispense_number: str
    branch_id: UUIDText
    prescription_id: UUIDText | None
    created_at: Annotated[str, Format.DATE_TIME, Doc("With the branch's UTC offset.")]
    lines: list[RecordDispenseLine]


class RecordLabResult(TypedDict):
    """The current version of one analyte's result (or an imaging report: no analyte, text value)."""

    id: Annotated[str, Format.UUID]
    result_id: Annotated[str, Format.UUID, Deprecated("id")]
    order_id: UUIDText
    order_number: str
    test: Annotated[str, Doc("The test's code, e.g. CBC.")]
    test_name: str
    analyte: Annotated[str | None, Doc("The analyte's code; null for an imaging report.")]
    analyte_name: str | None
    loinc_code: Annotated[str, Doc("The analyte's LOINC code, else the test's.")]
    status: Annotated[str, Doc("preliminary, final or amended.")]
    value_quantity: ResultValue
    value_text: str | None
    unit: Annotated[str | None, Doc("UCUM.")]
    flag: Annotated[str | None, Doc("N, L, H, LL or HH; null when no range applies.")]
    reference_low: Limit
    reference_high: Limit
    performed_at: Annotated[str, Format.DATE_TIME, Doc("With the order branch's UTC offset.")]
    version: int


class SectionMeta(TypedDict):
    total: Annotated[int, Doc("Entries in the whole section.")]
    page: int
    per_page: int
    next: NextLink


class EncounterSection(SectionMeta):
    items: list[Encounter]


class DiagnosisSection(SectionMeta):
    items: list[RecordDiagnosis]


class AllergySection(SectionMeta):
    items: list[RecordAllergy]


class MedicationSection(SectionMeta):
    items: list[RecordMedication]


class PrescriptionSection(SectionMeta):
    items: list[RecordPrescription]


class DispenseSection(SectionMeta):
    items: list[RecordDispense]


class LabResultSection(SectionMeta):
    items: list[RecordLabResult]


class ClinicalRecordBody(TypedDict, total=False):
    """Every section when no `section` is asked for, else that one; each is a page of its own."""

    patient: RecordPatient
    encounters: EncounterSection
    diagnoses: DiagnosisSection
    allergies: AllergySection
    medications: MedicationSection
    prescriptions: PrescriptionSection
    dispenses: DispenseSection
    results: LabResultSection


def _local(value: datetime, zone: str) -> str:
    return value.astimezone(ZoneInfo(zone)).isoformat()


def _plain(value: Decimal | None) -> Decimal | None:
    """13.5000 -> 13.5 and 100.0000 -> 100 (never 1E+2), as the lab order shows it."""
    if value is None:
        return None
    value = value.normalize()
    exponent = value.as_tuple().exponent
    return value.quantize(Decimal(1)) if isinstance(exponent, int) and exponent > 0 else value


def _doctor(doctor: Any) -> RecordDoctor | None:
    return {"id": str(doctor.id), "name": doctor.name} if doctor is not None else None


def encounter_data(visit: patient_models.Visit) -> Encounter:
    return {
        "id": str(visit.id),
        "encounter_id": str(visit.id),
        "type": cast(VisitType, visit.type),
        "start": _local(visit.start, visit.branch.time_zone),
        "end": _local(visit.end, visit.branch.time_zone) if visit.end else None,
        "doctor": _doctor(visit.doctor),
        "department": visit.department.name if visit.department else None,
        "branch_id": str(visit.branch_id),
        "reason": visit.reason or None,
    }


def diagnosis_data(diagnosis: patient_models.Diagnosis) -> RecordDiagnosis:
    return {
        "id": str(diagnosis.id),
        "diagnosis_id": str(diagnosis.id),
        "code": diagnosis.code,
        "system": diagnosis.system,
        "description": diagnosis.description,
        "onset_date": diagnosis.onset_date.isoformat() if diagnosis.onset_date else None,
        "status": diagnosis.status,
    }


def allergy_data(allergy: patient_models.Allergy) -> RecordAllergy:
    return {
        "id": str(allergy.id),
        "allergy_id": str(allergy.id),
        "substance": allergy.substance,
        "reaction": allergy.reaction or None,
        "severity": allergy.severity,
    }


def medication_data(medication: patient_models.Medication) -> RecordMedication:
    return {
        "id": str(medication.id),
        "medication_id": str(medication.id),
        "name": medication.name,
        "dosage": medication.dosage or None,
        "frequency": medication.frequency or None,
        "start_date": medication.start_date.isoformat() if medication.start_date else None,
        "end_date": medication.end_date.isoformat() if medication.end_date else None,
    }


def _drug_name(drug: pharmacy_models.Drug) -> str:
    return f"{drug.generic_name} {drug.strength}"


def prescription_data(prescription: pharmacy_models.Prescription) -> RecordPrescription:
    return {
        "id": str(prescription.id),
        "prescription_id": str(prescription.id),
        "prescription_number": prescription.prescription_number,
        "status": prescription.status,
        "branch_id": str(prescription.branch_id),
        "doctor": {"id": str(prescription.doctor.id), "name": prescription.doctor.name},
        "created_at": _local(prescription.created_at, prescription.branch.time_zone),
        "items": [
            {
                "drug": item.drug.code,
                "name": _drug_name(item.drug),
                "dose": item.dose,
                "frequency": item.frequency,
                "route": item.route,
                "duration_days": item.duration_days,
                "quantity": item.quantity,
                "dispensed_quantity": item.dispensed_quantity,
                "instructions": item.instructions or None,
            }
            for item in prescription.items.all()
        ],
    }


def dispense_data(dispense: pharmacy_models.Dispense) -> RecordDispense:
    return {
        "id": str(dispense.id),
        "dispense_id": str(dispense.id),
        "dispense_number": dispense.dispense_number,
        "branch_id": str(dispense.branch_id),
        "prescription_id": str(dispense.prescription_id) if dispense.prescription_id else None,
        "created_at": _local(dispense.created_at, dispense.branch.time_zone),
        "lines": [
            {
                "drug": line.drug.code,
                "name": _drug_name(line.drug),
                "batch": line.batch.batch_number,
                "quantity": line.quantity,
                "returned_quantity": line.returned_quantity,
            }
            for line in dispense.lines.all()
        ],
    }


def lab_result_data(result: lab_models.LabResult) -> RecordLabResult:
    order, test, analyte = result.item.order, result.item.test, result.analyte
    return {
        "id": str(result.id),
        "result_id": str(result.id),
        "order_id": str(order.id),
        "order_number": order.order_number,
        "test": test.code,
        "test_name": test.name,
        "analyte": analyte.code if analyte else None,
        "analyte_name": analyte.name if analyte else None,
        "loinc_code": analyte.loinc_code if analyte else test.loinc_code,
        "status": result.status,
        "value_quantity": _plain(result.value_quantity),
        "value_text": result.value_text or None,
        "unit": result.unit or None,
        "flag": result.flag or None,
        "reference_low": _plain(result.reference_low),
        "reference_high": _plain(result.reference_high),
        "performed_at": _local(result.performed_at, order.branch.time_zone),
        "version": result.version,
    }


BUILDERS: dict[str, Any] = {
    "encounters": encounter_data,
    "diagnoses": diagnosis_data,
    "allergies": allergy_data,
    "medications": medication_data,
    "prescriptions": prescription_data,
    "dispenses": dispense_data,
    "results": lab_result_data,
}


def clinical_record_data(record: ClinicalRecord, *, page: int, per_page: int, next_url: Any) -> ClinicalRecordBody:
    """`next_url(section, page)` builds the absolute link of a section's next page."""
    patient = record.patient
    body: dict[str, Any] = {
        "patient": {
            "id": str(patient.id),
            "patient_id": patient.patient_id,
            "name": patient.name,
            "gender": patient.gender,
            "date_of_birth": patient.date_of_birth.isoformat(),
        }
    }
    for section, found in record.sections.items():
        body[section] = _section(section, found, page=page, per_page=per_page, next_url=next_url)
    return body  # type: ignore[return-value] # keys as ClinicalRecordBody declares them


def _section(section: str, found: SectionPage, *, page: int, per_page: int, next_url: Any) -> dict[str, Any]:
    more = page * per_page < found.total
    return {
        "total": found.total,
        "page": page,
        "per_page": per_page,
        "next": next_url(section, page + 1) if more else None,
        "items": [BUILDERS[section](row) for row in found.items],
    }
