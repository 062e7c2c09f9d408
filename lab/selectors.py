"""Reads of the lab catalogue and orders, always through the calling client's branch restriction."""

from __future__ import annotations

import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from functools import cache
from typing import Any, cast
from zoneinfo import ZoneInfo

from django.contrib.postgres.fields import ArrayField
from django.db import connection
from django.db.models import (
    Case,
    CharField,
    Count,
    DateField,
    DateTimeField,
    Exists,
    F,
    Func,
    IntegerField,
    Min,
    Model,
    OuterRef,
    Prefetch,
    Q,
    QuerySet,
    Subquery,
    TimeField,
    UUIDField,
    When,
)
from django.db.models.functions import Cast
from django.utils import timezone

from clinic.errors import NotFound
from clinic.lib.rows import columns, split
from clinic.models import Branch, Doctor
from clinic.query_plans import AnyOf, QueryPlan, Slot, grouped, prefetched
from clinic.visibility import BranchRestricted, client_branch_ids
from integrations.models import ApiClient
from lab.models import (
    CRITICAL_FLAGS,
    WORKLIST_STATUSES,
    Analyte,
    ImagingStation,
    LabOrder,
    LabOrderItem,
    LabResult,
    LabTest,
    OrderStatus,
    Priority,
    ReferenceRange,
    TestKind,
)
from patients.models import Patient
from patients.selectors import Span, any_of, any_span

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


def visible_lab_orders(client: BranchRestricted) -> QuerySet[LabOrder]:
    return LabOrder.objects.visible_to(client)


def _with_detail(orders: QuerySet[LabOrder]) -> QuerySet[LabOrder]:
    """Everything the representation shows: the order with branch, patient and doctor; its items
    with their tests; their results (every version) with their analytes."""
    results = LabResult.objects.select_related("analyte").order_by("analyte__position", "analyte__code", "version")
    items = (
        LabOrderItem.objects.select_related("test")
        .order_by("position", "id")
        .prefetch_related(Prefetch("results", queryset=results))
    )
    return orders.select_related("branch", "patient", "doctor").prefetch_related(Prefetch("items", queryset=items))


# An order's detail for its events, precompiled (clinic.query_plans, docs/architecture.md §6): every results post
# and ORU message publishes its order's event, and the HL7 ingest target is met with these plans, not without
# (bench/results/plans_retired.md). What _with_detail loads, in the same order, attached as prefetch_related
# attaches it. A client's read (lab_order_get) goes through the ORM and the branch rule.
_ORDER = QueryPlan(
    lambda: LabOrder.objects.select_related("branch", "patient", "doctor").filter(id=Slot("order", UUIDField()))
)
_ORDER_ITEMS = QueryPlan(
    lambda: (
        LabOrderItem.objects.select_related("test")
        .filter(order_id=Slot("order", UUIDField()))
        .order_by("position", "id")
    )
)
_ORDER_RESULTS = QueryPlan(
    lambda: (
        LabResult.objects.select_related("analyte")
        .filter(item__order_id=Slot("order", UUIDField()))
        .order_by("analyte__position", "analyte__code", "version")
    )
)


def lab_order_items(order_id: uuid.UUID) -> list[LabOrderItem]:
    """An order's items with their tests, by position, whatever its branch: for the services (which have
    loaded the order through the client's restriction or the channel's branches), never for a request."""
    return _ORDER_ITEMS.fetch(order=order_id)


def lab_order_load(order_id: uuid.UUID) -> LabOrder:
    """An order with everything its representation shows, whatever its branch: for the events its own writes
    publish (lab.events), never for a client's request. LabOrder.DoesNotExist when unknown."""
    found = _ORDER.fetch(order=order_id)
    if not found:
        raise LabOrder.DoesNotExist(f"No lab order {order_id}.")
    return _with_items(found[0])


def _with_items(order: LabOrder) -> LabOrder:
    """The order (read with its branch, patient and doctor) with its items and every version of their results,
    attached as _with_detail's prefetch_related attaches them, by the plans."""
    items = lab_order_items(order.pk)
    results = grouped(_ORDER_RESULTS.fetch(order=order.pk), "item_id")
    for item in items:
        item.order = order
        for result in results.get(item.id, ()):
            result.item = item
        prefetched(item, "results", results.get(item.id, []))
    prefetched(order, "items", items)
    return order


