"""Recording results (docs/api-rules.md §13): `POST /api/v1/lab/orders/{id}/results`.

Each posted result becomes a new version of the result of its analyte (or, for an imaging item, of its
report): the version before it is superseded, never rewritten (a trigger keeps versions, lab 0001). Values
are checked against the analyte (lab.interpretation) and flagged from the reference band for the patient's
sex and age at collection. A final result is corrected only by an `amended` version with a reason.

The whole post runs under the order's row lock (lab.locks), so two posts on one order are applied one after
the other and neither is lost: the second becomes the next version. Item and order statuses follow from the
current versions: a lab item is `final` when every analyte of its test has a final (or amended) result, else
`resulted`; an imaging item is `completed` with a final report, `in_progress` with a preliminary one; the
order is `final` when every item that is not cancelled is, else `resulted`.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import cache
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from clinic.errors import FieldError, InvalidState
from clinic.query_plans import grouped
from lab import events, interpretation, locks, notifications
from lab.models import (
    CRITICAL_FLAGS,
    Analyte,
    Flag,
    ItemStatus,
    LabOrder,
    LabOrderItem,
    LabResult,
    OrderStatus,
    ReferenceRange,
    ResultStatus,
    TestKind,
)
from lab.selectors import lab_order_items, lab_order_load

MAX_RESULTS = 200
# A device clock a little ahead of ours is not a result from the future.
CLOCK_TOLERANCE = timedelta(minutes=5)
RECORDABLE = (OrderStatus.ORDERED, OrderStatus.COLLECTED, OrderStatus.RESULTED, OrderStatus.FINAL)
FINAL_STATUSES = (ResultStatus.FINAL, ResultStatus.AMENDED)


@dataclass(frozen=True)
class ResultInput:
    """One posted result. The REST API sends test, analyte, value, unit and note; an HL7 ORU (docs/hl7-inbound.md) may add a `comparator` or a range's `value_high` (SN values) and the laboratory's own range and flag
    as it reported them (OBX-7, OBX-8), kept beside ours."""

    test: str
    value: Any
    analyte: str | None = None
    unit: Any = None
    note: str = ""
    comparator: str = ""
    value_high: Any = None
    reported_range: str = ""
    reported_flag: str = ""


@dataclass(frozen=True)
class _Checked:
    item: LabOrderItem
    analyte: Analyte | None
    parsed: interpretation.ParsedValue
    note: str
    earlier: LabResult | None  # the current version this one supersedes
    reported_range: str
    reported_flag: str


def collection_age_days(order: LabOrder, performed_at: datetime) -> int:
    """The patient's age in days on the branch-local day the specimen was collected (the result's day for
    imaging, which has no collection): the age the reference band is chosen by (also for the staff's
    result entry page, which shows the band before anything is recorded)."""
    moment = order.collected_at or performed_at
    day = timezone.localtime(moment, order.branch.zone).date()
    return max(0, interpretation.age_in_days(order.patient.date_of_birth, day))


def _acknowledgement_kept(earlier: LabResult | None, parsed: interpretation.ParsedValue, flag: str) -> LabResult | None:
    """The earlier version whose critical acknowledgement the new one carries: the same critical value posted
    again (verified as final, or amended to the same number) was already told to the doctor; a different
    value, or another flag, is a new critical value to acknowledge."""
    if earlier is None or earlier.critical_acknowledged_at is None or flag not in CRITICAL_FLAGS:
        return None
    same = (earlier.flag, earlier.value_quantity, earlier.comparator, earlier.value_quantity_high) == (
        flag,
        parsed.quantity,
        parsed.comparator,
        parsed.high,
    )
    return earlier if same else None


@dataclass
class _State:
    """What the post is checked against, read once under the order's lock: the order's items (by test code;
    a test is on an order once), their tests' analytes (by test and code), the analytes' reference ranges
    and the current result versions (by item and analyte). Item and order statuses are derived from it after
    the write, so they cost no further reads."""

    items: dict[str, LabOrderItem]
    analytes: dict[tuple[Any, str], Analyte]
    ranges: Mapping[Any, list[ReferenceRange]]
    current: dict[tuple[Any, Any], LabResult]


# Constant statements (docs/architecture.md §6): an HL7 ORU message and a REST results post run these on
# every post, and composing them through the ORM each time cost the ingest target of bench/results/hl7.md
# (bench/results/plans_retired.md). They are Django's public API: `Model.objects.raw()` builds the instances
# and a cursor runs the two status writes, over the models' `_meta` table names;
# tests/lab/test_results_statements.py holds the ORM queries they must agree with. Orders only keep results
# deterministic.
@cache
def _statements() -> dict[str, str]:
    analyte, reference_range = Analyte._meta.db_table, ReferenceRange._meta.db_table
    item, order, result = LabOrderItem._meta.db_table, LabOrder._meta.db_table, LabResult._meta.db_table
    # Each statement's ORM twin is in tests/lab/test_results_statements.py. The identifiers are the models'
    # own table names and every value is a parameter (hence the noqa).
    by_order = f"JOIN {item} i ON i.test_id = a.test_id WHERE i.order_id = %s"
    return {
        "analytes": f"SELECT a.* FROM {analyte} a {by_order} ORDER BY a.id",  # noqa: S608
        "ranges": (
            f"SELECT r.* FROM {reference_range} r JOIN {analyte} a ON a.id = r.analyte_id {by_order}"  # noqa: S608
            " ORDER BY r.analyte_id, r.sex, r.age_min_days"
        ),
        "current": (
            f"SELECT r.* FROM {result} r JOIN {item} i ON i.id = r.item_id"  # noqa: S608
            " WHERE i.order_id = %s AND r.current ORDER BY r.id"
        ),
        "item_status": f"UPDATE {item} SET status = %s WHERE id = %s",  # noqa: S608
        "order_status": f"UPDATE {order} SET status = %s, updated_at = %s WHERE id = %s",  # noqa: S608
    }


def _analytes_of(order_id: uuid.UUID) -> list[Analyte]:
    return list(Analyte.objects.raw(_statements()["analytes"], [order_id]))


def _ranges_of(order_id: uuid.UUID) -> list[ReferenceRange]:
    return list(ReferenceRange.objects.raw(_statements()["ranges"], [order_id]))


def _current_of(order_id: uuid.UUID) -> list[LabResult]:
    return list(LabResult.objects.raw(_statements()["current"], [order_id]))


def _write(statement: str, params: list[Any]) -> None:
    with connection.cursor() as cursor:
        cursor.execute(_statements()[statement], params)


def _state(order: LabOrder) -> _State:
    items = {item.test.code: item for item in lab_order_items(order.pk)}
    analytes = {(analyte.test_id, analyte.code): analyte for analyte in _analytes_of(order.pk)}
    current = {(result.item_id, result.analyte_id): result for result in _current_of(order.pk)}
    ranges = grouped(_ranges_of(order.pk), "analyte_id")
    return _State(items=items, analytes=analytes, ranges=ranges, current=current)


def _check(order: LabOrder, state: _State, results: Sequence[ResultInput], status: str) -> list[_Checked]:
    """Every posted result resolved against the order and its catalogue; all problems in one FieldError."""
    items, analytes, current = state.items, state.analytes, state.current
    errors: dict[str, str] = {}
    checked: list[_Checked] = []
    seen: dict[tuple[Any, Any], int] = {}
    for index, posted in enumerate(results):
        field = f"results.{index}"
        item = items.get(posted.test)
        if item is None:
            errors[f"{field}.test"] = f"{posted.test!r} is not a test of this order."
            continue
        if item.status == ItemStatus.CANCELLED:
            errors[f"{field}.test"] = f"The {posted.test} item is cancelled."
            continue
        analyte = None
        if item.test.kind == TestKind.LAB:
            if item.status == ItemStatus.ORDERED:
                # The item's state refuses it, not the body (docs/api-rules.md §13.3): 409, as for a final result
                # posted again; current_status is the item's, the state that has to change.
                raise InvalidState(
                    f"results.{index}: the {posted.test} specimen has not been collected; record the collection first.",
                    current_status=item.status,
                )
            analyte = analytes.get((item.test_id, posted.analyte or ""))
            if analyte is None:
                errors[f"{field}.analyte"] = (
                    f"Required: one of the {posted.test} analytes."
                    if not posted.analyte
                    else f"{posted.analyte!r} is not an analyte of {posted.test}."
                )
                continue
        elif posted.analyte:
            errors[f"{field}.analyte"] = "An imaging result is a report: send no analyte."
            continue
        key = (item.id, analyte.id if analyte else None)
        if key in seen:
            errors[f"{field}.analyte" if analyte else f"{field}.test"] = f"Already posted as results.{seen[key]}."
            continue
        seen[key] = index
        earlier = current.get(key)
        if status not in ResultStatus.values:
            pass  # the status itself is the 400, and none of its rules applies
        elif status == ResultStatus.AMENDED and (earlier is None or earlier.status not in FINAL_STATUSES):
            errors[f"{field}.value"] = "There is no final result to amend; post it as preliminary or final."
            continue
        elif status != ResultStatus.AMENDED and earlier is not None and earlier.status in FINAL_STATUSES:
            raise InvalidState(
                f"results.{index}: the {posted.analyte or posted.test} result is final; correct it with status "
                "amended and a reason.",
                current_status=order.status,
            )
        try:
            if posted.comparator or posted.value_high is not None:
                parsed = interpretation.parse_bounded(
                    analyte, posted.value, posted.unit, comparator=posted.comparator, high=posted.value_high
                )
            else:
                parsed = interpretation.parse_value(analyte, posted.value, posted.unit)
        except interpretation.ResultValueError as exc:
            errors[f"{field}.{exc.field}"] = exc.message
            continue
        checked.append(
            _Checked(
                item=item,
                analyte=analyte,
                parsed=parsed,
                note=posted.note.strip()[:1000],
                earlier=earlier,
                # Informational beside our own flag and range: a longer text is cut to the column, not refused.
                reported_range=posted.reported_range.strip()[:60],
                reported_flag=posted.reported_flag.strip()[:20],
            )
        )
    if errors:
        raise FieldError(errors)
    return checked


def _item_status(item: LabOrderItem, state: _State) -> str:
    """The item's status from the current versions (state.current, already holding this post's)."""
    statuses = [result.status for (item_id, _), result in state.current.items() if item_id == item.id]
    if item.test.kind == TestKind.IMAGING:
        done = any(status in FINAL_STATUSES for status in statuses)
        # A procedure the modality reported completed (MPPS) stays completed while its report is drafted.
        return ItemStatus.COMPLETED if done or item.status == ItemStatus.COMPLETED else ItemStatus.IN_PROGRESS
    analyte_ids = {analyte.id for (test_id, _), analyte in state.analytes.items() if test_id == item.test_id}
    finals = {
        analyte_id
        for (item_id, analyte_id), result in state.current.items()
        if item_id == item.id and result.status in FINAL_STATUSES
    }
    return ItemStatus.FINAL if analyte_ids and analyte_ids <= finals else ItemStatus.RESULTED


def _order_done(state: _State) -> bool:
    """Every item that is not cancelled is final (lab) or completed with a final report (imaging: an item
    the modality completed by MPPS is done only once its final report is in)."""
    reported = {item_id for (item_id, _), result in state.current.items() if result.status in FINAL_STATUSES}
    for item in state.items.values():
        if item.status == ItemStatus.CANCELLED:
            continue
        if item.status not in (ItemStatus.FINAL, ItemStatus.COMPLETED):
            return False
        if item.test.kind == TestKind.IMAGING and item.id not in reported:
            return False
    return True


def lab_order_analytes(order_id: uuid.UUID) -> list[Analyte]:
    """The analytes of every test on an order, by id (the statement the results service reads them with)."""
    return _analytes_of(order_id)


def lab_results_record(
    *,
    order: LabOrder,
    results: Sequence[ResultInput],
    performed_at: datetime,
    performer: str,
    status: str,
    reason: str = "",
    recorded_by: str = "system",
) -> LabOrder:
    """Record the posted results as new versions (see the module docstring). 400 naming
    `results.<i>.test|analyte|value|unit`, `performed_at`, `performer`, `status` or `reason`; 409
    invalid_state on a cancelled order, and for a preliminary or final result over a final one. Returns the
    order as it now stands with everything its representation shows (what its event carried, when one was
    published). Atomic (in _record: a second atomic block would add a savepoint)."""
    written, shown = _record(
        order_id=order.pk,
        results=results,
        performed_at=performed_at,
        performer=performer,
        status=status,
        reason=reason,
        recorded_by=recorded_by,
    )
    return shown if shown is not None else lab_order_load(written.pk)


def lab_results_record_by_id(
    *,
    order_id: uuid.UUID,
    results: Sequence[ResultInput],
    performed_at: datetime,
    performer: str,
    status: str,
    reason: str = "",
    recorded_by: str = "system",
) -> LabOrder:
    """lab_results_record for an order known by id (a channel found it through its own branch-restricted
    read: lab.ports.oru_target), returning the order row as written (a channel shows no detail).
    LabOrder.DoesNotExist when there is no such order."""
    written, _ = _record(
        order_id=order_id,
        results=results,
        performed_at=performed_at,
        performer=performer,
        status=status,
        reason=reason,
        recorded_by=recorded_by,
    )
    return written


@transaction.atomic
def _record(
    *,
    order_id: uuid.UUID,
    results: Sequence[ResultInput],
    performed_at: datetime,
    performer: str,
    status: str,
    reason: str,
    recorded_by: str,
) -> tuple[LabOrder, LabOrder | None]:
    """The write of both entry points: (the order row as written, the order with its detail when an event
    was published, else None)."""
    reason, performer = reason.strip(), performer.strip()
    errors: dict[str, str] = {}
    if status not in ResultStatus.values:
        errors["status"] = f"Must be one of: {', '.join(ResultStatus.values)}."
    if status == ResultStatus.AMENDED and not reason:
        errors["reason"] = "Say why the final result is amended."
    if not performer:
        errors["performer"] = "Who performed the test is required."
    if performed_at > timezone.now() + CLOCK_TOLERANCE:
        errors["performed_at"] = "Cannot be in the future."
    if not results:
        errors["results"] = "Post at least one result."
    order = locks.lab_order_lock(order_id=order_id, with_patient=True)
    if order.status not in RECORDABLE:
        raise InvalidState(f"Cannot record results on an order that is {order.status}.", current_status=order.status)
    if "performed_at" not in errors and performed_at < order.created_at - CLOCK_TOLERANCE:
        errors["performed_at"] = "Cannot be before the order was placed."
    # One 400 names every bad field: the post's own and each result's.
    state = _state(order)
    try:
        checked = _check(order, state, results, status)
    except FieldError as exc:
        errors.update(exc.errors)
        checked = []
    if errors:
        raise FieldError(errors)
    sex = order.patient.gender
    age_days = collection_age_days(order, performed_at)
    critical = False
    versions = []
    for entry in checked:
        analyte = entry.analyte
        ranges = state.ranges.get(analyte.id, []) if analyte is not None else []
        meaning = interpretation.interpretation_for(analyte, entry.parsed, ranges=ranges, sex=sex, age_days=age_days)
        critical = critical or meaning.flag in (Flag.CRITICAL_LOW, Flag.CRITICAL_HIGH)
        acknowledged = _acknowledgement_kept(entry.earlier, entry.parsed, meaning.flag)
        versions.append(
            LabResult(
                item=entry.item,
                analyte=analyte,
                # The current version is always the latest (every version is current when written), and the
                # order's lock keeps it so until this transaction ends.
                version=entry.earlier.version + 1 if entry.earlier is not None else 1,
                status=status,
                value_quantity=entry.parsed.quantity,
                comparator=entry.parsed.comparator,
                value_quantity_high=entry.parsed.high,
                value_text=entry.parsed.text,
                unit=entry.parsed.unit,
                flag=meaning.flag,
                reference_low=meaning.reference_low,
                reference_high=meaning.reference_high,
                reported_range=entry.reported_range,
                reported_flag=entry.reported_flag,
                note=entry.note,
                reason=reason[:500] if status == ResultStatus.AMENDED else "",
                performed_at=performed_at,
                performer=performer[:200],
                recorded_by=recorded_by[:200],
                critical_acknowledged_by=acknowledged.critical_acknowledged_by if acknowledged else "",
                critical_acknowledged_at=acknowledged.critical_acknowledged_at if acknowledged else None,
                critical_acknowledgement_note=acknowledged.critical_acknowledgement_note if acknowledged else "",
            )
        )
    superseded = [entry.earlier.pk for entry in checked if entry.earlier is not None]
    if superseded:
        LabResult.objects.filter(pk__in=superseded).update(current=False)
    LabResult.objects.bulk_create(versions)
    state.current.update({(version.item_id, version.analyte_id): version for version in versions})
    changed = []
    for item in {entry.item.id: entry.item for entry in checked}.values():
        new_status = _item_status(item, state)
        if new_status != item.status:
            item.status = new_status
            changed.append(item)
    for item in changed:
        _write("item_status", [item.status, item.pk])
    was_final = order.status == OrderStatus.FINAL
    order.status = OrderStatus.FINAL if _order_done(state) else OrderStatus.RESULTED
    order.updated_at = timezone.now()
    _write("order_status", [order.status, order.updated_at, order.pk])
    # A critical value is sent at once, whatever else the post holds; the order's finalization and any
    # amendment follow as their own events.
    kinds = [events.LAB_RESULT_CRITICAL] if critical else []
    finalized = status != ResultStatus.AMENDED and order.status == OrderStatus.FINAL and not was_final
    if status == ResultStatus.AMENDED:
        kinds.append(events.LAB_RESULT_AMENDED)
    elif finalized:
        kinds.append(events.LAB_RESULT_FINALIZED)
    shown = events.lab_order_publish(kinds[0], order, *kinds[1:]) if kinds else None
    if finalized:
        notifications.results_ready_schedule(order)
    return order, shown
