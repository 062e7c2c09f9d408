"""Reads of the pharmacy: the catalogue (the same at every branch), and stock, prescriptions and dispenses
always through the calling client's branch restriction."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import date, timedelta
from typing import Any

from django.conf import settings
from django.db import connection
from django.db.models import (
    DateField,
    DateTimeField,
    ExpressionWrapper,
    F,
    Func,
    IntegerField,
    OuterRef,
    Prefetch,
    Q,
    QuerySet,
    Subquery,
    Sum,
    Value,
)
from django.db.models.functions import Cast, Coalesce
from django.urls import reverse
from django.utils import timezone

from clinic.errors import NotFound
from clinic.models import Branch
from clinic.visibility import BranchRestricted
from integrations.models import ApiClient
from patients.models import Patient
from patients.selectors import Span, any_of, any_span
from pharmacy.models import (
    Batch,
    ControlledDrugEntry,
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


def _visible_branches(client: BranchRestricted) -> QuerySet[Branch]:
    return Branch.objects.visible_to(client)


def receiving_branches(*, client: BranchRestricted) -> QuerySet[Branch]:
    """The open branches the client may receive stock at, by code."""
    return _visible_branches(client).filter(is_active=True).order_by("code")


# --- Stock


# Which (drug, branch) pairs a stock list shows, one page of them, and the total, in one statement. A pair is
# listed when it has a batch (even emptied) or a reorder level; `held` sums the batches holding stock from the
# partial index (emptied batches pile up over the years and are not read), non-expired by the branch's own
# today. Sorting and filtering happen in SQL, so a branch of 2,000 drugs costs one page, not 2,000 entries.
# Codes sort bytewise (COLLATE "C", as Python compares them); that also keeps the planner from walking the
# drug code index in a nested loop over every pair.
_STOCK_PAGE = """
WITH here(branch_id, today) AS (SELECT * FROM unnest(%(branches)s::uuid[], %(todays)s::date[])),
pairs AS (
    SELECT b.drug_id, b.branch_id FROM pharmacy_batch b
    WHERE b.branch_id = ANY(%(branches)s::uuid[]) {drug_b}
    UNION
    SELECT r.drug_id, r.branch_id FROM pharmacy_reorderlevel r
    WHERE r.branch_id = ANY(%(branches)s::uuid[]) {drug_r}
),
held AS (
    SELECT b.drug_id, b.branch_id, min(b.expiry_date) AS first_expiry,
        coalesce(sum(b.quantity_on_hand) FILTER (WHERE b.expiry_date > here.today), 0) AS on_hand
    FROM pharmacy_batch b JOIN here ON here.branch_id = b.branch_id
    WHERE b.quantity_on_hand > 0 {drug_b}
    GROUP BY b.drug_id, b.branch_id
)
SELECT count(*) OVER (), p.drug_id, p.branch_id, r.level
FROM pairs p
JOIN pharmacy_drug d ON d.id = p.drug_id
JOIN clinic_branch br ON br.id = p.branch_id
LEFT JOIN held ON held.drug_id = p.drug_id AND held.branch_id = p.branch_id
LEFT JOIN pharmacy_reorderlevel r ON r.drug_id = p.drug_id AND r.branch_id = p.branch_id
WHERE TRUE {below} {expiring}
ORDER BY d.code COLLATE "C", br.code COLLATE "C", br.id::text
LIMIT %(limit)s OFFSET %(offset)s
"""
_BELOW = "r.level IS NOT NULL AND coalesce(held.on_hand, 0) < r.level"


def stock_level_page(
    *,
    client: ApiClient,
    offset: int,
    limit: int,
    branch_id: uuid.UUID | None = None,
    drug: str | None = None,
    below_reorder: bool | None = None,
    expiring_before: date | None = None,
) -> tuple[list[StockEntry], int]:
    """One page of the stock list and its total: an entry per drug and visible branch that has a batch or a
    reorder level, by drug code then branch code, in four queries (the branches, the page of pairs with their
    total and reorder levels, their drugs, their batches holding stock). `below_reorder` keeps the entries
    below (true) or not below (false) their level; `expiring_before` those with a batch holding stock that
    expires before that date."""
    branches = _visible_branches(client)
    if branch_id is not None:
        branches = branches.filter(id=branch_id)
    today_at = {branch.id: local_today(branch.zone) for branch in branches}
    if not today_at:
        return [], 0
    drug_filter = "AND {}.drug_id = (SELECT id FROM pharmacy_drug WHERE code = %(drug)s)" if drug else ""
    below = ""
    if below_reorder is not None:
        below = f"AND {_BELOW}" if below_reorder else f"AND NOT coalesce({_BELOW}, false)"
    sql = _STOCK_PAGE.format(
        drug_b=drug_filter.format("b"),
        drug_r=drug_filter.format("r"),
        below=below,
        expiring="AND held.first_expiry < %(expiring_before)s" if expiring_before is not None else "",
    )
    params: dict[str, Any] = {
        "branches": list(today_at),
        "todays": list(today_at.values()),
        "drug": drug,
        "expiring_before": expiring_before,
        "limit": limit,
        "offset": offset,
    }
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    if not rows:  # past the end (or nothing at all): the total alone
        with connection.cursor() as cursor:
            counted = f"SELECT count(*) FROM ({sql.replace('count(*) OVER (), ', '', 1)}) page"  # noqa: S608 - fixed SQL
            cursor.execute(counted, {**params, "limit": None, "offset": 0})
            return [], cursor.fetchone()[0]
    drugs = Drug.objects.in_bulk({row[1] for row in rows})
    entries = {
        (drug_id, at): StockEntry(drug=drugs[drug_id], branch_id=at, today=today_at[at], reorder_level=level)
        for _, drug_id, at, level in rows
    }
    held = Batch.objects.filter(
        quantity_on_hand__gt=0, drug_id__in={row[1] for row in rows}, branch_id__in={row[2] for row in rows}
    )
    for batch in held.order_by("expiry_date", "id"):
        entry = entries.get((batch.drug_id, batch.branch_id))
        if entry is not None:  # the query may match pairs of other pages: drugs and branches cross
            batch.drug = entry.drug
            entry.batches.append(batch)
    return list(entries.values()), rows[0][0]


def stock_level_of(*, branch: Branch, drug: Drug) -> StockEntry:
    """A drug's stock at one branch, under no client's restriction: for the stock events."""
    level = ReorderLevel.objects.filter(branch=branch, drug=drug).values_list("level", flat=True).first()
    batches = Batch.objects.filter(branch=branch, drug=drug, quantity_on_hand__gt=0).order_by("expiry_date", "id")
    found = StockEntry(drug=drug, branch_id=branch.id, today=local_today(branch.zone), reorder_level=level)
    found.batches = [batch for batch in batches.select_related("drug")]
    return found


def reorder_levels_get(*, branch_id: uuid.UUID, drug_ids: list[uuid.UUID]) -> dict[uuid.UUID, int]:
    """The reorder levels of those drugs at the branch that have one, by drug id (one query)."""
    levels = ReorderLevel.objects.filter(branch_id=branch_id, drug_id__in=drug_ids)
    return dict(levels.values_list("drug_id", "level"))


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


def _branch_today(branch_path: str) -> Cast:
    """Today at the row's branch, in SQL: the same date local_today(branch.zone) gives in Python."""
    local = Func(F(f"{branch_path}time_zone"), Value(timezone.now()), function="timezone", output_field=DateTimeField())
    return Cast(local, DateField())