def lab_order_get(*, client: BranchRestricted, ref: str, detail: bool = True) -> LabOrder:
    """By UUID; 404 when unknown, malformed or at a branch the client may not see (no existence oracle). With
    `detail`, everything the representation shows; without, the row with its branch (what a write needs)."""
    try:
        key = uuid.UUID(ref)
    except ValueError:
        raise NotFound(f"No lab order {ref!r}.") from None
    # The row through the branch rule, by a constant statement (docs/architecture.md §6: composing it through
    # the ORM, with its branch, patient and doctor, was most of the detail's CPU) with the client's branch
    # ids as the rule's parameter (LabOrder.objects.visible_to); then its items and results by the event's
    # plans. tests/lab/test_order_statement.py holds it to the ORM read.
    allowed = client_branch_ids(client)
    joined = _ORDER_DETAIL if detail else _ORDER_ROW
    statement = _order_statement(joined, allowed is not None)
    with connection.cursor() as cursor:
        cursor.execute(statement, [key] if allowed is None else [key, list(allowed)])
        row = cursor.fetchone()
    if row is None:
        raise NotFound(f"No lab order {ref!r}.")
    order, *related = split(row, LabOrder, *joined)
    for name, instance in zip(("branch", "patient", "doctor"), related, strict=False):
        setattr(order, name, instance)
    detailed = cast(LabOrder, order)
    return _with_items(detailed) if detail else detailed


_ORDER_ROW: tuple[type[Model], ...] = (Branch,)
_ORDER_DETAIL: tuple[type[Model], ...] = (Branch, Patient, Doctor)


@cache
def _order_statement(joined: tuple[type[Model], ...], restricted: bool) -> str:
    meta: Any = LabOrder._meta
    names = ("branch", "patient", "doctor")[: len(joined)]
    selected = ", ".join([columns(LabOrder, "o"), *(columns(m, n) for m, n in zip(joined, names, strict=True))])
    joins = "".join(
        f' JOIN "{model._meta.db_table}" {name} ON {name}.id = o."{meta.get_field(name).column}"'
        for model, name in zip(joined, names, strict=True)
    )
    at = f' AND o."{meta.get_field("branch").column}" = ANY(%s)' if restricted else ""
    return f'SELECT {selected} FROM "{meta.db_table}" o{joins} WHERE o.id = %s{at}'  # noqa: S608 - _meta


def lab_order_row_get(*, client: ApiClient, ref: str) -> LabOrder:
    """lab_order_get without the detail: for the writes, which lock the order and show it afterwards."""
    return lab_order_get(client=client, ref=ref, detail=False)


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


def visible_lab_items(client: ApiClient) -> QuerySet[LabOrderItem]:
    """Order items (a FHIR ServiceRequest, and a DiagnosticReport once resulted) of the visible orders."""
    return LabOrderItem.objects.visible_to(client)


def visible_lab_results(client: ApiClient) -> QuerySet[LabResult]:
    """The current version of each result of the visible orders (earlier versions are history)."""
    return LabResult.objects.visible_to(client).filter(current=True)


def visible_lab_observations(client: ApiClient) -> QuerySet[LabResult]:
    """The current analyte results (a FHIR Observation each; an imaging report is its DiagnosticReport's
    conclusion, not an Observation), with the item and order joined and the analyte and branch prefetched."""
    return (
        visible_lab_results(client)
        .filter(analyte__isnull=False)
        .select_related("item__order")
        .prefetch_related("analyte", "item__order__branch")
    )


def visible_lab_reports(client: ApiClient) -> QuerySet[LabOrderItem]:
    """The visible items with a current result (a FHIR DiagnosticReport), each with its order, test and
    branch, and its current results in report order as `current_results`."""
    current = LabResult.objects.filter(current=True).order_by("analyte__position", "analyte__code", "id")
    return (
        visible_lab_items(client)
        .filter(Exists(LabResult.objects.filter(item=OuterRef("pk"), current=True)))
        .select_related("order")
        .prefetch_related("test", "order__branch", Prefetch("results", queryset=current, to_attr="current_results"))
    )


