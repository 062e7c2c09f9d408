"""Domain rows -> FHIR R4 resources (plain dicts, checked against the R4 models by integrations.fhir.r4).

One function per resource type, each taking the row its registry entry loads (with the related rows it
select_related). docs/fhir.md has the table of every mapping decision; the ones worth a comment are here.
"""

from __future__ import annotations

from datetime import date, datetime
from decimal import Decimal
from typing import Any
from zoneinfo import ZoneInfo

from django.conf import settings

from appointments.models import Appointment
from clinic.models import Branch, Doctor
from lab.models import LabOrderItem, LabResult, OrderStatus, TestKind
from patients.models import Allergy, Diagnosis, Patient, Visit
from pharmacy.models import DispenseLine, PrescriptionItem, PrescriptionStatus

ABHA_SYSTEM = "https://healthid.ndhm.gov.in"
V2_0203 = "http://terminology.hl7.org/CodeSystem/v2-0203"
V3_ACT_CODE = "http://terminology.hl7.org/CodeSystem/v3-ActCode"
INTERPRETATION = "http://terminology.hl7.org/CodeSystem/v3-ObservationInterpretation"
OBSERVATION_CATEGORY = "http://terminology.hl7.org/CodeSystem/observation-category"
CONDITION_CLINICAL = "http://terminology.hl7.org/CodeSystem/condition-clinical"
CONDITION_VERIFICATION = "http://terminology.hl7.org/CodeSystem/condition-ver-status"
CONDITION_CATEGORY = "http://terminology.hl7.org/CodeSystem/condition-category"
ALLERGY_CLINICAL = "http://terminology.hl7.org/CodeSystem/allergyintolerance-clinical"
ALLERGY_VERIFICATION = "http://terminology.hl7.org/CodeSystem/allergyintolerance-verification"
DIAGNOSTIC_SECTION = "http://terminology.hl7.org/CodeSystem/v2-0074"
ICD10 = "http://hl7.org/fhir/sid/icd-10"
LOINC = "http://loinc.org"
SNOMED = "http://snomed.info/sct"
UCUM = "http://unitsofmeasure.org"

INTERPRETATION_DISPLAY = {"N": "Normal", "L": "Low", "H": "High", "LL": "Critical low", "HH": "Critical high"}


def system(name: str) -> str:
    """Our own identifier systems: `<FHIR_IDENTIFIER_SYSTEM_BASE>/<name>` (patient-id, lab-order, ...)."""
    return f"{settings.FHIR_IDENTIFIER_SYSTEM_BASE}/{name}"


def _local(value: datetime, zone: str) -> str:
    return value.astimezone(ZoneInfo(zone)).isoformat()


def _joined(row: Any, column: str) -> Any:
    """A column its type's rows select from a small shared table (the doctor's name, the branch's name and
    time zone: integrations.fhir.registry), read off the row: a page of 1,000 appointments builds no doctor or
    branch objects, and fetches no second query to attach them."""
    return row.__dict__[column]


def _ref(resource_type: str, key: Any, display: str | None = None) -> dict[str, str]:
    reference = {"reference": f"{resource_type}/{key}"}
    if display:
        reference["display"] = display
    return reference


def _meta(updated: datetime | None) -> dict[str, str]:
    return {"lastUpdated": updated.astimezone(ZoneInfo("UTC")).isoformat()} if updated else {}


def _resource(resource_type: str, key: Any, updated: datetime | None = None) -> dict[str, Any]:
    resource: dict[str, Any] = {"resourceType": resource_type, "id": str(key)}
    meta = _meta(updated)
    if meta:
        resource["meta"] = meta
    return resource


def _concept(code: str, display: str, system_uri: str, text: str | None = None) -> dict[str, Any]:
    return {"coding": [{"system": system_uri, "code": code, "display": display}], "text": text or display}


def _quantity(value: Decimal, unit: str) -> dict[str, Any]:
    quantity: dict[str, Any] = {"value": _plain(value)}
    if unit:
        quantity.update(unit=unit, system=UCUM, code=unit)
    return quantity


def _plain(value: Decimal) -> Decimal:
    """13.5000 -> 13.5 and 100.0000 -> 100 (never 1E+2): FHIR decimals keep the precision sent."""
    value = value.normalize()
    exponent = value.as_tuple().exponent
    return value.quantize(Decimal(1)) if isinstance(exponent, int) and exponent > 0 else value


# --- Patient ------------------------------------------------------------------------------------------------


def abha_display(number: str) -> str:
    """14 digits as ABDM writes them: 91-1234-5678-9012."""
    return f"{number[:2]}-{number[2:6]}-{number[6:10]}-{number[10:]}"