def batches_by_expiry(batches: QuerySet[Batch], status: str) -> QuerySet[Batch]:
    """`batches` narrowed by expiry at each batch's own branch: "expired" (not after today), "expiring" (within
    PHARMACY_EXPIRY_WARNING_DAYS), "in_date" (later). The batch list's filter and the dashboard agree on it."""
    days = Value(settings.PHARMACY_EXPIRY_WARNING_DAYS)
    batches = batches.alias(
        branch_today=_branch_today("branch__"),
        warning_end=ExpressionWrapper(F("branch_today") + days, output_field=DateField()),  # date + days in SQL
    )
    if status == "expired":
        return batches.filter(expiry_date__lte=F("branch_today"))
    if status == "expiring":
        return batches.filter(expiry_date__gt=F("branch_today"), expiry_date__lte=F("warning_end"))
    if status == "in_date":
        return batches.filter(expiry_date__gt=F("warning_end"))
    return batches


def expiring_soon(*, client: BranchRestricted) -> QuerySet[Batch]:
    """Batches of the client's branches still holding stock that expire within PHARMACY_EXPIRY_WARNING_DAYS
    (the daily stock.expiring warning's rows), soonest first."""
    held = Batch.objects.filter(branch__in=_visible_branches(client), quantity_on_hand__gt=0)
    return batches_by_expiry(held, "expiring").select_related("drug", "branch").order_by("expiry_date", "id")


