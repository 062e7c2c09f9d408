"""The resource types the server serves (docs/api-rules.md §15): for each, the scope a token needs, its
visible rows (the owning app's selector, so a branch-restricted client sees what the REST API shows it and
nothing more), the mapping, the search parameters, the sort keys and the patient each row is about (for
the audit row and the Patient compartment of $everything and $export)."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.db.models import Exists, OuterRef, Prefetch, Q, QuerySet, Value
from django.db.models.expressions import RawSQL
from django.db.models.functions import Replace, Upper
from django.db.models.lookups import Exact

from appointments.selectors import visible_appointments
from clinic.models import Branch
from clinic.selectors import branch_list, visible_doctors
from clinic.text import like_prefix
from integrations.fhir import mapping
from integrations.fhir.search import (
    SearchParam,
    code_filter,
    code_where,
    date_filter,
    date_where,
    id_filter,
    id_where,
    reference_filter,
    reference_where,
    token_parts,
)
from integrations.models import ApiClient
from lab.models import LabResult
from lab.selectors import (
    ItemFilter,
    ResultFilter,
    lab_item_condition,
    lab_result_condition,
    visible_lab_items,
    visible_lab_results,
)
from patients.identifiers import normalise_abha, normalise_patient_ref
from patients.selectors import visible_allergies, visible_diagnoses, visible_patients, visible_visits
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


def _id() -> SearchParam:
    return SearchParam(id_filter(), "token", "The resource id.")


def _patient(field_name: str) -> SearchParam:
    return SearchParam(reference_filter(field_name, "Patient"), "reference", "The patient: Patient/<id>.")


# --- Patient -------------------------------------------------------------------------------------------------


def _identifier(raw: str, name: str) -> Q:
    """ABHA under ABDM's system (hyphens allowed), our patient_id under ours (case and hyphens ignored, by
    the patient_id_normalised index), or either without a system; `system|` every patient with an
    identifier in that system; `|value` nobody (every identifier we emit has a system). A malformed value
    matches nobody."""
    system, value = token_parts(name, raw)
    if system == "":
        return Q(pk__in=[])
    if system == mapping.ABHA_SYSTEM and not value:
        return Q(national_health_id__isnull=False)
    if system == mapping.system("patient-id") and not value:
        return Q()
    wanted: list[Q] = []
    if system in (None, mapping.ABHA_SYSTEM):
        with contextlib.suppress(ValueError):
            wanted.append(Q(national_health_id=normalise_abha(value)))
    if system in (None, mapping.system("patient-id")):
        key = Upper(Replace("patient_id", Value("-"), Value("")))
        wanted.append(Q(Exact(key, normalise_patient_ref(value))))
    if not wanted:
        return Q(pk__in=[])
    combined = wanted[0]
    for extra in wanted[1:]:
        combined |= extra
    return combined


# The distinct full names holding a word that starts with the value: through the dictionary of name words
# (a few thousand rows at a million patients, kept by triggers; patients.search explains the tables), then
# the patients through the (search_name, registered_at) index. A trigram regex over search_name finds the
# same patients, but must visit each one's heap row; the words are read index-only.
_NAMES_WITH_WORD = (
    "SELECT part.name FROM patients_namepart part JOIN patients_nameword word ON word.word = part.word "
    "WHERE word.word LIKE %s"
)


def _name(raw: str, name: str) -> Q:
    """FHIR's default string match: a name part starting with the value, ignoring case (search_name is the
    lower-case "first last"). A value of several words matches names containing it from a word start."""
    text = raw.strip().lower()
    if not text:
        return Q()
    if any(ch.isspace() for ch in text):
        return Q(search_name__regex=r"(^| )" + re.escape(" ".join(text.split())))  # patient_name_trgm
    return Q(search_name__in=RawSQL(_NAMES_WITH_WORD, [like_prefix(text)]))  # noqa: S611 - fixed SQL, a parameter


def _name_contains(raw: str, name: str) -> Q:
    return Q(search_name__contains=raw.strip().lower())


def _name_exact(raw: str, name: str) -> Q:
    return Q(first_name=raw) | Q(last_name=raw) | Q(search_name=raw.lower())


def _phone(raw: str, name: str) -> Q:
    # The digits' tail, as the REST search: phone_digits_reversed by prefix (patient_phone_tail index).
    digits = "".join(ch for ch in raw if "0" <= ch <= "9")
    if len(digits) < 4:
        return Q(pk__in=[])
    return Q(phone_digits_reversed__startswith=digits[::-1])


PATIENT = ResourceType(
    name="Patient",
    scope="patients:read",
    rows=lambda client: visible_patients(client),
    to_fhir=mapping.patient,
    order=("-registered_at", "id"),
    params={
        "_id": _id(),
        "identifier": SearchParam(
            _identifier, "token", f"{mapping.ABHA_SYSTEM}|<ABHA number> or <our system>|<patient_id>."
        ),
        "name": SearchParam(_name, "string", "A name part starting with the value (case ignored)."),
        "name:contains": SearchParam(_name_contains, "string", "Any part of the name."),
        "name:exact": SearchParam(_name_exact, "string", "The given or family name exactly."),
        "birthdate": SearchParam(date_filter("date_of_birth", date_only=True), "date", "Date of birth."),
        "gender": SearchParam(code_filter("gender", (GENDER_SYSTEM,)), "token", "male | female | other | unknown"),
        "phone": SearchParam(_phone, "token", "The phone number or its last 4+ digits."),
    },
    sorts={"birthdate": "date_of_birth", "_lastUpdated": "updated_at", "name": "search_name"},
    patient_field="id",
)

# --- The organisation -------------------------------------------------------------------------------------


def _text_contains(field_name: str) -> Callable[[str, str], Q]:
    return lambda raw, name: Q(**{f"{field_name}__icontains": raw.strip()})


PRACTITIONER = ResourceType(
    name="Practitioner",
    scope="appointments:read",
    rows=lambda client: visible_doctors(client),
    to_fhir=mapping.practitioner,
    order=("name", "id"),
    params={"_id": _id(), "name": SearchParam(_text_contains("name"), "string", "Part of the name.")},
    sorts={"name": "name"},
)


def _branch_identifier(raw: str, name: str) -> Q:
    system, code = token_parts(name, raw)
    if system is not None and system != mapping.system("branch"):
        return Q(pk__in=[])  # `|code` too: the branch code is always emitted under our system
    return Q(code=code.upper()) if code else Q()


def _branches(client: ApiClient) -> QuerySet[Branch]:
    return branch_list(client=client)


_BRANCH_PARAMS = {
    "_id": _id(),
    "name": SearchParam(_text_contains("name"), "string", "Part of the branch's name."),
    "identifier": SearchParam(_branch_identifier, "token", "The branch code (BLR)."),
    "address-state": SearchParam(lambda raw, name: Q(state__iexact=raw.strip()), "string", "The state's name."),
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

APPOINTMENT = ResourceType(
    name="Appointment",
    scope="appointments:read",
    rows=lambda client: visible_appointments(client).select_related(None).prefetch_related("doctor", "branch"),
    to_fhir=mapping.appointment,
    order=("slot_start", "id"),
    params={
        "_id": _id(),
        "patient": _patient("patient_id"),
        "practitioner": SearchParam(
            reference_filter("doctor_id", "Practitioner"), "reference", "The doctor: Practitioner/<id>."
        ),
        "location": SearchParam(reference_filter("branch_id", "Location"), "reference", "The branch: Location/<id>."),
        "date": SearchParam(date_filter("slot_start"), "date", "The start."),
        "status": SearchParam(
            code_filter("status", ("http://hl7.org/fhir/appointmentstatus",), mapping.APPOINTMENT_STATUS_SEARCH),
            "token",
            "booked | checked-in | fulfilled | cancelled | noshow",
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
    rows=lambda client: visible_visits(client).prefetch_related("doctor", "department", "branch"),
    to_fhir=mapping.encounter,
    order=("-start", "id"),
    params={
        "_id": _id(),
        "patient": _patient("patient_id"),
        "subject": SearchParam(reference_filter("patient_id", "Patient"), "reference", "Patient/<id>."),
        "date": SearchParam(date_filter("start"), "date", "The visit's start."),
        "class": SearchParam(
            code_filter("type", (mapping.V3_ACT_CODE,), {"AMB": "outpatient", "IMP": "inpatient"}),
            "token",
            "AMB (outpatient) | IMP (inpatient)",
        ),
        "practitioner": SearchParam(reference_filter("doctor_id", "Practitioner"), "reference", "Practitioner/<id>."),
    },
    sorts={"date": "start"},
    patient_field="patient_id",
    clinical_date="start",
)


def _condition_code(raw: str, name: str) -> Q:
    """The diagnosis code under the system the mapping emits: ICD-10's for ICD-10 rows (however the row
    spells "ICD-10"), `<our base>/code/<system>` for any other system; `|code` nothing (always a system)."""
    system, code = token_parts(name, raw)
    is_icd10 = Q(Exact(Upper(Replace("system", Value("-"), Value(""))), "ICD10"))
    ours = mapping.system("code/")
    if system is None:
        wanted = Q()
    elif system == mapping.ICD10:
        wanted = is_icd10
    elif system.startswith(ours) and system != ours:
        wanted = Q(system=system.removeprefix(ours)) & ~is_icd10
    else:
        return Q(pk__in=[])
    return wanted & Q(code=code) if code else wanted


CONDITION = ResourceType(
    name="Condition",
    scope="emr:read",
    rows=lambda client: visible_diagnoses(client),
    to_fhir=mapping.condition,
    order=("-onset_date", "id"),
    params={
        "_id": _id(),
        "patient": _patient("patient_id"),
        "subject": SearchParam(reference_filter("patient_id", "Patient"), "reference", "Patient/<id>."),
        "clinical-status": SearchParam(
            code_filter("status", (mapping.CONDITION_CLINICAL,)), "token", "active | resolved | inactive"
        ),
        "code": SearchParam(_condition_code, "token", "The ICD-10 code (E11.9), with or without its system."),
        "onset-date": SearchParam(date_filter("onset_date", date_only=True), "date", "The onset date."),
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
    params={"_id": _id(), "patient": _patient("patient_id")},
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


def _observations(client: ApiClient) -> QuerySet[LabResult]:
    # Analyte results only: an imaging report is the DiagnosticReport's conclusion, not an Observation.
    return (
        visible_lab_results(client)
        .filter(analyte__isnull=False)
        .select_related("item__order")
        .prefetch_related("analyte", "item__order__branch")
    )


OBSERVATION = ResourceType(
    name="Observation",
    scope="lab:read",
    also_read_with=(CLINICAL_RECORD,),
    rows=_observations,
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


def _reports(client: ApiClient) -> QuerySet[Any]:
    current = LabResult.objects.filter(current=True).order_by("analyte__position", "analyte__code", "id")
    return (
        visible_lab_items(client)
        .filter(Exists(LabResult.objects.filter(item=OuterRef("pk"), current=True)))
        .select_related("order")
        .prefetch_related("test", "order__branch", Prefetch("results", queryset=current, to_attr="current_results"))
    )


DIAGNOSTIC_REPORT = ResourceType(
    name="DiagnosticReport",
    scope="lab:read",
    also_read_with=(CLINICAL_RECORD,),
    rows=_reports,
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
