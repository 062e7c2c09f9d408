"""Reads of the pharmacy: the catalogue (the same at every branch), and stock, prescriptions and dispenses
always through the calling client's branch restriction."""

from __future__ import annotations

import uuid
from datetime import date, timedelta

from django.db.models import DateField, DateTimeField, F, Func, Prefetch, Q, QuerySet
from django.db.models.functions import Cast
from django.utils import timezone

from clinic.errors import NotFound
from clinic.models import Branch
from clinic.selectors import client_branch_ids
from integrations.models import ApiClient
from patients.models import Patient
from pharmacy.models import (
    Batch,
    Dispense,
    DispenseLine,
    DispenseReturn,
    DispenseReturnLine,
    Drug,
    Prescription,
    PrescriptionItem,
    ReorderLevel,
    StockMovement,
)
from pharmacy.representations import StockEntry, local_today

# --- Catalogue ---------------------------------------------------------------------------------------------


def drug_list(*, schedule: str | None = None, form: str | None = None, search: str | None = None) -> QuerySet[Drug]:
    """The active drugs, by code. `search` matches the code, generic or brand name (case ignored)."""
    drugs = Drug.objects.filter(active=True)
    if schedule is not None:
        drugs = drugs.filter(schedule=schedule)
    if form is not None:
        drugs = drugs.filter(form=form)
    if search:
        drugs = drugs.filter(
            Q(code__icontains=search) | Q(generic_name__icontains=search) | Q(brand_name__icontains=search)
        )
    return drugs.order_by("code", "id")


def drugs_by_code(codes: list[str]) -> dict[str, Drug]:
    return {drug.code: drug for drug in Drug.objects.filter(code__in=codes)}


# --- Branches


def _visible_branches(client: ApiClient) -> QuerySet[Branch]:
    branches = Branch.objects.all()
    allowed = client_branch_ids(client)
    if allowed is not None:
        branches = branches.filter(id__in=allowed)
    return branches


# --- Stock


def stock_levels(
    *,
    client: ApiClient,
    branch_id: uuid.UUID | None = None,
    drug: str | None = None,
    below_reorder: bool | None = None,
    expiring_before: date | None = None,
) -> list[StockEntry]:
    """One entry per drug and visible branch that has a batch or a reorder level, by drug code then branch
    code, in four or five queries: the branches, the batches holding stock (with their drugs, from a partial
    index: emptied batches pile up over the years and are not read), the reorder levels, the drug and branch
    pairs whose batches are all empty, and the drugs of those. `below_reorder` keeps the entries below (true)
    or not below (false) their level; `expiring_before` those with a batch holding stock that expires before
    that date."""
    branches = _visible_branches(client)
    if branch_id is not None:
        branches = branches.filter(id=branch_id)
    codes = {branch.id: (branch.code, local_today(branch.zone)) for branch in branches}
    batches = Batch.objects.filter(branch_id__in=codes, quantity_on_hand__gt=0)
    levels = ReorderLevel.objects.filter(branch_id__in=codes)
    emptied = Batch.objects.filter(branch_id__in=codes, quantity_on_hand=0)
    if drug is not None:
        batches, levels, emptied = (
            batches.filter(drug__code=drug),
            levels.filter(drug__code=drug),
            emptied.filter(drug__code=drug),
        )
    entries: dict[tuple[uuid.UUID, uuid.UUID], StockEntry] = {}

    def entry(of: Drug, at: uuid.UUID) -> StockEntry:
        key = (of.id, at)
        if key not in entries:
            entries[key] = StockEntry(drug=of, branch_id=at, today=codes[at][1], reorder_level=None)
        return entries[key]

    for level in levels.select_related("drug"):
        entry(level.drug, level.branch_id).reorder_level = level.level
    for batch in batches.select_related("drug").order_by("expiry_date", "id"):
        entry(batch.drug, batch.branch_id).batches.append(batch)
    empty = set(emptied.values_list("drug_id", "branch_id").distinct()) - set(entries)
    if empty:
        drugs = Drug.objects.in_bulk({drug_id for drug_id, _ in empty})
        for drug_id, at in empty:
            entry(drugs[drug_id], at)
    shown = sorted(entries.values(), key=lambda e: (e.drug.code, codes[e.branch_id][0], str(e.branch_id)))
    if below_reorder is not None:
        shown = [e for e in shown if e.below_reorder == below_reorder]
    if expiring_before is not None:
        shown = [e for e in shown if any(b.expiry_date < expiring_before for b in e.batches)]
    return shown


