"""The clinical record (docs/api-rules.md §15): one visible patient's encounters, diagnoses, allergies,
medications, prescriptions, dispenses and lab results, each section a page of its own.

The record spans apps that sit at different heights (patients below appointments, lab and pharmacy above),
so it lives in an app above all of them and reads each through the owning app's chokepoint
(visible_patients via patient_get, visible_lab_orders, visible_prescriptions, visible_dispenses): a client
restricted to some branches sees the rows of those branches only, as in every list of the REST API.

Queries are bounded whatever the history's length: the patient (two when it was merged into another),
the ids of the records merged into it, then per section one count and one page, plus one prefetch for the
prescription items and one for the dispense lines. tests/emr/test_record_api.py pins the figure.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.db.models import Prefetch, QuerySet

from integrations.models import ApiClient
from lab.models import LabResult
from lab.selectors import visible_lab_orders
from patients.models import Allergy, Diagnosis, Medication, Patient, Visit
from patients.selectors import patient_get
from pharmacy.models import DispenseLine, PrescriptionItem
from pharmacy.selectors import visible_dispenses, visible_prescriptions

SECTIONS = ("encounters", "diagnoses", "allergies", "medications", "prescriptions", "dispenses", "results")


@dataclass(frozen=True)
class SectionPage:
    items: list[Any]
    total: int


@dataclass(frozen=True)
class ClinicalRecord:
    patient: Patient  # with registration_branch
    sections: dict[str, SectionPage]


def record_patient_ids(patient: Patient) -> list[uuid.UUID]:
    """The patient and the records merged into it: their rows stay on the merged records (never moved),
    and the survivor's record shows them, as the profile does."""
    merged = Patient.objects.filter(merged_into=patient).values_list("id", flat=True)
    return [patient.id, *merged]


def section_rows(*, client: ApiClient, section: str, patient_ids: Sequence[uuid.UUID]) -> QuerySet[Any]:
    """The rows of one section in its stable order (a tiebreak on id), entered-in-error rows left out."""
    # The patient was resolved through the client's restriction already (patient_get): the rows below are
    # its own, narrowed to the client's branches where a row belongs to one (visits, orders, pharmacy).
    if section == "encounters":
        visits = Visit.objects.visible_to(client).filter(patient_id__in=patient_ids, entered_in_error=False)
        return visits.select_related("doctor", "department", "branch").order_by("-start", "id")
    if section == "diagnoses":
        diagnoses = Diagnosis.objects.filter(patient_id__in=patient_ids, entered_in_error=False)
        return diagnoses.order_by("-onset_date", "id")
    if section == "allergies":
        return Allergy.objects.filter(patient_id__in=patient_ids, entered_in_error=False).order_by("substance", "id")
    if section == "medications":
        medications = Medication.objects.filter(patient_id__in=patient_ids, entered_in_error=False)
        return medications.order_by("-start_date", "id")
    if section == "prescriptions":
        items = PrescriptionItem.objects.select_related("drug").order_by("position", "id")
        return (
            visible_prescriptions(client)
            .filter(patient_id__in=patient_ids)
            .select_related("branch", "doctor")
            .prefetch_related(Prefetch("items", queryset=items))
            .order_by("-created_at", "id")
        )
    if section == "dispenses":
        lines = DispenseLine.objects.select_related("drug", "batch").order_by("position", "id")
        return (
            visible_dispenses(client)
            .filter(patient_id__in=patient_ids)
            .select_related("branch")
            .prefetch_related(Prefetch("lines", queryset=lines))
            .order_by("-created_at", "id")
        )
    if section == "results":
        orders = visible_lab_orders(client).filter(patient_id__in=patient_ids)
        return (
            LabResult.objects.filter(current=True, item__order__in=orders)
            .select_related("analyte", "item__test", "item__order__branch")
            .order_by("-performed_at", "id")
        )
    raise ValueError(section)


def clinical_record(*, client: ApiClient, ref: str, sections: Sequence[str], offset: int, limit: int) -> ClinicalRecord:
    """A visible patient's record (404 as patient_get: unknown, malformed or invisible ref), each asked
    section's page at `offset`. A page past the end is empty, its total still counted."""
    patient = patient_get(client=client, ref=ref)
    ids = record_patient_ids(patient)
    pages: dict[str, SectionPage] = {}
    for section in sections:
        rows = section_rows(client=client, section=section, patient_ids=ids)
        total = rows.count()
        items = list(rows[offset : offset + limit]) if offset < total else []
        pages[section] = SectionPage(items=items, total=total)
    return ClinicalRecord(patient=patient, sections=pages)
