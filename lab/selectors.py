"""Reads of the lab catalogue and orders, always through the calling client's branch restriction."""

from __future__ import annotations

import uuid
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

from django.db.models import DateField, DateTimeField, Exists, F, Func, OuterRef, Prefetch, QuerySet
from django.db.models.functions import Cast

from clinic.errors import NotFound
from clinic.models import Branch
from clinic.selectors import client_branch_ids
from integrations.models import ApiClient
from lab.models import Analyte, LabOrder, LabOrderItem, LabResult, LabTest, ReferenceRange
from patients.models import Patient

# --- Catalogue ---------------------------------------------------------------------------------------------
# The catalogue is the same at every branch: no branch restriction applies to it.


def lab_tests(*, kind: str | None = None, modality: str | None = None) -> QuerySet[LabTest]:
    """The active tests of the catalogue in code order, with their billing item, analytes (by position,
    then code) and each analyte's reference ranges (by sex, then age band) read in three more queries
    however many tests a page holds."""
    tests = LabTest.objects.filter(active=True)
    if kind is not None:
        tests = tests.filter(kind=kind)
    if modality is not None:
        tests = tests.filter(modality=modality)
    ranges = ReferenceRange.objects.order_by("sex", "age_min_days", "id")
    analytes = Analyte.objects.order_by("position", "code").prefetch_related(Prefetch("ranges", queryset=ranges))
    return (
        tests.select_related("billable_service")
        .prefetch_related(Prefetch("analytes", queryset=analytes))
        .order_by("code")
    )


# --- Orders


def visible_lab_orders(client: ApiClient) -> QuerySet[LabOrder]:
    """The one access chokepoint for lab orders: a client limited to some branches sees only theirs."""
    orders = LabOrder.objects.all()
    allowed = client_branch_ids(client)
    if allowed is not None:
        orders = orders.filter(branch_id__in=allowed)
    return orders


def _with_detail(orders: QuerySet[LabOrder]) -> QuerySet[LabOrder]:
    """Everything the representation shows, in 3 queries: the order with branch, patient and doctor; its items
    with their tests; their results (every version) with their analytes."""
    results = LabResult.objects.select_related("analyte").order_by("analyte__position", "analyte__code", "version")
    items = (
        LabOrderItem.objects.select_related("test")
        .order_by("position", "id")
        .prefetch_related(Prefetch("results", queryset=results))
    )
    return orders.select_related("branch", "patient", "doctor").prefetch_related(Prefetch("items", queryset=items))


def lab_order_load(order_id: uuid.UUID) -> LabOrder:
    """An order with everything its representation shows, whatever its branch: for the events its own writes
    publish (lab.events), never for a client's request."""
    return _with_detail(LabOrder.objects.filter(id=order_id)).get()


def lab_order_get(*, client: ApiClient, ref: str) -> LabOrder:
    """By UUID, with everything the representation shows; 404 when unknown, malformed or at a branch the
    client may not see (no existence oracle)."""
    try:
        key = uuid.UUID(ref)
    except ValueError:
        raise NotFound(f"No lab order {ref!r}.") from None
    order = _with_detail(visible_lab_orders(client).filter(id=key)).first()
    if order is None:
        raise NotFound(f"No lab order {ref!r}.")
    return order


def _local_created_date() -> Cast:
    """The order's creation date at its branch (PostgreSQL's timezone(zone, timestamptz))."""
    local = Func(F("branch__time_zone"), F("created_at"), function="timezone", output_field=DateTimeField())
    return Cast(local, DateField())


def lab_order_list(
    *,
    client: ApiClient,
    patient: Patient | None = None,
    branch: Branch | None = None,
    status: str | None = None,
    test: str | None = None,
    date_from: date | None = None,
    date_to: date | None = None,
    priority: str | None = None,
) -> QuerySet[LabOrder]:
    """Visible orders, newest first, then id, with everything the representation shows. `test` is a catalogue
    code (orders with an item of that test); `date_from`/`date_to` are inclusive branch-local creation dates.
    Filters naming a patient or branch are checked by the caller (lab.api.serializers.LabOrderListParams)."""
    orders = visible_lab_orders(client)
    if patient is not None:
        orders = orders.filter(patient=patient)
    if branch is not None:
        orders = orders.filter(branch=branch)
    if status is not None:
        orders = orders.filter(status=status)
    if priority is not None:
        orders = orders.filter(priority=priority)
    if test is not None:
        items = LabOrderItem.objects.filter(order=OuterRef("pk"), test__code=test)
        orders = orders.filter(Exists(items))
    if branch is not None:
        orders = _created_on_local_days(orders, zone=branch.zone, date_from=date_from, date_to=date_to)
    elif date_from is not None or date_to is not None:
        orders = _created_on_local_days_anywhere(orders, date_from=date_from, date_to=date_to)
    return _with_detail(orders).order_by("-created_at", "id")


def _created_on_local_days(
    orders: QuerySet[LabOrder], *, zone: ZoneInfo, date_from: date | None, date_to: date | None
) -> QuerySet[LabOrder]:
    """Orders of one branch created in [date_from, date_to] at that branch: the local days' bounds in UTC, so
    PostgreSQL range-scans (and counts from) the (branch, created_at) index without reading the branch's zone
    for every row."""
    if date_from is not None and date_from > date.min:
        orders = orders.filter(created_at__gte=datetime.combine(date_from, time.min, tzinfo=zone))
    if date_to is not None and date_to < date.max:
        orders = orders.filter(created_at__lt=datetime.combine(date_to + timedelta(days=1), time.min, tzinfo=zone))
    return orders


def _created_on_local_days_anywhere(
    orders: QuerySet[LabOrder], *, date_from: date | None, date_to: date | None
) -> QuerySet[LabOrder]:
    """Orders of any branch created in [date_from, date_to] at their own branch: the exact test is on the
    branch-local date; UTC bounds a day wider on each side (every zone is within UTC-12..UTC+14) let
    PostgreSQL range-scan the created_at indexes instead of computing the local date of every order."""
    orders = orders.alias(local_date=_local_created_date())
    if date_from is not None:
        orders = orders.filter(local_date__gte=date_from)
        if date_from > date.min:
            orders = orders.filter(
                created_at__gte=datetime.combine(date_from - timedelta(days=1), time.min, tzinfo=UTC)
            )
    if date_to is not None:
        orders = orders.filter(local_date__lte=date_to)
        if date_to < date.max - timedelta(days=1):
            orders = orders.filter(created_at__lt=datetime.combine(date_to + timedelta(days=2), time.min, tzinfo=UTC))
    return orders


# --- Items and results for the standard channels (integrations.fhir) --------------------------------------


# Restricted by a join on the order's branch, not `order__in=visible_lab_orders(...)`: that semi-join against
# every order (for an unrestricted client too) led the planner away from the patient's own index; one
# patient's Observations took 30 ms of SQL at a million patients.


def visible_lab_items(client: ApiClient) -> QuerySet[LabOrderItem]:
    """Order items (a FHIR ServiceRequest, and a DiagnosticReport once resulted) of the visible orders."""
    allowed = client_branch_ids(client)
    items = LabOrderItem.objects.all()
    return items if allowed is None else items.filter(order__branch_id__in=allowed)


def visible_lab_results(client: ApiClient) -> QuerySet[LabResult]:
    """The current version of each result of the visible orders (earlier versions are history)."""
    allowed = client_branch_ids(client)
    results = LabResult.objects.filter(current=True)
    return results if allowed is None else results.filter(item__order__branch_id__in=allowed)