def stock_level_of(*, branch: Branch, drug: Drug) -> StockEntry:
    """A drug's stock at one branch, under no client's restriction: for the stock events."""
    level = ReorderLevel.objects.filter(branch=branch, drug=drug).values_list("level", flat=True).first()
    batches = Batch.objects.filter(branch=branch, drug=drug, quantity_on_hand__gt=0).order_by("expiry_date", "id")
    found = StockEntry(drug=drug, branch_id=branch.id, today=local_today(branch.zone), reorder_level=level)
    found.batches = [batch for batch in batches.select_related("drug")]
    return found


def reorder_level_get(*, branch_id: uuid.UUID, drug_id: uuid.UUID) -> int | None:
    return ReorderLevel.objects.filter(branch_id=branch_id, drug_id=drug_id).values_list("level", flat=True).first()


def batches_expiring(*, within_days: int) -> list[Batch]:
    """Batches holding stock that have not expired at their branch and expire within `within_days` days of
    its today, with drug and branch, by branch, drug, expiry."""
    found = []
    candidates = Batch.objects.filter(quantity_on_hand__gt=0).select_related("drug", "branch")
    # Branch-local today differs by at most a day between branches: narrow in SQL, decide per branch.
    widest = timezone.now().date() - timedelta(days=2)
    candidates = candidates.filter(expiry_date__gt=widest, expiry_date__lte=widest + timedelta(days=within_days + 4))
    for batch in candidates.order_by("branch__code", "drug__code", "expiry_date", "id"):
        today = local_today(batch.branch.zone)
        if today < batch.expiry_date <= today + timedelta(days=within_days):
            found.append(batch)
    return found


def stock_movement_load(movement_id: int) -> StockMovement:
    return StockMovement.objects.select_related("batch__drug", "batch__branch").get(pk=movement_id)


# --- Prescriptions


def visible_prescriptions(client: ApiClient) -> QuerySet[Prescription]:
    """The one access chokepoint for prescriptions: a client limited to some branches sees only theirs."""
    prescriptions = Prescription.objects.all()
    allowed = client_branch_ids(client)
    if allowed is not None:
        prescriptions = prescriptions.filter(branch_id__in=allowed)
    return prescriptions


def _prescription_detail(prescriptions: QuerySet[Prescription]) -> QuerySet[Prescription]:
    """Everything the representation shows, in 2 queries."""
    items = PrescriptionItem.objects.select_related("drug").order_by("position", "id")
    return prescriptions.select_related("branch", "patient", "doctor").prefetch_related(
        Prefetch("items", queryset=items)
    )


def prescription_load(prescription_id: uuid.UUID) -> Prescription:
    """A prescription with everything its representation shows, whatever its branch: for the events its own
    writes publish, never for a client's request."""
    return _prescription_detail(Prescription.objects.filter(id=prescription_id)).get()


def _key(ref: str, noun: str) -> uuid.UUID:
    try:
        return uuid.UUID(ref)
    except ValueError:
        raise NotFound(f"No {noun} {ref!r}.") from None


def prescription_get(*, client: ApiClient, ref: str) -> Prescription:
    """By UUID; 404 when unknown, malformed or at a branch the client may not see (no existence oracle)."""
    found = _prescription_detail(visible_prescriptions(client).filter(id=_key(ref, "prescription"))).first()
    if found is None:
        raise NotFound(f"No prescription {ref!r}.")
    return found


def _local_created_date() -> Cast:
    local = Func(F("branch__time_zone"), F("created_at"), function="timezone", output_field=DateTimeField())
    return Cast(local, DateField())


