"""The lab events (docs/api-rules.md §8 and §13): their names, their registration and the publication of the
order events.

Each kind is registered (EVENT_KINDS) by the change that publishes it, with its payload (the order's API
representation); until then it stays unregistered, so nothing advertises an event that never arrives.
The order events carry `{"order": <LabOrder>}`, the order as GET /api/v1/lab/orders/{id} returns it, re-read
inside the transaction of the change (the outbox row commits with it). Subscriptions filtered by branch
receive the events of the order's branch.
"""

from __future__ import annotations

from integrations.webhooks.events import event_publish
from integrations.webhooks.registry import EventKind, PayloadPart, event_kind_register
from lab.models import LabOrder
from lab.representations import lab_order_representation
from lab.selectors import lab_order_load

LAB_ORDER_CREATED = "lab_order.created"
LAB_ORDER_CANCELLED = "lab_order.cancelled"
LAB_ORDER_COLLECTED = "lab_order.collected"
LAB_RESULT_FINALIZED = "lab_result.finalized"
LAB_RESULT_AMENDED = "lab_result.amended"
LAB_RESULT_CRITICAL = "lab_result.critical"
IMAGING_PROCEDURE_STARTED = "imaging_procedure.started"
IMAGING_PROCEDURE_COMPLETED = "imaging_procedure.completed"
IMAGING_PROCEDURE_DISCONTINUED = "imaging_procedure.discontinued"

_ORDER = PayloadPart("order", "LabOrder", "The order, as GET /api/v1/lab/orders/{id} returns it.")

EVENT_KINDS: tuple[EventKind, ...] = (
    EventKind(
        LAB_ORDER_CREATED,
        label="order created",
        description="A lab or imaging order was placed: numbered, one item per test with its accession number.",
        payload=(_ORDER,),
    ),
    EventKind(
        LAB_ORDER_COLLECTED,
        label="order collected",
        description="The specimens of an order's lab items were collected.",
        payload=(_ORDER,),
    ),
    EventKind(
        LAB_ORDER_CANCELLED,
        label="order cancelled",
        description="An order was cancelled before collection.",
        payload=(_ORDER,),
    ),
    EventKind(
        LAB_RESULT_FINALIZED,
        label="results final",
        description="Every item of an order has its final results (lab) or final report (imaging).",
        payload=(_ORDER,),
        notification_label="when lab or imaging results are ready",
    ),
    EventKind(
        LAB_RESULT_AMENDED,
        label="result amended",
        description="A final result was corrected by an amended version (the earlier versions stay in its history).",
        payload=(_ORDER,),
    ),
    EventKind(
        LAB_RESULT_CRITICAL,
        label="critical value",
        description="A result outside its critical limits (flag LL or HH) was recorded; sent at once.",
        payload=(_ORDER,),
    ),
    EventKind(
        IMAGING_PROCEDURE_STARTED,
        label="imaging procedure started",
        description="A modality started an imaging item's procedure (DICOM MPPS IN PROGRESS): the item is in_progress.",
        payload=(_ORDER,),
    ),
    EventKind(
        IMAGING_PROCEDURE_COMPLETED,
        label="imaging procedure completed",
        description="A modality completed an imaging item's procedure (DICOM MPPS COMPLETED): the item is "
        "completed; its report follows as results.",
        payload=(_ORDER,),
    ),
    EventKind(
        IMAGING_PROCEDURE_DISCONTINUED,
        label="imaging procedure discontinued",
        description="A modality discontinued an imaging item's procedure (DICOM MPPS DISCONTINUED): the item is "
        "cancelled (and the order with it when none of its items is left).",
        payload=(_ORDER,),
    ),
)


def events_register() -> None:
    """Called by LabConfig.ready()."""
    event_kind_register(*EVENT_KINDS)


def lab_order_publish(event_type: str, order: LabOrder, *more_types: str) -> LabOrder:
    """Publish the order as it now stands as `event_type` (and each of `more_types`), read once for all; returns
    what was read (the order with everything its representation shows), which the writes answer with."""
    loaded = lab_order_load(order.pk)
    payload = {"order": lab_order_representation(loaded)}
    for kind in (event_type, *more_types):
        event_publish(event_type=kind, payload=dict(payload), branch_id=order.branch_id)
    return loaded