def expiring_soon_url() -> str:
    """The batch list showing exactly expiring_soon's rows (for a dashboard's link)."""
    return reverse("admin:pharmacy_batch_changelist") + "?expiry=expiring&quantity_on_hand__gt=0"


def reorder_levels_with_stock(levels: QuerySet[ReorderLevel]) -> QuerySet[ReorderLevel]:
    """Each reorder level with `on_hand`: the non-expired units of its drug at its branch (as the stock list
    and the stock.below_reorder event count them: expired batches apart)."""
    held = (
        Batch.objects.filter(
            drug_id=OuterRef("drug_id"),
            branch_id=OuterRef("branch_id"),
            quantity_on_hand__gt=0,
            expiry_date__gt=OuterRef("branch_today"),
        )
        .order_by()
        .values("drug_id")
        .annotate(total=Sum("quantity_on_hand"))
        .values("total")
    )
    return levels.alias(branch_today=_branch_today("branch__")).annotate(
        on_hand=Coalesce(Subquery(held, output_field=IntegerField()), 0)
    )


def levels_below_reorder(levels: QuerySet[ReorderLevel]) -> QuerySet[ReorderLevel]:
    return reorder_levels_with_stock(levels).filter(Q(on_hand__lt=F("level")))  # Q: the annotation is dynamic


def below_reorder(*, client: BranchRestricted) -> QuerySet[ReorderLevel]:
    """The drugs of the client's branches whose non-expired stock is below their reorder level, with
    `on_hand`, by drug code then branch code (the stock list's `below_reorder=true` entries)."""
    levels = ReorderLevel.objects.filter(branch__in=_visible_branches(client)).select_related("drug", "branch")
    return levels_below_reorder(levels).order_by("drug__code", "branch__code", "id")


def below_reorder_url() -> str:
    """The reorder level list showing exactly below_reorder's rows (for a dashboard's link)."""
    return reverse("admin:pharmacy_reorderlevel_changelist") + "?stock=below"


# --- Dispensing suggestions


def fefo_key(batch: Batch) -> tuple[Any, ...]:
    """First expiry first out: the order the dispense service draws batches in (and the admin suggests)."""
    return (batch.expiry_date, batch.received_at, batch.id)


@dataclass
class Suggestion:
    """What a prescription item may take now: its FEFO draws (batch, units) up to what remains and is on hand."""

    item: PrescriptionItem
    draws: list[tuple[Batch, int]]

    @property
    def quantity(self) -> int:
        return sum(units for _, units in self.draws)


def dispense_suggestions(*, prescription: Prescription) -> list[Suggestion]:
    """Per item of a prescription (read through the caller's branch rule), the batches its remaining quantity
    would come from, first expiry first out among the branch's non-expired batches holding stock: the draws
    dispense_record makes when no batch is named. Expired batches are never suggested."""
    items = list(prescription.items.select_related("drug").order_by("position", "id"))
    today = local_today(prescription.branch.zone)
    held = Batch.objects.filter(
        branch_id=prescription.branch_id,
        drug_id__in=[item.drug_id for item in items],
        quantity_on_hand__gt=0,
        expiry_date__gt=today,
    )
    by_drug: dict[uuid.UUID, list[Batch]] = {}
    for batch in sorted(held, key=fefo_key):
        by_drug.setdefault(batch.drug_id, []).append(batch)
    suggestions = []
    for item in items:
        wanted, draws = item.remaining, []
        for batch in by_drug.get(item.drug_id, []):
            if wanted <= 0:
                break
            taken = min(wanted, batch.quantity_on_hand)
            draws.append((batch, taken))
            wanted -= taken
        suggestions.append(Suggestion(item=item, draws=draws))
    return suggestions


# --- The Schedule H1 and X register


def register_with_balance(entries: QuerySet[ControlledDrugEntry]) -> QuerySet[ControlledDrugEntry]:
    """Register entries with `balance`: the units of the entry's drug at its branch just after its line was
    dispensed (every batch, expired ones too: they are on the shelf until written off).

    Counted back from now: what the batches hold less what moved after the line's movement. Movements of one
    drug at one branch are written under the same batch locks (pharmacy.locks), each stamped after taking
    them, so (at, id) orders them as they happened; and the recent entries a pharmacist reads cost a few
    rows each through the (batch, at) index, not the drug's whole history."""
    line_movement = StockMovement.objects.filter(dispense_line_id=OuterRef("dispense_line_id"))
    held = (
        Batch.objects.filter(branch_id=OuterRef("branch_id"), drug_id=OuterRef("drug_id"))
        .order_by()
        .values("drug_id")
        .annotate(total=Sum("quantity_on_hand"))
        .values("total")
    )
    later = (
        StockMovement.objects.filter(
            batch__branch_id=OuterRef("branch_id"),
            batch__drug_id=OuterRef("drug_id"),
            at__gte=OuterRef("line_at"),
        )
        .filter(Q(at__gt=OuterRef("line_at")) | Q(id__gt=OuterRef("line_movement_id")))
        .order_by()
        .values("batch__drug_id")
        .annotate(total=Sum("quantity"))
        .values("total")
    )
    return entries.alias(
        line_at=Subquery(line_movement.values("at")[:1]),
        line_movement_id=Subquery(line_movement.values("id")[:1]),
    ).annotate(
        balance=Coalesce(Subquery(held, output_field=IntegerField()), 0)
        - Coalesce(Subquery(later, output_field=IntegerField()), 0)
    )


