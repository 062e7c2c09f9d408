"""The resource types the server serves (docs/api-rules.md §15): for each, the scope a token needs, its
visible rows (the owning app's selector, so a branch-restricted client sees what the REST API shows it and
nothing more), the mapping, the search parameters, the sort keys and the patient each row is about (for
the audit row and the Patient compartment of $everything and $export)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.db.models import F, Q, QuerySet

from appointments.selectors import AppointmentFilter, appointment_condition, visible_appointments
from clinic.models import Branch
from clinic.selectors import (
    BranchFilter,
    DoctorFilter,
    branch_condition,
    branch_list,
    doctor_condition,
    visible_doctors,
)
from integrations.fhir import mapping
from integrations.fhir.search import (
    SearchParam,
    code_where,
    date_where,
    id_where,
    reference_where,
    token_parts,
)
from integrations.models import ApiClient
from lab.selectors import (
    ItemFilter,
    ResultFilter,
    lab_item_condition,
    lab_result_condition,
    visible_lab_items,
    visible_lab_observations,
    visible_lab_reports,
)
from patients.identifiers import normalise_abha, normalise_patient_ref
from patients.selectors import (
    AllergyFilter,
    DiagnosisFilter,
    PatientFilter,
    VisitFilter,
    allergy_condition,
    diagnosis_condition,
    patient_condition,
    visible_allergies,
    visible_diagnoses,
    visible_patients,
    visible_visits,
    visit_condition,
)
from pharmacy.selectors import (
    DispenseLineFilter,
    PrescriptionItemFilter,
    dispense_line_condition,
    prescription_item_condition,
    visible_dispense_lines,
    visible_prescription_items,
)

GENDER_SYSTEM = "http://hl7.org/fhir/administrative-gender"
# The clinical record's scope reads its lab, imaging and medication sections, in FHIR as in
# /patients/{id}/record, beside lab:read and pharmacy:read (docs/fhir.md section 1).
CLINICAL_RECORD = "emr:read"


# The doctor's and department's names and the branch's name and zone are columns of the rows of the busiest
# types, read by the mapping as such (mapping._joined): joined in SQL (tables of a few hundred rows), they
# cost a text column each, where attaching doctor and branch objects to each of a $everything page's 1,000
# rows was a third of its CPU. Columns the mapping never reads are not loaded (timestamps cost the most).
_BRANCH_COLUMNS = {"branch_name": F("branch__name"), "branch_time_zone": F("branch__time_zone")}
_APPOINTMENT_UNMAPPED = ("local_date", "token_number", "checked_in_at", "completed_at", "cancelled_at", "version")
_VISIT_UNMAPPED = ("created_at", "entered_in_error_at", "entered_in_error_by", "entered_in_error_reason")

# Each type's rows join what is the row's own (an Observation's order item and order) and prefetch what many
# rows share (branches, doctors, departments, tests, analytes, drugs: a few rows each, fetched once per page
# or export chunk): a 500-visit $everything joined the same branch and doctor into a thousand rows, and
# spent more time parsing their copies' timestamps than mapping the resources.


@dataclass(frozen=True)
class ResourceType:
    name: str
    scope: str
    rows: Callable[[ApiClient], QuerySet[Any]]  # visible rows, with what the mapping reads
    to_fhir: Callable[[Any], dict[str, Any]]
    order: tuple[str, ...]  # the default order, ending with a tiebreak on the primary key
    params: dict[str, SearchParam] = field(default_factory=dict)
    sorts: dict[str, str] = field(default_factory=dict)  # _sort name -> column
    patient_field: str | None = None  # the row's patient id, for the audit and the compartment
    includes: tuple[str, ...] = ()
    updated_field: str = "updated_at"  # what _lastUpdated and _since compare (the resource's meta.lastUpdated)
    # The date of care $everything's start and end window (None: always in it, as the Patient itself).
    clinical_date: str | None = None
    clinical_date_only: bool = False  # a date column, not a timestamp
    also_read_with: tuple[str, ...] = ()  # scopes that read the type besides its own (docs/fhir.md section 1)

    @property
    def scopes(self) -> tuple[str, ...]:
        """Any one of these reads the type."""
        return (self.scope, *self.also_read_with)


# --- Patient -------------------------------------------------------------------------------------------------


# The record's types' parameters are the patients app's named filters (patients.selectors PatientFilter,
# VisitFilter, DiagnosisFilter, AllergyFilter), turned into conditions by its selectors.


def _patients(**asked: Any) -> Q:
    return patient_condition(PatientFilter(**asked))


def _identifier(raw: str, name: str) -> Q:
    """ABHA under ABDM's system (hyphens allowed), our patient_id under ours (case and hyphens ignored, by
    the patient_id_normalised index), or either without a system; `system|` every patient with an
    identifier in that system; `|value` nobody (every identifier we emit has a system). A malformed value
    matches nobody."""
    system, value = token_parts(name, raw)
    if system == "":
        return Q(pk__in=[])
    if system == mapping.ABHA_SYSTEM and not value:
        return _patients(has_abha=True)
    if system == mapping.system("patient-id") and not value:
        return Q()
    wanted = Q(pk__in=[])
    if system in (None, mapping.ABHA_SYSTEM):
        with contextlib.suppress(ValueError):
            wanted |= _patients(abha_numbers=(normalise_abha(value),))
    if system in (None, mapping.system("patient-id")):
        wanted |= _patients(patient_refs=(normalise_patient_ref(value),))
    return wanted


def _phone(raw: str, name: str) -> Q:
    # The digits' tail, as the REST search (the patient_phone_tail index); fewer than 4 digits match nobody.
    digits = "".join(ch for ch in raw if "0" <= ch <= "9")
    return _patients(phone_tails=(digits,)) if len(digits) >= 4 else Q(pk__in=[])


PATIENT = ResourceType(
    name="Patient",
    scope="patients:read",
    rows=lambda client: visible_patients(client),
    to_fhir=mapping.patient,
    order=("-registered_at", "id"),
    params={
        "_id": SearchParam(id_where(lambda key: _patients(ids=(key,))), "token", "The resource id."),
        "identifier": SearchParam(
            _identifier, "token", f"{mapping.ABHA_SYSTEM}|<ABHA number> or <our system>|<patient_id>."
        ),
        "name": SearchParam(
            lambda raw, name: _patients(name_starts=(raw,)),
            "string",
            "A name part starting with the value (case ignored).",
        ),
        "name:contains": SearchParam(
            lambda raw, name: _patients(name_contains=(raw,)), "string", "Any part of the name."
        ),
        "name:exact": SearchParam(
            lambda raw, name: _patients(name_exact=(raw,)), "string", "The given or family name exactly."
        ),
        "birthdate": SearchParam(
            date_where(lambda span: _patients(born=(span,)), date_only=True), "date", "Date of birth."
        ),
        "gender": SearchParam(
            code_where(lambda gender: _patients(genders=(gender,)), (GENDER_SYSTEM,)),
            "token",
            "male | female | other | unknown",
        ),
        "phone": SearchParam(_phone, "token", "The phone number or its last 4+ digits."),
        "_lastUpdated": SearchParam(
            date_where(lambda span: _patients(updated=(span,))), "date", "When last updated (meta.lastUpdated)."
        ),
    },
    sorts={"birthdate": "date_of_birth", "_lastUpdated": "updated_at", "name": "search_name"},
    patient_field="id",
)

# --- The organisation -------------------------------------------------------------------------------------


PRACTITIONER = ResourceType(
    name="Practitioner",
    scope="appointments:read",
    rows=lambda client: visible_doctors(client),
    to_fhir=mapping.practitioner,
    order=("name", "id"),
    params={
        "_id": SearchParam(
            id_where(lambda key: doctor_condition(DoctorFilter(ids=(key,)))), "token", "The resource id."
        ),
        "name": SearchParam(
            lambda raw, name: doctor_condition(DoctorFilter(name_contains=(raw,))), "string", "Part of the name."
        ),
    },
    sorts={"name": "name"},
)


def _branch_identifier(raw: str, name: str) -> Q:
    system, code = token_parts(name, raw)
    if system is not None and system != mapping.system("branch"):
        return Q(pk__in=[])  # `|code` too: the branch code is always emitted under our system
    return branch_condition(BranchFilter(codes=(code,))) if code else Q()


def _branches(client: ApiClient) -> QuerySet[Branch]:
    return branch_list(client=client)


_BRANCH_PARAMS = {
    "_id": SearchParam(id_where(lambda key: branch_condition(BranchFilter(ids=(key,)))), "token", "The resource id."),
    "name": SearchParam(
        lambda raw, name: branch_condition(BranchFilter(name_contains=(raw,))), "string", "Part of the branch's name."
    ),
    "identifier": SearchParam(_branch_identifier, "token", "The branch code (BLR)."),
    "address-state": SearchParam(
        lambda raw, name: branch_condition(BranchFilter(states=(raw,))), "string", "The state's name."
    ),
}
ORGANIZATION = ResourceType(
    name="Organization",
    scope="appointments:read",
    rows=_branches,
    to_fhir=mapping.organization,
    order=("code", "id"),
    params=_BRANCH_PARAMS,
    sorts={"name": "name"},
)
LOCATION = ResourceType(
    name="Location",
    scope="appointments:read",
    rows=_branches,
    to_fhir=mapping.location,
    order=("code", "id"),
    params=_BRANCH_PARAMS,
    sorts={"name": "name"},
)

# --- Appointments -------------------------------------------------------------------------------------------

# Appointment's parameters are the appointments app's named filter (appointments.selectors.AppointmentFilter).


def _appointments(**asked: Any) -> Q:
    return appointment_condition(AppointmentFilter(**asked))


APPOINTMENT = ResourceType(
    name="Appointment",
    scope="appointments:read",
    rows=lambda client: (
        visible_appointments(client)
        .select_related(None)
        .defer(*_APPOINTMENT_UNMAPPED)
        .annotate(doctor_name=F("doctor__name"), **_BRANCH_COLUMNS)
    ),
    to_fhir=mapping.appointment,
    order=("slot_start", "id"),
    params={
        "_id": SearchParam(id_where(lambda key: _appointments(ids=(key,))), "token", "The resource id."),
        "patient": SearchParam(
            reference_where("Patient", lambda key: _appointments(patient_ids=(key,))),
            "reference",
            "The patient: Patient/<id>.",
        ),
        "practitioner": SearchParam(
            reference_where("Practitioner", lambda key: _appointments(doctor_ids=(key,))),
            "reference",
            "The doctor: Practitioner/<id>.",
        ),
        "location": SearchParam(
            reference_where("Location", lambda key: _appointments(branch_ids=(key,))),
            "reference",
            "The branch: Location/<id>.",
        ),
        "date": SearchParam(date_where(lambda span: _appointments(starts=(span,))), "date", "The start."),
        "status": SearchParam(
            code_where(
                lambda status: _appointments(statuses=(status,)),
                ("http://hl7.org/fhir/appointmentstatus",),
                mapping.APPOINTMENT_STATUS_SEARCH,
            ),
            "token",
            "booked | checked-in | fulfilled | cancelled | noshow",
        ),
        "_lastUpdated": SearchParam(
            date_where(lambda span: _appointments(updated=(span,))), "date", "When last updated (meta.lastUpdated)."
        ),
    },
    sorts={"date": "slot_start"},
    patient_field="patient_id",
    includes=("Appointment:patient",),
    clinical_date="slot_start",
)

# --- Clinical ------------------------------------------------------------------------------------------------

ENCOUNTER = ResourceType(
    name="Encounter",
    scope="emr:read",
    rows=lambda client: (
        visible_visits(client)
        .select_related(None)
        .defer(*_VISIT_UNMAPPED)
        .annotate(doctor_name=F("doctor__name"), department_name=F("department__name"), **_BRANCH_COLUMNS)
    ),
    to_fhir=mapping.encounter,
    order=("-start", "id"),
    params={
        "_id": SearchParam(id_where(lambda key: _visits(ids=(key,))), "token", "The resource id."),
        "patient": SearchParam(
            reference_where("Patient", lambda key: _visits(patient_ids=(key,))), "reference", "Patient/<id>."
        ),
        "subject": SearchParam(
            reference_where("Patient", lambda key: _visits(patient_ids=(key,))), "reference", "Patient/<id>."
        ),
        "date": SearchParam(date_where(lambda span: _visits(started=(span,))), "date", "The visit's start."),
        "class": SearchParam(
            code_where(
                lambda kind: _visits(types=(kind,)), (mapping.V3_ACT_CODE,), {"AMB": "outpatient", "IMP": "inpatient"}
            ),
            "token",
            "AMB (outpatient) | IMP (inpatient)",
        ),
        "practitioner": SearchParam(
            reference_where("Practitioner", lambda key: _visits(doctor_ids=(key,))), "reference", "Practitioner/<id>."
        ),
        "_lastUpdated": SearchParam(
            date_where(lambda span: _visits(updated=(span,))), "date", "When last updated (meta.lastUpdated)."
        ),
    },
    sorts={"date": "start"},
    patient_field="patient_id",
    clinical_date="start",
)


def _visits(**asked: Any) -> Q:
    return visit_condition(VisitFilter(**asked))


def _diagnoses(**asked: Any) -> Q:
    return diagnosis_condition(DiagnosisFilter(**asked))


def _allergies(**asked: Any) -> Q:
    return allergy_condition(AllergyFilter(**asked))


def _condition_code(raw: str, name: str) -> Q:
    """The diagnosis code under the system the mapping emits: ICD-10's for ICD-10 rows (however the row
    spells "ICD-10"), `<our base>/code/<system>` for any other system; `|code` nothing (always a system)."""
    system, code = token_parts(name, raw)
    ours = mapping.system("code/")
    codes = (code,) if code else None
    if system is None:
        return _diagnoses(codes=codes)
    if system == mapping.ICD10:
        return _diagnoses(icd10=True, codes=codes)
    if system.startswith(ours) and system != ours:
        return _diagnoses(icd10=False, systems=(system.removeprefix(ours),), codes=codes)
    return Q(pk__in=[])


CONDITION = ResourceType(
    name="Condition",
    scope="emr:read",
    rows=lambda client: visible_diagnoses(client),
    to_fhir=mapping.condition,
    order=("-onset_date", "id"),
    params={
        "_id": SearchParam(id_where(lambda key: _diagnoses(ids=(key,))), "token", "The resource id."),
        "patient": SearchParam(
            reference_where("Patient", lambda key: _diagnoses(patient_ids=(key,))), "reference", "Patient/<id>."
        ),
        "subject": SearchParam(
            reference_where("Patient", lambda key: _diagnoses(patient_ids=(key,))), "reference", "Patient/<id>."
        ),
        "clinical-status": SearchParam(
            code_where(lambda status: _diagnoses(statuses=(status,)), (mapping.CONDITION_CLINICAL,)),
            "token",
            "active | resolved | inactive",
        ),
        "code": SearchParam(_condition_code, "token", "The ICD-10 code (E11.9), with or without its system."),
        "onset-date": SearchParam(
            date_where(lambda span: _diagnoses(onset=(span,)), date_only=True), "date", "The onset date."
        ),
        "_lastUpdated": SearchParam(
            date_where(lambda span: _diagnoses(updated=(span,))), "date", "When last updated (meta.lastUpdated)."
        ),
    },
    sorts={"onset-date": "onset_date", "recorded-date": "created_at"},
    patient_field="patient_id",
    clinical_date="onset_date",
    clinical_date_only=True,
)
ALLERGY = ResourceType(
    name="AllergyIntolerance",
    scope="emr:read",
    rows=lambda client: visible_allergies(client),
    to_fhir=mapping.allergy_intolerance,
    order=("substance", "id"),
    params={
        "_id": SearchParam(id_where(lambda key: _allergies(ids=(key,))), "token", "The resource id."),
        "patient": SearchParam(
            reference_where("Patient", lambda key: _allergies(patient_ids=(key,))), "reference", "Patient/<id>."
        ),
        "_lastUpdated": SearchParam(
            date_where(lambda span: _allergies(updated=(span,))), "date", "When last updated (meta.lastUpdated)."
        ),
    },
    sorts={"date": "created_at"},
    patient_field="patient_id",
    clinical_date="created_at",
)

# --- Pharmacy ------------------------------------------------------------------------------------------------

# The pharmacy types' parameters are the pharmacy app's named filters (pharmacy.selectors
# PrescriptionItemFilter, DispenseLineFilter), turned into conditions by its selectors.


def _prescribed(**asked: Any) -> Q:
    return prescription_item_condition(PrescriptionItemFilter(**asked))


def _dispensed(**asked: Any) -> Q:
    return dispense_line_condition(DispenseLineFilter(**asked))


MEDICATION_REQUEST = ResourceType(
    name="MedicationRequest",
    scope="pharmacy:read",
    also_read_with=(CLINICAL_RECORD,),
    rows=lambda client: (
        visible_prescription_items(client)
        .select_related("prescription")
        .prefetch_related("drug", "prescription__branch", "prescription__doctor")
    ),
    to_fhir=mapping.medication_request,
    order=("-prescription__created_at", "prescription_id", "position", "id"),
    params={
        "_id": SearchParam(id_where(lambda key: _prescribed(ids=(key,))), "token", "The resource id."),
        "patient": SearchParam(
            reference_where("Patient", lambda key: _prescribed(patient_ids=(key,))), "reference", "Patient/<id>."
        ),
        "subject": SearchParam(
            reference_where("Patient", lambda key: _prescribed(patient_ids=(key,))), "reference", "Patient/<id>."
        ),
        "status": SearchParam(
            code_where(
                lambda status: _prescribed(statuses=(status,)),
                ("http://hl7.org/fhir/CodeSystem/medicationrequest-status",),
                mapping.MEDICATION_REQUEST_STATUS_SEARCH,
            ),
            "token",
            "active | completed | cancelled",
        ),
        "authoredon": SearchParam(date_where(lambda span: _prescribed(prescribed=(span,))), "date", "When prescribed."),
        "code": SearchParam(
            code_where(lambda code: _prescribed(drug_codes=(code,)), (mapping.system("drug"),)),
            "token",
            "The drug's code.",
        ),
        "requester": SearchParam(
            reference_where("Practitioner", lambda key: _prescribed(doctor_ids=(key,))),
            "reference",
            "Practitioner/<id>.",
        ),
        "_lastUpdated": SearchParam(
            date_where(lambda span: _prescribed(updated=(span,))), "date", "When last updated (meta.lastUpdated)."
        ),
    },
    sorts={"authoredon": "prescription__created_at"},
    patient_field="prescription__patient_id",
    updated_field="prescription__updated_at",
    clinical_date="prescription__created_at",
)
MEDICATION_DISPENSE = ResourceType(
    name="MedicationDispense",
    scope="pharmacy:read",
    also_read_with=(CLINICAL_RECORD,),
    rows=lambda client: (
        visible_dispense_lines(client).select_related("dispense").prefetch_related("drug", "dispense__branch")
    ),
    to_fhir=mapping.medication_dispense,
    order=("-dispense__created_at", "dispense_id", "position", "id"),
    params={
        "_id": SearchParam(id_where(lambda key: _dispensed(ids=(key,))), "token", "The resource id."),
        "patient": SearchParam(
            reference_where("Patient", lambda key: _dispensed(patient_ids=(key,))), "reference", "Patient/<id>."
        ),
        "subject": SearchParam(
            reference_where("Patient", lambda key: _dispensed(patient_ids=(key,))), "reference", "Patient/<id>."
        ),
        "prescription": SearchParam(
            reference_where("MedicationRequest", lambda key: _dispensed(prescription_item_ids=(key,))),
            "reference",
            "MedicationRequest/<id>.",
        ),
        "whenhandedover": SearchParam(
            date_where(lambda span: _dispensed(handed_over=(span,))), "date", "When handed over."
        ),
        "code": SearchParam(
            code_where(lambda code: _dispensed(drug_codes=(code,)), (mapping.system("drug"),)),
            "token",
            "The drug's code.",
        ),
        "_lastUpdated": SearchParam(
            date_where(lambda span: _dispensed(updated=(span,))), "date", "When last updated (meta.lastUpdated)."
        ),
    },
    sorts={"whenhandedover": "dispense__created_at"},
    patient_field="dispense__patient_id",
    updated_field="dispense__updated_at",
    clinical_date="dispense__created_at",
)

# --- Laboratory and imaging ----------------------------------------------------------------------------------

# The lab types' parameters are the lab app's named filters (lab.selectors.ResultFilter, ItemFilter): the
# app's selectors turn them into conditions on its own rows, so no lab column is named here.


def _results(**asked: Any) -> Q:
    return lab_result_condition(ResultFilter(**asked))


def _items(**asked: Any) -> Q:
    return lab_item_condition(ItemFilter(**asked))


def _service_request_status(raw: str, name: str) -> Q:
    system, code = token_parts(name, raw)
    if system is not None and system != "http://hl7.org/fhir/request-status":
        return Q(pk__in=[])
    return _items(states=(code,)) if code else Q()


_ITEM_PARAMS = {
    "_id": SearchParam(id_where(lambda key: _items(ids=(key,))), "token", "The resource id."),
    "patient": SearchParam(
        reference_where("Patient", lambda key: _items(patient_ids=(key,))), "reference", "The patient: Patient/<id>."
    ),
    "subject": SearchParam(
        reference_where("Patient", lambda key: _items(patient_ids=(key,))), "reference", "Patient/<id>."
    ),
    "code": SearchParam(
        code_where(lambda code: _items(loinc_codes=(code,)), (mapping.LOINC,)), "token", "The test's LOINC code."
    ),
    "_lastUpdated": SearchParam(
        date_where(lambda span: _items(order_updated=(span,))), "date", "When last updated (meta.lastUpdated)."
    ),
}
SERVICE_REQUEST = ResourceType(
    name="ServiceRequest",
    scope="lab:read",
    also_read_with=(CLINICAL_RECORD,),
    rows=lambda client: (
        visible_lab_items(client).select_related("order").prefetch_related("test", "order__branch", "order__doctor")
    ),
    to_fhir=mapping.service_request,
    order=("-order__created_at", "order_id", "position", "id"),
    params={
        **_ITEM_PARAMS,
        "status": SearchParam(_service_request_status, "token", "active | completed | revoked"),
        "authored": SearchParam(date_where(lambda span: _items(ordered=(span,))), "date", "When ordered."),
    },
    sorts={"authored": "order__created_at"},
    patient_field="order__patient_id",
    updated_field="order__updated_at",
    clinical_date="order__created_at",
)


OBSERVATION = ResourceType(
    name="Observation",
    scope="lab:read",
    also_read_with=(CLINICAL_RECORD,),
    rows=visible_lab_observations,
    to_fhir=mapping.observation,
    order=("-performed_at", "id"),
    params={
        "_id": SearchParam(id_where(lambda key: _results(ids=(key,))), "token", "The resource id."),
        "patient": SearchParam(
            reference_where("Patient", lambda key: _results(patient_ids=(key,))), "reference", "Patient/<id>."
        ),
        "subject": SearchParam(
            reference_where("Patient", lambda key: _results(patient_ids=(key,))), "reference", "Patient/<id>."
        ),
        "code": SearchParam(
            code_where(lambda code: _results(loinc_codes=(code,)), (mapping.LOINC,)), "token", "The LOINC code (718-7)."
        ),
        "date": SearchParam(date_where(lambda span: _results(performed=(span,))), "date", "When performed."),
        "status": SearchParam(
            code_where(lambda code: _results(statuses=(code,)), ("http://hl7.org/fhir/observation-status",)),
            "token",
            "preliminary | final | amended",
        ),
        "category": SearchParam(
            code_where(
                lambda kind: _results(test_kinds=(kind,)), (mapping.OBSERVATION_CATEGORY,), {"laboratory": "lab"}
            ),
            "token",
            "laboratory",
        ),
        "based-on": SearchParam(
            reference_where("ServiceRequest", lambda key: _results(item_ids=(key,))),
            "reference",
            "ServiceRequest/<id>.",
        ),
        "_lastUpdated": SearchParam(
            date_where(lambda span: _results(recorded=(span,))), "date", "When last updated (meta.lastUpdated)."
        ),
    },
    sorts={"date": "performed_at"},
    patient_field="item__order__patient_id",
    updated_field="recorded_at",
    clinical_date="performed_at",
)


DIAGNOSTIC_REPORT = ResourceType(
    name="DiagnosticReport",
    scope="lab:read",
    also_read_with=(CLINICAL_RECORD,),
    rows=visible_lab_reports,
    to_fhir=mapping.diagnostic_report,
    order=("-order__created_at", "order_id", "position", "id"),
    params={
        **_ITEM_PARAMS,
        "based-on": SearchParam(
            reference_where("ServiceRequest", lambda key: _items(ids=(key,))), "reference", "ServiceRequest/<id>."
        ),
    },
    sorts={"date": "order__created_at"},
    patient_field="order__patient_id",
    updated_field="order__updated_at",
    clinical_date="order__created_at",
)

RESOURCE_TYPES: dict[str, ResourceType] = {
    resource.name: resource
    for resource in (
        PATIENT,
        PRACTITIONER,
        ORGANIZATION,
        LOCATION,
        APPOINTMENT,
        ENCOUNTER,
        CONDITION,
        ALLERGY,
        MEDICATION_REQUEST,
        MEDICATION_DISPENSE,
        SERVICE_REQUEST,
        OBSERVATION,
        DIAGNOSTIC_REPORT,
    )
}
# The Patient compartment ($everything, Patient-level $export): the types whose rows are about one patient.
COMPARTMENT = [resource for resource in RESOURCE_TYPES.values() if resource.patient_field]