# --- Items for the HL7 results channel (integrations.hl7, through lab.ports) ---------------------------------


def lab_items_at_branches(branch_ids: Sequence[uuid.UUID]) -> QuerySet[LabOrderItem]:
    """The items of orders at these branches only, for a channel bound to branches (a registered HL7 sender,
    docs/hl7-inbound.md): an order elsewhere is never loaded, and is answered as one that does not exist."""
    return LabOrderItem.objects.at_branches(list(branch_ids))


# Precompiled (as _ORDER above): every ORU message looks its order item up by accession number, at the
# sender's branches only (the branch rule's at_branches, as an array parameter).
_ITEM_AT_BRANCHES_BY_ACCESSION = QueryPlan(
    lambda: (
        LabOrderItem.objects.filter(AnyOf(F("order__branch_id"), Slot("branches", ArrayField(UUIDField()))))
        .select_related("test", "order__patient")
        .filter(accession_number=Slot("accession", CharField()))
    )
)


def lab_item_for_report(
    *,
    branch_ids: Sequence[uuid.UUID],
    accession_numbers: Sequence[str],
    order_numbers: Sequence[str] = (),
    test_identifiers: Sequence[str] = (),
) -> LabOrderItem | None:
    """The order item a laboratory reports on, at one of `branch_ids` only, with its test and its order's
    patient: the first of `accession_numbers` that is one, else the item of one of `order_numbers` whose test
    has one of `test_identifiers` as its code (any case) or its LOINC code. Blank numbers are skipped."""
    branches = list(branch_ids)
    for number in dict.fromkeys(accession_numbers):
        if number:
            found = _ITEM_AT_BRANCHES_BY_ACCESSION.fetch(branches=branches, accession=number)
            if found:
                return found[0]
    numbers = [number for number in dict.fromkeys(order_numbers) if number]
    tests = [code for code in dict.fromkeys(test_identifiers) if code]
    if not numbers or not tests:
        return None
    by_test = Q()
    for code in tests:
        by_test |= Q(test__code__iexact=code) | Q(test__loinc_code=code)
    return (
        lab_items_at_branches(branches)
        .select_related("test", "order__patient")
        .filter(by_test, order__order_number__in=numbers)
        .order_by("position", "id")
        .first()
    )


# --- The imaging worklist (integrations.dicom) --------------------------------------------------------------


@dataclass(frozen=True)
class TextMatch:
    """A value to match exactly, or (`wildcard`) a pattern where `*` is any run of characters and `?` one;
    `insensitive` ignores case (person names, PS3.4 C.2.2.2.1)."""

    value: str
    wildcard: bool = False
    insensitive: bool = False

    def lookup(self, field: str) -> Q:
        i = "i" if self.insensitive else ""
        if not self.wildcard:
            return Q(**{f"{field}__{i}exact": self.value})
        if self.value.endswith("*") and not any(c in self.value[:-1] for c in "*?"):
            return Q(**{f"{field}__{i}startswith": self.value[:-1]})  # the common case, an index range scan
        pattern = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in self.value)
        return Q(**{f"{field}__{i}regex": f"^{pattern}$"})


@dataclass(frozen=True)
class WorklistQuery:
    """What a modality asks for; None matches anything. `scheduled_from`/`scheduled_to` bound the scheduled
    start (inclusive, exclusive); `time_from`/`time_to` bound its time of day at the branch (inclusive,
    exclusive) on any day, for a time asked without a date."""

    branch_id: uuid.UUID
    modality: TextMatch | None = None
    scheduled_from: datetime | None = None
    scheduled_to: datetime | None = None
    station_ae_title: TextMatch | None = None
    patient_id: TextMatch | None = None
    accession_number: TextMatch | None = None
    patient_family_name: TextMatch | None = None
    patient_given_name: TextMatch | None = None
    time_from: time | None = None
    time_to: time | None = None
    statuses: tuple[str, ...] = WORKLIST_STATUSES
    station_name: TextMatch | None = None
    # A name query constraining only the ideographic or phonetic groups: names are stored alphabetic only.
    nothing: bool = False


