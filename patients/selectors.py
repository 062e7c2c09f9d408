"""Reads of patients, always through the calling client's branch restriction (visible_patients).

Search itself (query classification, the distinct-names dictionary, ranking) lives in patients.search;
patient_search() applies the client's restriction and the list filters to it and loads the page.
"""

from __future__ import annotations

import uuid
from datetime import date

from django.db.models import (
    OuterRef,
    Prefetch,
    Q,
    QuerySet,
    Subquery,
    Value,
)
from django.db.models.functions import Replace, Upper
from django.utils import timezone

from clinic.errors import FieldError, NotFound
from clinic.models import Branch
from clinic.selectors import client_branch_ids
from integrations.models import ApiClient
from patients.identifiers import normalise_patient_ref
from patients.models import Diagnosis, Medication, Patient, Visit
from patients.search import SearchFilters
from patients.search import search as patient_search_ids

MIN_SEARCH_LENGTH = 2
MIN_PHONE_TAIL = 4


def visible_patients(client: ApiClient) -> QuerySet[Patient]:
    """The one access chokepoint: a branch-restricted client sees patients registered at its branches."""
    patients = Patient.objects.all()
    allowed = client_branch_ids(client)
    if allowed is not None:
        patients = patients.filter(registration_branch_id__in=allowed)
    return patients


def _by_ref(patients: QuerySet[Patient], ref: str) -> QuerySet[Patient]:
    """Filter by UUID or by business patient_id (case and hyphens ignored, via its expression index)."""
    try:
        return patients.filter(id=uuid.UUID(ref))
    except ValueError:
        return patients.alias(patient_id_key=Upper(Replace("patient_id", Value("-"), Value("")))).filter(
            patient_id_key=normalise_patient_ref(ref)
        )


def patient_get(*, client: ApiClient, ref: str) -> Patient:
    """By UUID or business patient_id; 404 when unknown or not visible (no existence oracle)."""
    patient = _by_ref(visible_patients(client), ref).first()
    if patient is None:
        raise NotFound(f"No patient {ref!r}.")
    return patient


def patient_profile(*, client: ApiClient, ref: str) -> Patient:
    """A patient with everything the profile shows in 6 queries, however long the history: the patient
    with its branch, then insurance, active diagnoses, allergies, current medications and visits."""
    patients = (
        _by_ref(visible_patients(client), ref)
        .select_related("registration_branch")
        .prefetch_related(
            "insurance",
            Prefetch("diagnoses", queryset=Diagnosis.objects.filter(status=Diagnosis.Status.ACTIVE)),
            "allergies",
            Prefetch(
                "medications",
                queryset=Medication.objects.filter(Q(end_date__isnull=True) | Q(end_date__gte=timezone.localdate())),
            ),
            Prefetch("visits", queryset=Visit.objects.select_related("doctor", "department", "branch")),
        )
    )
    patient = patients.first()
    if patient is None:
        raise NotFound(f"No patient {ref!r}.")
    return patient


def _last_visit_date() -> Subquery:
    return Subquery(Visit.objects.filter(patient=OuterRef("pk")).order_by("-start").values("start")[:1])


def patient_list(
    *,
    client: ApiClient,
    branch_id: uuid.UUID | None = None,
    registered_after: date | None = None,
) -> QuerySet[Patient]:
    """Visible patients, most recently registered first."""
    patients = visible_patients(client).annotate(last_visit_at=_last_visit_date())
    if branch_id is not None:
        patients = patients.filter(registration_branch_id=branch_id)
    if registered_after is not None:
        patients = patients.filter(registered_at__date__gt=registered_after)
    return patients.select_related("registration_branch").order_by("-registered_at", "id")


def patient_search(
    *,
    client: ApiClient,
    search: str,
    offset: int,
    limit: int,
    branch_id: uuid.UUID | None = None,
    registered_after: date | None = None,
) -> tuple[list[Patient], int]:
    """One page of visible patients matching `search`, best first, and the number of matches."""
    filters = SearchFilters(
        branch_ids=client_branch_ids(client), branch_id=branch_id, registered_after=registered_after
    )
    ids, total = patient_search_ids(search, filters, offset=offset, limit=limit)
    found = {
        patient.id: patient
        for patient in Patient.objects.filter(id__in=ids)
        .select_related("registration_branch")
        .annotate(last_visit_at=_last_visit_date())
    }
    return [found[patient_id] for patient_id in ids if patient_id in found], total


def registration_branch_resolve(*, client: ApiClient, branch_id: uuid.UUID | None) -> Branch:
    """The branch a client registers a patient at: the one named (must be visible to the client and
    active), or the client's only branch. A missing or invisible branch is a 400 on `branch_id`."""
    allowed = client_branch_ids(client)
    if branch_id is None:
        if allowed is not None and len(allowed) == 1:
            return Branch.objects.get(id=next(iter(allowed)))
        raise FieldError({"branch_id": "Required: this client may register patients at more than one branch."})
    branch = Branch.objects.filter(id=branch_id, is_active=True).first()
    if branch is None or (allowed is not None and branch.id not in allowed):
        raise FieldError({"branch_id": f"No branch {branch_id} available to this client."})
    return branch
