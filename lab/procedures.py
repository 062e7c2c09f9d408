"""Writes on imaging procedures as the modality reports them (DICOM Modality Performed Procedure Step,
docs/operations.md §6): started (scheduled -> in_progress), completed (in_progress -> completed) or discontinued
(in_progress -> cancelled). Each takes the order's row lock first (lab.locks), like every other change of
an order, and publishes its event in the same transaction.

A modality names the item by its accession number when it starts the procedure, and by the MPPS instance
UID it chose from then on; the UID is kept on the item (unique), so a repeated or late N-SET finds the same
item. `branch_id` is the calling modality's branch: an item of another branch is unknown to it.
"""

from __future__ import annotations

import uuid

from django.db import transaction
from django.utils import timezone

from clinic.errors import Conflict, InvalidState, NotFound
from lab import events, locks
from lab.models import ItemStatus, LabOrderItem, OrderStatus, TestKind

DISCONTINUED_REASON = "Discontinued at the modality (DICOM MPPS)."


def _locked_item(item_filter: dict[str, object], *, branch_id: uuid.UUID, unknown: str) -> LabOrderItem:
    """The imaging item of the branch matching `item_filter`, re-read after its order's row lock."""
    found = (
        LabOrderItem.objects.filter(order__branch_id=branch_id, test__kind=TestKind.IMAGING, **item_filter)
        .values_list("id", "order_id")
        .first()
    )
    if found is None:
        raise NotFound(unknown)
    item_id, order_id = found
    locks.lab_order_lock(order_id=order_id)
    return LabOrderItem.objects.select_related("order").get(pk=item_id)


@transaction.atomic
def imaging_procedure_start(*, branch_id: uuid.UUID, accession_number: str, mpps_instance_uid: str) -> LabOrderItem:
    """scheduled -> in_progress, remembering the MPPS instance UID. 404 for an accession number unknown at the
    branch (or not imaging); 409 when the UID is already used or the item is not scheduled."""
    if LabOrderItem.objects.filter(mpps_instance_uid=mpps_instance_uid).exists():
        raise Conflict(f"The procedure step {mpps_instance_uid} already exists.")
    item = _locked_item(
        {"accession_number": accession_number},
        branch_id=branch_id,
        unknown=f"No imaging item with accession number {accession_number!r} at this branch.",
    )
    if item.status != ItemStatus.SCHEDULED:
        raise InvalidState(f"The item {accession_number} is {item.status}, not scheduled.", current_status=item.status)
    item.status = ItemStatus.IN_PROGRESS
    item.mpps_instance_uid = mpps_instance_uid
    # The unique index settles two concurrent starts with one UID on different items.
    item.save(update_fields=["status", "mpps_instance_uid"])
    events.lab_order_publish(events.IMAGING_PROCEDURE_STARTED, item.order)
    return item


@transaction.atomic
def imaging_procedure_finish(*, branch_id: uuid.UUID, mpps_instance_uid: str, completed: bool) -> LabOrderItem:
    """in_progress -> completed, or -> cancelled when discontinued (and the order cancelled too when that
    leaves none of its items open). 404 for a UID unknown at the branch; 409 when the step is already
    finished."""
    item = _locked_item(
        {"mpps_instance_uid": mpps_instance_uid},
        branch_id=branch_id,
        unknown=f"No procedure step {mpps_instance_uid} at this branch.",
    )
    if item.status != ItemStatus.IN_PROGRESS:
        raise InvalidState(f"The procedure step is already {item.status}.", current_status=item.status)
    item.status = ItemStatus.COMPLETED if completed else ItemStatus.CANCELLED
    item.save(update_fields=["status"])
    order = item.order
    if completed:
        events.lab_order_publish(events.IMAGING_PROCEDURE_COMPLETED, order)
        return item
    events.lab_order_publish(events.IMAGING_PROCEDURE_DISCONTINUED, order)
    if order.status == OrderStatus.ORDERED and not order.items.exclude(status=ItemStatus.CANCELLED).exists():
        order.status = OrderStatus.CANCELLED
        order.cancelled_at = timezone.now()
        order.cancellation_reason = DISCONTINUED_REASON
        order.save(update_fields=["status", "cancelled_at", "cancellation_reason", "updated_at"])
        events.lab_order_publish(events.LAB_ORDER_CANCELLED, order)
    return item