@dataclass(frozen=True)
class WorklistEntry:
    item_id: uuid.UUID
    accession_number: str
    status: str
    scheduled_at: datetime
    test_code: str
    test_name: str
    loinc_code: str
    modality: str
    order_number: str
    priority: str
    doctor_name: str
    patient_id: str
    first_name: str
    last_name: str
    date_of_birth: date
    gender: str
    station_ae_title: str | None
    time_zone: str
    patient_uuid: uuid.UUID
    station_name: str | None
    station_location: str | None


def imaging_worklist(query: WorklistQuery, *, limit: int) -> list[WorklistEntry]:
    """The open imaging items of one branch matching `query`, by scheduled time then id, at most `limit`: one
    query, which range-scans the partial index of open items by scheduled time (lab.models
    laborderitem_worklist) or finds the accession number by its unique index."""
    if query.nothing:
        return []
    stations = ImagingStation.objects.filter(
        branch_id=OuterRef("order__branch_id"), modality=OuterRef("test__modality")
    )
    items: QuerySet[LabOrderItem] = LabOrderItem.objects.at_branches([query.branch_id]).filter(
        status__in=query.statuses, test__kind=TestKind.IMAGING
    )
    if query.modality is not None:
        items = items.filter(query.modality.lookup("test__modality"))
    if query.scheduled_from is not None:
        items = items.filter(scheduled_at__gte=query.scheduled_from)
    if query.scheduled_to is not None:
        items = items.filter(scheduled_at__lt=query.scheduled_to)
    if query.patient_id is not None:
        items = items.filter(query.patient_id.lookup("order__patient__patient_id"))
    if query.accession_number is not None:
        items = items.filter(query.accession_number.lookup("accession_number"))
    if query.patient_family_name is not None:
        items = items.filter(query.patient_family_name.lookup("order__patient__last_name"))
    if query.patient_given_name is not None:
        items = items.filter(query.patient_given_name.lookup("order__patient__first_name"))
    if query.time_from is not None or query.time_to is not None:
        local = Func(
            F("order__branch__time_zone"), F("scheduled_at"), function="timezone", output_field=DateTimeField()
        )
        items = items.annotate(local_time=Cast(local, TimeField()))
        if query.time_from is not None:
            items = items.filter(local_time__gte=query.time_from)
        if query.time_to is not None:
            items = items.filter(local_time__lt=query.time_to)
    if query.station_ae_title is not None:
        items = items.filter(Exists(stations.filter(query.station_ae_title.lookup("ae_title"))))
    if query.station_name is not None:
        items = items.filter(Exists(stations.filter(query.station_name.lookup("name"))))
    rows = (
        items.annotate(
            station=Subquery(stations.values("ae_title")[:1]),
            station_name=Subquery(stations.values("name")[:1]),
            station_location=Subquery(stations.values("location")[:1]),
        )
        .order_by("scheduled_at", "id")
        .values_list(
            "id",
            "accession_number",
            "status",
            "scheduled_at",
            "test__code",
            "test__name",
            "test__loinc_code",
            "test__modality",
            "order__order_number",
            "order__priority",
            "order__doctor__name",
            "order__patient__patient_id",
            "order__patient__first_name",
            "order__patient__last_name",
            "order__patient__date_of_birth",
            "order__patient__gender",
            "station",
            "order__branch__time_zone",
            "order__patient_id",
            "station_name",
            "station_location",
        )[:limit]
    )
    return [WorklistEntry(*row) for row in rows]


# --- What a FHIR search asks of lab rows (integrations.fhir.registry: Observation, ServiceRequest, -----------
# DiagnosticReport). A filter is one search parameter's alternatives in the app's own terms: each field given
# narrows to the rows matching one of its values (None does not narrow); the search ANDs its filters.

ITEM_ACTIVE = ("ordered", "collected", "scheduled", "in_progress")
ITEM_DONE = ("resulted", "final", "completed")


