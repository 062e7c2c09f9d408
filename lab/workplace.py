"""What the staff's result entry page shows of an order (lab.admin_workplace): each lab item with its test's
analytes, the reference band the results service will read a value against (lab.results: the patient's sex
and age on the day of collection), the current version of each result, and whether a value may be entered."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from django.db.models import Prefetch
from django.utils import timezone

from lab import interpretation
from lab.models import Analyte, ItemStatus, LabOrder, LabOrderItem, LabResult, ReferenceRange, TestKind
from lab.results import FINAL_STATUSES, collection_age_days

# Lab items whose specimen is in: results may be entered (until each is final).
ENTERABLE_ITEM_STATUSES = (ItemStatus.COLLECTED, ItemStatus.RESULTED)


@dataclass(frozen=True)
class EntryRow:
    analyte: Analyte
    reference_low: Decimal | None
    reference_high: Decimal | None
    current: LabResult | None  # the current version, if any
    enterable: bool  # the specimen is in and the result is not final yet


@dataclass(frozen=True)
class EntryItem:
    item: LabOrderItem
    rows: list[EntryRow]
    waiting_for_specimen: bool


def result_entry_sheet(order: LabOrder) -> list[EntryItem]:
    """The lab items of `order` (loaded through the reader's branch rule, with its items, their results, the
    branch and the patient: lab.selectors.lab_order_get) as the entry page lists them."""
    items = [item for item in order.items.all() if item.test.kind == TestKind.LAB]
    ranges = ReferenceRange.objects.order_by("sex", "age_min_days", "id")
    analytes = (
        Analyte.objects.filter(test_id__in=[item.test_id for item in items])
        .prefetch_related(Prefetch("ranges", queryset=ranges))
        .order_by("position", "code")
    )
    by_test: dict[object, list[Analyte]] = {}
    for analyte in analytes:
        by_test.setdefault(analyte.test_id, []).append(analyte)
    age_days = collection_age_days(order, timezone.now())
    sheet = []
    for item in items:
        current = {result.analyte_id: result for result in item.results.all() if result.current}
        rows = []
        for analyte in by_test.get(item.test_id, []):
            band = interpretation.reference_range_for(analyte.ranges.all(), sex=order.patient.gender, age_days=age_days)
            result = current.get(analyte.id)
            rows.append(
                EntryRow(
                    analyte=analyte,
                    reference_low=band.low if band is not None else None,
                    reference_high=band.high if band is not None else None,
                    current=result,
                    enterable=item.status in ENTERABLE_ITEM_STATUSES
                    and (result is None or result.status not in FINAL_STATUSES),
                )
            )
        sheet.append(EntryItem(item=item, rows=rows, waiting_for_specimen=item.status == ItemStatus.ORDERED))
    return sheet