def stock_movement_load(movement_id: int) -> StockMovement:
    return StockMovement.objects.select_related("batch__drug", "batch__branch").get(pk=movement_id)


# --- Prescriptions


def visible_prescriptions(client: ApiClient) -> QuerySet[Prescription]:
    return Prescription.objects.visible_to(client)


def _prescription_detail(prescriptions: QuerySet[Prescription]) -> QuerySet[Prescription]:
    """Everything the representation shows: the prescription with its items and their drugs."""
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
    return Dispense.objects.visible_to(client)


def _dispense_detail(dispenses: QuerySet[Dispense]) -> QuerySet[Dispense]:
    """Everything the representation shows: the dispense with branch, patient and
    prescription; its lines with drug and batch; its returns; their lines."""
    lines = DispenseLine.objects.select_related("drug", "batch").order_by("position", "id")
    return_lines = DispenseReturnLine.objects.order_by("id")
    returns = DispenseReturn.objects.order_by("at", "id").prefetch_related(Prefetch("lines", queryset=return_lines))
    return dispenses.select_related("branch", "patient", "prescription").prefetch_related(
        Prefetch("lines", queryset=lines), Prefetch("returns", queryset=returns)
    )


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
    return PrescriptionItem.objects.visible_to(client)


def visible_dispense_lines(client: ApiClient) -> QuerySet[DispenseLine]:
    """Lines (a FHIR MedicationDispense each) of the visible dispenses made to a known patient: an
    over-the-counter sale to nobody in particular is no part of anyone's record."""
    return DispenseLine.objects.visible_to(client).filter(dispense__patient__isnull=False)


# --- What a FHIR search asks of pharmacy rows (integrations.fhir.registry: MedicationRequest,
# MedicationDispense). A filter is one search parameter's alternatives in the app's own terms: each field
# given narrows to the rows matching one of its values (None does not narrow); the search ANDs its filters.


@dataclass(frozen=True)
class PrescriptionItemFilter:
    ids: tuple[uuid.UUID, ...] | None = None
    patient_ids: tuple[uuid.UUID, ...] | None = None
    doctor_ids: tuple[uuid.UUID, ...] | None = None
    statuses: tuple[str, ...] | None = None  # the prescription's
    drug_codes: tuple[str, ...] | None = None
    prescribed: tuple[Span, ...] | None = None
    updated: tuple[Span, ...] | None = None  # the prescription's last update


def prescription_item_condition(where: PrescriptionItemFilter) -> Q:
    return (
        any_of("pk", where.ids)
        & any_of("prescription__patient_id", where.patient_ids)
        & any_of("prescription__doctor_id", where.doctor_ids)
        & any_of("prescription__status", where.statuses)
        & any_of("drug__code", where.drug_codes)
        & any_span("prescription__created_at", where.prescribed)
        & any_span("prescription__updated_at", where.updated)
    )


@dataclass(frozen=True)
class DispenseLineFilter:
    ids: tuple[uuid.UUID, ...] | None = None
    patient_ids: tuple[uuid.UUID, ...] | None = None
    prescription_item_ids: tuple[uuid.UUID, ...] | None = None
    drug_codes: tuple[str, ...] | None = None
    handed_over: tuple[Span, ...] | None = None
    updated: tuple[Span, ...] | None = None  # the dispense's last update


def dispense_line_condition(where: DispenseLineFilter) -> Q:
    return (
        any_of("pk", where.ids)
        & any_of("dispense__patient_id", where.patient_ids)
        & any_of("prescription_item_id", where.prescription_item_ids)
        & any_of("drug__code", where.drug_codes)
        & any_span("dispense__created_at", where.handed_over)
        & any_span("dispense__updated_at", where.updated)
    )