@dataclass(frozen=True)
class ResultFilter:
    """Current analyte results (FHIR Observation)."""

    ids: tuple[uuid.UUID, ...] | None = None
    patient_ids: tuple[uuid.UUID, ...] | None = None
    item_ids: tuple[uuid.UUID, ...] | None = None  # the order item (ServiceRequest) it answers
    loinc_codes: tuple[str, ...] | None = None  # the analyte's
    statuses: tuple[str, ...] | None = None
    test_kinds: tuple[str, ...] | None = None
    performed: tuple[Span, ...] | None = None
    recorded: tuple[Span, ...] | None = None  # when this version was recorded: the resource's last update


def lab_result_condition(where: ResultFilter) -> Q:
    return (
        any_of("pk", where.ids)
        & any_of("item__order__patient_id", where.patient_ids)
        & any_of("item_id", where.item_ids)
        & any_of("analyte__loinc_code", where.loinc_codes)
        & any_of("status", where.statuses)
        & any_of("item__test__kind", where.test_kinds)
        & any_span("performed_at", where.performed)
        & any_span("recorded_at", where.recorded)
    )


@dataclass(frozen=True)
class ItemFilter:
    """Order items (FHIR ServiceRequest; DiagnosticReport once resulted). `states`: active (ordered to in
    progress), completed (resulted to completed), revoked (the item or its order cancelled)."""

    ids: tuple[uuid.UUID, ...] | None = None
    patient_ids: tuple[uuid.UUID, ...] | None = None
    loinc_codes: tuple[str, ...] | None = None  # the test's
    states: tuple[str, ...] | None = None
    ordered: tuple[Span, ...] | None = None
    order_updated: tuple[Span, ...] | None = None


def _item_state(state: str) -> Q:
    cancelled = Q(order__status=OrderStatus.CANCELLED) | Q(status="cancelled")
    if state == "active":
        return Q(status__in=ITEM_ACTIVE) & ~cancelled
    if state == "completed":
        return Q(status__in=ITEM_DONE) & ~cancelled
    if state == "revoked":
        return cancelled
    return Q(pk__in=[])


def lab_item_condition(where: ItemFilter) -> Q:
    states = Q()
    if where.states is not None:
        states = Q(pk__in=[])
        for state in where.states:
            states |= _item_state(state)
    return (
        any_of("pk", where.ids)
        & any_of("order__patient_id", where.patient_ids)
        & any_of("test__loinc_code", where.loinc_codes)
        & states
        & any_span("order__created_at", where.ordered)
        & any_span("order__updated_at", where.order_updated)
    )


# --- The staff workplace: the lab work list and the unacknowledged critical results (lab.admin_workplace, --
# and a dashboard's counts and links)

OPEN_ORDER_STATUSES = (OrderStatus.ORDERED, OrderStatus.COLLECTED, OrderStatus.RESULTED)
# The turnaround target of an order, from its placement to its release. The catalogue has no per-test target,
# so the priority sets it, as laboratories commonly promise: a STAT result within the hour, an urgent one
# within four hours, a routine one within the day.
TURNAROUND_TARGETS: dict[str, timedelta] = {
    Priority.STAT: timedelta(hours=1),
    Priority.URGENT: timedelta(hours=4),
    Priority.ROUTINE: timedelta(hours=24),
}
_PRIORITY_RANK = Case(
    When(priority=Priority.STAT, then=0), When(priority=Priority.URGENT, then=1), default=2, output_field=IntegerField()
)


def critical_unacknowledged(*, client: BranchRestricted) -> QuerySet[LabResult]:
    """The current critical results (LL, HH) of the visible orders that nobody has acknowledged yet, oldest
    first, with their analyte, test, order, patient and branch (a partial index holds exactly these rows)."""
    return (
        LabResult.objects.visible_to(client)
        .filter(current=True, flag__in=CRITICAL_FLAGS, critical_acknowledged_at__isnull=True)
        .select_related("analyte", "item__test", "item__order__patient", "item__order__branch")
        .order_by("recorded_at", "id")
    )


def _open_critical() -> Exists:
    """Whether the outer order has a current critical result not yet acknowledged."""
    return Exists(
        LabResult.objects.filter(
            item__order=OuterRef("pk"), current=True, flag__in=CRITICAL_FLAGS, critical_acknowledged_at__isnull=True
        )
    )


