"""The row locks the pharmacy services take, each held until the transaction commits.

Lock order, whatever the write: the prescription's row first (prescription_lock), then the dispense's row
(dispense_lock, for a return), then the stock of each (branch, drug) pair it touches and the batches it reads
(batches_lock), then the number counters (pharmacy.numbering), and only then the invoice row (taken by
billing.services when a dispense is billed; billing.locks states the order from there on).

A stock change first takes a transaction-scoped advisory lock per (branch, drug) pair it touches, in key
order, so changes of one drug at one branch run one at a time: FEFO picks and the reorder-level crossing
(on-hand before and after) are computed on quantities nobody else is changing, and a batch that another
change fills is seen whole, since that change committed before the lock was granted. Holding a pair's lock,
a change reads (and row-locks) only the batches it needs: a dispense those holding stock and those it names,
not the hundreds a busy drug empties over the years. The on-hand itself is kept by PostgreSQL (the ledger's
trigger, the batch's CHECK), so even a write that skipped the locks could not oversell.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable

from django.db import connection
from django.db.models import Q

from pharmacy.models import Batch, Dispense, Prescription


def prescription_lock(*, prescription_id: uuid.UUID) -> Prescription:
    """Re-read the prescription under a row lock (its row only)."""
    return Prescription.objects.select_for_update(of=("self",)).select_related("branch").get(pk=prescription_id)


def dispense_lock(*, dispense_id: uuid.UUID) -> Dispense:
    return Dispense.objects.select_for_update(of=("self",)).select_related("branch").get(pk=dispense_id)


def stock_lock(*, branch_drugs: Iterable[tuple[uuid.UUID, uuid.UUID]]) -> None:
    """The advisory lock of each (branch id, drug id) pair, in key order (one statement; the inner ORDER BY
    fixes the order the locks are taken in, so two changes never wait on each other's)."""
    keys = sorted({f"pharmacy-stock:{branch_id}:{drug_id}" for branch_id, drug_id in branch_drugs})
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(pg_advisory_xact_lock(key)) FROM ("
            " SELECT DISTINCT hashtextextended(k, 0) AS key FROM unnest(%s::text[]) k ORDER BY key) keys",
            [keys],
        )


def batches_lock(
    *,
    branch_drugs: Iterable[tuple[uuid.UUID, uuid.UUID]],
    holding_stock: bool = False,
    batch_numbers: Iterable[str] = (),
) -> list[Batch]:
    """Take the stock locks of each (branch id, drug id) pair, then read and row-lock its batches in id order:
    all of them, or with `holding_stock` those holding stock and those numbered `batch_numbers`; returns
    them with their drugs, in id order."""
    pairs = sorted(set(branch_drugs))
    if not pairs:
        return []
    stock_lock(branch_drugs=pairs)
    condition = Q()
    for branch_id, drug_id in pairs:
        condition |= Q(branch_id=branch_id, drug_id=drug_id)
    batches = Batch.objects.select_for_update(of=("self",)).select_related("drug").filter(condition)
    if holding_stock:
        batches = batches.filter(Q(quantity_on_hand__gt=0) | Q(batch_number__in=list(batch_numbers)))
    return list(batches.order_by("id"))
