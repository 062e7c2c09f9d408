"""The row locks the lab order services take, each held until the transaction commits.

Lock order, whatever the write: the order's row first (lab_order_lock; a new order holds its own uncommitted
row), then the branch's order-number counter row and then its accession counter row (taken by creation
through lab.numbering, in that order), and only then the invoice row (taken by billing.services when an order
is billed; billing.locks states the order from there on).

Every change to an existing order (collect, cancel) starts with lab_order_lock, so changes of one order run
one at a time and each sees the state the previous one left: an order cannot be collected and cancelled at
once, nor collected twice.
"""

from __future__ import annotations

import uuid

from django.db.models import UUIDField

from clinic.query_plans import QueryPlan, Slot
from lab.models import LabOrder


def _locking(*related: str) -> QueryPlan[LabOrder]:
    return QueryPlan(
        lambda: (
            LabOrder.objects.select_for_update(of=("self",))
            .select_related(*related)
            .filter(pk=Slot("order", UUIDField()))
        )
    )


_LOCK = _locking("branch")
_LOCK_WITH_PATIENT = _locking("branch", "patient")


def lab_order_lock(*, order_id: uuid.UUID, with_patient: bool = False) -> LabOrder:
    """Re-read the order under a row lock (its row only; the branch, and the patient when asked for, are
    read, not locked). LabOrder.DoesNotExist when there is no such order."""
    found = (_LOCK_WITH_PATIENT if with_patient else _LOCK).fetch(order=order_id)
    if not found:
        raise LabOrder.DoesNotExist(f"No lab order {order_id}.")
    return found[0]