def orders_with_critical_unacknowledged(orders: QuerySet[LabOrder]) -> QuerySet[LabOrder]:
    """Those of `orders` with a current critical result not yet acknowledged (the admin list's filter and
    the dashboard's card).

    The open critical results are read first, on their own, from their partial index
    (labresult_critical_open): a few dozen in a laboratory that acknowledges its calls. As one subquery the
    planner cannot know how few they are (a critical flag and a missing acknowledgement are far from
    independent: it guessed 18,602 rows for 28 at 10M results), and under the count's LIMIT it walked two
    million order items in order to find them (3.6 s at 1M patients). Given their item ids as a list, it
    looks the items and orders up by primary key."""
    open_items = list(
        LabResult.objects.filter(current=True, flag__in=CRITICAL_FLAGS, critical_acknowledged_at__isnull=True)
        .order_by()
        .values_list("item_id", flat=True)
    )
    return orders.filter(pk__in=LabOrderItem.objects.filter(pk__in=open_items).values("order_id"))


@dataclass(frozen=True)
class WorkListEntry:
    """An open lab order on the work list: its lab items (tests) and the turnaround clock."""

    order: LabOrder  # with its branch and patient
    items: list[LabOrderItem]  # the lab items with their tests, by position
    since_ordered: timedelta
    since_collected: timedelta | None
    target: timedelta
    critical_unacknowledged: bool

    @property
    def overdue(self) -> bool:
        return self.since_ordered > self.target


def work_list(*, client: BranchRestricted, limit: int = 100, now: datetime | None = None) -> list[WorkListEntry]:
    """The open orders with lab items at the client's branches (ordered, collected or resulted: not yet
    released), STAT first, then urgent, then routine, each oldest first; at most `limit`."""
    now = now or timezone.now()
    lab_items = LabOrderItem.objects.filter(order=OuterRef("pk"), test__kind=TestKind.LAB)
    items = LabOrderItem.objects.filter(test__kind=TestKind.LAB).select_related("test").order_by("position", "id")
    orders = list(
        visible_lab_orders(client)
        .filter(Exists(lab_items), status__in=OPEN_ORDER_STATUSES)
        .annotate(open_critical=_open_critical())
        .select_related("branch", "patient")
        .prefetch_related(Prefetch("items", queryset=items, to_attr="lab_items"))
        .order_by(_PRIORITY_RANK, "created_at", "id")[:limit]
    )
    return [
        WorkListEntry(
            order=order,
            items=order.lab_items,
            since_ordered=now - order.created_at,
            since_collected=now - order.collected_at if order.collected_at else None,
            target=TURNAROUND_TARGETS.get(order.priority, TURNAROUND_TARGETS[Priority.ROUTINE]),
            critical_unacknowledged=order.open_critical,
        )
        for order in orders
    ]


def released_lab_orders(*, client: BranchRestricted, since: datetime, limit: int = 20) -> QuerySet[LabOrder]:
    """The visible orders released (final) since `since`, newest first: the work list's report links."""
    return (
        visible_lab_orders(client)
        .filter(status=OrderStatus.FINAL, updated_at__gte=since)
        .select_related("branch", "patient")
        .order_by("-updated_at", "id")[:limit]
    )


# Dashboard reads: the lab's work list at a glance for the admin's home page, from the open orders of the
# reader's branches (the (branch, created_at) index carries status and priority).


@dataclass(frozen=True)
class LabWork:
    """Open orders (not yet final nor cancelled) by priority, and since when the oldest has been open."""

    open_by_priority: dict[str, int]
    oldest_open_since: datetime | None

    @property
    def open_orders(self) -> int:
        return sum(self.open_by_priority.values())


def lab_work_today(*, client: BranchRestricted) -> LabWork:
    """The work list's numbers, in one grouped read of the open orders."""
    open_orders = LabOrder.objects.visible_to(client).filter(status__in=OPEN_ORDER_STATUSES)
    by_priority = dict.fromkeys(Priority.values, 0)
    oldest: datetime | None = None
    for priority, n, since in open_orders.values_list("priority").annotate(Count("pk"), Min("created_at")).order_by():
        by_priority[priority] = n
        oldest = since if oldest is None or since < oldest else oldest
    return LabWork(open_by_priority=by_priority, oldest_open_since=oldest)