def _dated(rows: QuerySet, date_from: date | None, date_to: date | None) -> QuerySet:
    if date_from is None and date_to is None:
        return rows
    rows = rows.alias(local_date=_local_created_date())
    if date_from is not None:
        rows = rows.filter(local_date__gte=date_from)
    if date_to is not None:
        rows = rows.filter(local_date__lte=date_to)
    return rows


def prescription_list(
    *,
    client: ApiClient,
    patient: Patient | None = None,
    branch_id: uuid.UUID | None = None,
    status: str | None = None,
    date_from: date | None = None,
    date_to: date | None = None,
) -> QuerySet[Prescription]:
    """Visible prescriptions, newest first, then id; dates are inclusive branch-local creation dates."""
    prescriptions = visible_prescriptions(client)
    if patient is not None:
        prescriptions = prescriptions.filter(patient=patient)
    if branch_id is not None:
        prescriptions = prescriptions.filter(branch_id=branch_id)
    if status is not None:
        prescriptions = prescriptions.filter(status=status)
    return _prescription_detail(_dated(prescriptions, date_from, date_to)).order_by("-created_at", "id")


# --- Dispenses


def visible_dispenses(client: ApiClient) -> QuerySet[Dispense]:
    """The one access chokepoint for dispenses."""
    dispenses = Dispense.objects.all()
    allowed = client_branch_ids(client)
    if allowed is not None:
        dispenses = dispenses.filter(branch_id__in=allowed)
    return dispenses


def _dispense_detail(dispenses: QuerySet[Dispense]) -> QuerySet[Dispense]:
    """Everything the representation shows, in 4 queries: the dispense with branch, patient and
    prescription; its lines with drug and batch; its returns; their lines."""
    lines = DispenseLine.objects.select_related("drug", "batch").order_by("position", "id")
    return_lines = DispenseReturnLine.objects.order_by("id")
    returns = DispenseReturn.objects.order_by("at", "id").prefetch_related(Prefetch("lines", queryset=return_lines))
    return dispenses.select_related("branch", "patient", "prescription").prefetch_related(
        Prefetch("lines", queryset=lines), Prefetch("returns", queryset=returns)
    )


def dispense_load(dispense_id: uuid.UUID) -> Dispense:
    return _dispense_detail(Dispense.objects.filter(id=dispense_id)).get()


def dispense_get(*, client: ApiClient, ref: str) -> Dispense:
    found = _dispense_detail(visible_dispenses(client).filter(id=_key(ref, "dispense"))).first()
    if found is None:
        raise NotFound(f"No dispense {ref!r}.")
    return found


def dispense_list(
    *,
    client: ApiClient,
    patient: Patient | None = None,
    branch_id: uuid.UUID | None = None,
    prescription: Prescription | None = None,
    date_from: date | None = None,
    date_to: date | None = None,
) -> QuerySet[Dispense]:
    """Visible dispenses, newest first, then id."""
    dispenses = visible_dispenses(client)
    if patient is not None:
        dispenses = dispenses.filter(patient=patient)
    if branch_id is not None:
        dispenses = dispenses.filter(branch_id=branch_id)
    if prescription is not None:
        dispenses = dispenses.filter(prescription=prescription)
    return _dispense_detail(_dated(dispenses, date_from, date_to)).order_by("-created_at", "id")


# --- Items and lines for the standard channels (integrations.fhir) ----------------------------------------


def visible_prescription_items(client: ApiClient) -> QuerySet[PrescriptionItem]:
    """Prescription items (a FHIR MedicationRequest each) of the visible prescriptions."""
    return PrescriptionItem.objects.filter(prescription__in=visible_prescriptions(client))


def visible_dispense_lines(client: ApiClient) -> QuerySet[DispenseLine]:
    """Lines (a FHIR MedicationDispense each) of the visible dispenses made to a known patient: an
    over-the-counter sale to nobody in particular is no part of anyone's record."""
    return DispenseLine.objects.filter(dispense__in=visible_dispenses(client).filter(patient__isnull=False))