def patient(row: Patient) -> dict[str, Any]:
    # Identifiers: our patient_id (MR) and the ABHA number under ABDM's system. The Aadhaar number is never
    # emitted, not even masked: a masked value identifies nobody and only leaks its last digits.
    identifiers: list[dict[str, Any]] = [
        {
            "use": "usual",
            "type": _concept("MR", "Medical record number", V2_0203),
            "system": system("patient-id"),
            "value": row.patient_id,
        }
    ]
    if row.national_health_id:
        identifiers.append(
            {
                "use": "official",
                # The namespace is the identifier's system, not a code system: the type is v2-0203's national
                # unique individual identifier (ABDM's FHIR profiles draw identifier types from v2-0203 too).
                "type": {
                    "coding": [{"system": V2_0203, "code": "NI", "display": "National unique individual identifier"}],
                    "text": "ABHA number",
                },
                "system": ABHA_SYSTEM,
                "value": abha_display(row.national_health_id),
            }
        )
    resource = _resource("Patient", row.id, row.updated_at)
    resource.update(
        identifier=identifiers,
        active=row.is_active,
        name=[{"use": "official", "text": row.name, "family": row.last_name, "given": [row.first_name]}],
        telecom=[{"system": "phone", "value": row.phone, "use": "mobile"}]
        + ([{"system": "email", "value": row.email}] if row.email else []),
        gender=row.gender,
        birthDate=row.date_of_birth.isoformat(),
    )
    address = _address(row.address_line1, row.address_city, row.address_state, row.address_pincode)
    if address:
        resource["address"] = [{"use": "home", **address}]
    resource["managingOrganization"] = _ref("Organization", row.registration_branch_id)
    if row.merged_into_id:
        resource["link"] = [{"other": _ref("Patient", row.merged_into_id), "type": "replaced-by"}]
    return resource


def _address(line: str, city: str, state: str, pincode: str) -> dict[str, Any]:
    # `state` is the canonical name from the closed list of states and union territories (clinic.states).
    parts: dict[str, Any] = {}
    if line:
        parts["line"] = [line]
    if city:
        parts["city"] = city
    if state:
        parts["state"] = state
    if pincode:
        parts["postalCode"] = pincode
    if parts:
        parts["country"] = "IN"
    return parts


# --- The organisation --------------------------------------------------------------------------------------


def practitioner(row: Doctor) -> dict[str, Any]:
    resource = _resource("Practitioner", row.id, row.updated_at)
    if row.registration_number:
        resource["identifier"] = [{"system": system("medical-registration"), "value": row.registration_number}]
    resource.update(active=row.is_active, name=[{"text": row.name}])
    return resource


def organization(row: Branch) -> dict[str, Any]:
    """A branch as the organisation that runs it (managingOrganization of its patients, serviceProvider of
    its encounters); the same branch is also a Location (below), with the same id."""
    resource = _resource("Organization", row.id, row.updated_at)
    resource.update(
        identifier=[{"system": system("branch"), "value": row.code}],
        active=row.is_active,
        type=[_concept("prov", "Healthcare Provider", "http://terminology.hl7.org/CodeSystem/organization-type")],
        name=row.name,
    )
    if row.phone:
        resource["telecom"] = [{"system": "phone", "value": row.phone, "use": "work"}]
    resource["address"] = [{"use": "work", **_address(row.address_line1, row.city, row.state, row.pincode)}]
    return resource


def location(row: Branch) -> dict[str, Any]:
    resource = _resource("Location", row.id, row.updated_at)
    resource.update(
        identifier=[{"system": system("branch"), "value": row.code}],
        status="active" if row.is_active else "inactive",
        name=row.name,
        mode="instance",
    )
    if row.phone:
        resource["telecom"] = [{"system": "phone", "value": row.phone, "use": "work"}]
    resource["address"] = {"use": "work", **_address(row.address_line1, row.city, row.state, row.pincode)}
    resource["managingOrganization"] = _ref("Organization", row.id)
    return resource


# --- Appointments ------------------------------------------------------------------------------------------

APPOINTMENT_STATUS = {
    Appointment.Status.BOOKED: "booked",
    Appointment.Status.CHECKED_IN: "checked-in",
    Appointment.Status.COMPLETED: "fulfilled",
    Appointment.Status.CANCELLED: "cancelled",
    Appointment.Status.NO_SHOW: "noshow",
}
APPOINTMENT_STATUS_SEARCH = {fhir: ours for ours, fhir in APPOINTMENT_STATUS.items()}


VISIT_TYPE_TEXT = dict(Appointment.VisitType.choices)


def appointment(row: Appointment) -> dict[str, Any]:
    zone = _joined(row, "branch_time_zone")
    resource = _resource("Appointment", row.id, row.updated_at)
    resource.update(
        status=APPOINTMENT_STATUS[Appointment.Status(row.status)],
        appointmentType={"text": VISIT_TYPE_TEXT.get(row.visit_type, row.visit_type)},
        start=_local(row.slot_start, zone),
        end=_local(row.slot_end, zone),
        minutesDuration=int((row.slot_end - row.slot_start).total_seconds() // 60),
        created=_local(row.created_at, zone),
    )
    if row.status == Appointment.Status.CANCELLED and row.cancellation_reason:
        resource["cancelationReason"] = {"text": row.cancellation_reason}
    if row.notes:
        resource["comment"] = row.notes
    # Participants: the patient and the doctor have accepted a booked slot; the branch is where it happens.
    resource["participant"] = [
        {"actor": _ref("Patient", row.patient_id), "required": "required", "status": "accepted"},
        {
            "actor": _ref("Practitioner", row.doctor_id, _joined(row, "doctor_name")),
            "required": "required",
            "status": "accepted",
        },
        {
            "actor": _ref("Location", row.branch_id, _joined(row, "branch_name")),
            "required": "required",
            "status": "accepted",
        },
    ]
    return resource


# --- Encounters, conditions, allergies ------------------------------------------------------------------------


def encounter(row: Visit) -> dict[str, Any]:
    zone = _joined(row, "branch_time_zone")
    inpatient = row.type == Visit.Type.INPATIENT
    # An outpatient visit is recorded once it has happened: finished. An inpatient stay is in progress
    # until it has an end.
    resource = _resource("Encounter", row.id, row.updated_at)
    resource.update(
        status="finished" if (row.end or not inpatient) else "in-progress",
        **{
            "class": {
                "system": V3_ACT_CODE,
                "code": "IMP" if inpatient else "AMB",
                "display": "inpatient encounter" if inpatient else "ambulatory",
            }
        },
    )
    if row.department_id is not None:
        resource["serviceType"] = {"text": _joined(row, "department_name")}
    resource["subject"] = _ref("Patient", row.patient_id)
    if row.doctor_id is not None:
        resource["participant"] = [{"individual": _ref("Practitioner", row.doctor_id, _joined(row, "doctor_name"))}]
    period = {"start": _local(row.start, zone)}
    if row.end:
        period["end"] = _local(row.end, zone)
    resource["period"] = period
    if row.reason:
        resource["reasonCode"] = [{"text": row.reason}]
    resource["location"] = [{"location": _ref("Location", row.branch_id, _joined(row, "branch_name"))}]
    resource["serviceProvider"] = _ref("Organization", row.branch_id)
    return resource


def condition(row: Diagnosis) -> dict[str, Any]:
    resource = _resource("Condition", row.id, row.updated_at)
    code_system = ICD10 if row.system.upper().replace("-", "") == "ICD10" else system(f"code/{row.system}")
    resource.update(
        clinicalStatus=_concept(row.status, row.get_status_display(), CONDITION_CLINICAL),
        verificationStatus=_concept("confirmed", "Confirmed", CONDITION_VERIFICATION),
        category=[_concept("problem-list-item", "Problem List Item", CONDITION_CATEGORY)],
        code={
            "coding": [{"system": code_system, "code": row.code, "display": row.description}],
            "text": row.description,
        },
        subject=_ref("Patient", row.patient_id),
    )
    if row.onset_date:
        resource["onsetDateTime"] = row.onset_date.isoformat()
    resource["recordedDate"] = row.created_at.astimezone(ZoneInfo("UTC")).isoformat()
    return resource


_CRITICALITY = {"mild": "low", "moderate": "low", "severe": "high"}


def allergy_intolerance(row: Allergy) -> dict[str, Any]:
    resource = _resource("AllergyIntolerance", row.id, row.updated_at)
    resource.update(
        clinicalStatus=_concept("active", "Active", ALLERGY_CLINICAL),
        verificationStatus=_concept("confirmed", "Confirmed", ALLERGY_VERIFICATION),
        criticality=_CRITICALITY[row.severity],
        code={"text": row.substance},
        patient=_ref("Patient", row.patient_id),
        recordedDate=row.created_at.astimezone(ZoneInfo("UTC")).isoformat(),
    )
    # reaction.manifestation is required (1..*): without a recorded reaction, the severity stays in
    # criticality alone.
    if row.reaction:
        resource["reaction"] = [{"manifestation": [{"text": row.reaction}], "severity": row.severity}]
    return resource


# --- Pharmacy ---------------------------------------------------------------------------------------------

MEDICATION_REQUEST_STATUS = {
    PrescriptionStatus.ACTIVE: "active",
    PrescriptionStatus.COMPLETED: "completed",
    PrescriptionStatus.CANCELLED: "cancelled",
}
MEDICATION_REQUEST_STATUS_SEARCH = {fhir: ours for ours, fhir in MEDICATION_REQUEST_STATUS.items()}


def _medication(drug: Any) -> dict[str, Any]:
    text = f"{drug.generic_name} {drug.strength}" + (f" ({drug.brand_name})" if drug.brand_name else "")
    return {
        "coding": [{"system": system("drug"), "code": drug.code, "display": f"{drug.generic_name} {drug.strength}"}],
        "text": text,
    }


def medication_request(row: PrescriptionItem) -> dict[str, Any]:
    """One prescription item: a prescription of three drugs is three MedicationRequests that share the
    prescription number as groupIdentifier."""
    prescription = row.prescription
    zone = prescription.branch.time_zone
    resource = _resource("MedicationRequest", row.id, prescription.updated_at)
    resource.update(
        identifier=[
            {"system": system("prescription-item"), "value": f"{prescription.prescription_number}/{row.position + 1}"}
        ],
        status=MEDICATION_REQUEST_STATUS[PrescriptionStatus(prescription.status)],
        intent="order",
        medicationCodeableConcept=_medication(row.drug),
        subject=_ref("Patient", prescription.patient_id),
        authoredOn=_local(prescription.created_at, zone),
        requester=_ref("Practitioner", prescription.doctor_id, prescription.doctor.name),
        groupIdentifier={"system": system("prescription"), "value": prescription.prescription_number},
    )
    dosage: dict[str, Any] = {
        "text": f"{row.dose}, {row.frequency}, {row.route}, for {row.duration_days} days",
        "route": {"text": row.route},
    }
    if row.instructions:
        dosage["patientInstruction"] = row.instructions
    resource["dosageInstruction"] = [dosage]
    resource["dispenseRequest"] = {
        "quantity": {"value": row.quantity, "unit": row.drug.unit},
        "expectedSupplyDuration": {"value": row.duration_days, "unit": "days", "system": UCUM, "code": "d"},
    }
    return resource


def medication_dispense(row: DispenseLine) -> dict[str, Any]:
    """One dispense line (one batch of one drug)."""
    dispense = row.dispense
    zone = dispense.branch.time_zone
    resource = _resource("MedicationDispense", row.id, dispense.updated_at)
    resource.update(
        identifier=[{"system": system("dispense"), "value": f"{dispense.dispense_number}/{row.position + 1}"}],
        status="completed",
        medicationCodeableConcept=_medication(row.drug),
        subject=_ref("Patient", dispense.patient_id),
        location=_ref("Location", dispense.branch_id),
        quantity={"value": row.quantity, "unit": row.drug.unit},
        whenHandedOver=_local(dispense.created_at, zone),
    )
    if row.prescription_item_id:
        resource["authorizingPrescription"] = [_ref("MedicationRequest", row.prescription_item_id)]
    if row.returned_quantity:
        resource["note"] = [{"text": f"{row.returned_quantity} {row.drug.unit} returned."}]
    return resource


# --- Laboratory and imaging -------------------------------------------------------------------------------

_ITEM_DONE = {"resulted", "final", "completed"}


def service_request_status(item: LabOrderItem) -> str:
    if item.order.status == OrderStatus.CANCELLED or item.status == "cancelled":
        return "revoked"
    return "completed" if item.status in _ITEM_DONE else "active"


def _test_category(kind: str) -> dict[str, Any]:
    if kind == TestKind.IMAGING:
        return _concept("363679005", "Imaging", SNOMED)
    return _concept("108252007", "Laboratory procedure", SNOMED)


def service_request(row: LabOrderItem) -> dict[str, Any]:
    order, test = row.order, row.test
    zone = order.branch.time_zone
    resource = _resource("ServiceRequest", row.id, order.updated_at)
    resource.update(
        identifier=[{"system": system("accession"), "value": row.accession_number}],
        requisition={"system": system("lab-order"), "value": order.order_number},
        status=service_request_status(row),
        intent="order",
        category=[_test_category(test.kind)],
        priority=order.priority,
        code={"coding": [{"system": LOINC, "code": test.loinc_code, "display": test.name}], "text": test.name},
        subject=_ref("Patient", order.patient_id),
        authoredOn=_local(order.created_at, zone),
        requester=_ref("Practitioner", order.doctor_id, order.doctor.name),
        locationReference=[_ref("Location", order.branch_id)],
    )
    if order.clinical_notes:
        resource["note"] = [{"text": order.clinical_notes}]
    return resource


def observation(row: LabResult) -> dict[str, Any]:
    """The current version of one analyte's result. An imaging report (no analyte) is no Observation: it is
    the DiagnosticReport's conclusion."""
    item, analyte = row.item, row.analyte
    assert analyte is not None  # the registry loads analyte results only
    zone = item.order.branch.time_zone
    resource = _resource("Observation", row.id, row.recorded_at)
    resource.update(
        identifier=[{"system": system("lab-result"), "value": f"{item.accession_number}/{analyte.code}"}],
        basedOn=[_ref("ServiceRequest", item.id)],
        status=row.status,  # preliminary | final | amended: R4 ObservationStatus codes as they are
        category=[_concept("laboratory", "Laboratory", OBSERVATION_CATEGORY)],
        code={"coding": [{"system": LOINC, "code": analyte.loinc_code, "display": analyte.name}], "text": analyte.name},
        subject=_ref("Patient", item.order.patient_id),
        effectiveDateTime=_local(row.performed_at, zone),
        issued=row.recorded_at.astimezone(ZoneInfo("UTC")).isoformat(),
        performer=[{"display": row.performer}],
    )
    if row.value_quantity is not None and row.value_quantity_high is not None:
        # An HL7 SN range (10-20, docs/hl7-inbound.md) is a Range, not a Quantity.
        resource["valueRange"] = {
            "low": _quantity(row.value_quantity, row.unit),
            "high": _quantity(row.value_quantity_high, row.unit),
        }
    elif row.value_quantity is not None:
        resource["valueQuantity"] = _quantity(row.value_quantity, row.unit)
        if row.comparator:
            resource["valueQuantity"]["comparator"] = row.comparator  # `>14` as the laboratory reported it
    else:
        resource["valueString"] = row.value_text
    if row.flag:
        resource["interpretation"] = [
            {"coding": [{"system": INTERPRETATION, "code": row.flag, "display": INTERPRETATION_DISPLAY[row.flag]}]}
        ]
    if row.note or row.reason:
        resource["note"] = [{"text": text} for text in (row.note, row.reason) if text]
    if row.reference_low is not None or row.reference_high is not None or row.reported_range:
        bounds: dict[str, Any] = {}
        if row.reference_low is not None:
            bounds["low"] = _quantity(row.reference_low, row.unit)
        if row.reference_high is not None:
            bounds["high"] = _quantity(row.reference_high, row.unit)
        if row.reported_range:
            bounds["text"] = row.reported_range  # the performing laboratory's own range (OBX-7), as it wrote it
        resource["referenceRange"] = [bounds]
    return resource


def diagnostic_report(row: LabOrderItem) -> dict[str, Any]:
    """A resulted order item: its analytes' Observations, or an imaging report's text as the conclusion.
    The registry loads the item with its current results (prefetched as `current_results`)."""
    order, test = row.order, row.test
    zone = order.branch.time_zone
    results: list[LabResult] = list(getattr(row, "current_results", []))
    statuses = {result.status for result in results}
    if "amended" in statuses:
        status = "amended"
    elif row.status in {"final", "completed"}:
        status = "final"
    else:
        status = "partial" if results else "registered"
    latest = max((result.performed_at for result in results), default=order.created_at)
    issued = max((result.recorded_at for result in results), default=order.updated_at)
    resource = _resource("DiagnosticReport", row.id, issued)
    resource.update(
        identifier=[{"system": system("accession"), "value": row.accession_number}],
        basedOn=[_ref("ServiceRequest", row.id)],
        status=status,
        category=[
            _concept("RAD", "Radiology", DIAGNOSTIC_SECTION)
            if test.kind == TestKind.IMAGING
            else _concept("LAB", "Laboratory", DIAGNOSTIC_SECTION)
        ],
        code={"coding": [{"system": LOINC, "code": test.loinc_code, "display": test.name}], "text": test.name},
        subject=_ref("Patient", order.patient_id),
        effectiveDateTime=_local(latest, zone),
        issued=issued.astimezone(ZoneInfo("UTC")).isoformat(),
    )
    observations = [_ref("Observation", result.id) for result in results if result.analyte_id]
    if observations:
        resource["result"] = observations
    report = next((result.value_text for result in results if result.analyte_id is None), None)
    if report:
        resource["conclusion"] = report
    return resource


def iso_date(value: date) -> str:
    return value.isoformat()
