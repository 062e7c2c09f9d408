"""The row locks the pharmacy services take, each held until the transaction commits.

Lock order, whatever the write: the prescription's row first (prescription_lock), then the dispense's row
(dispense_lock, for a return), then the batches, all of them in one statement in id order (batches_lock),
then the number counters (pharmacy.numbering), and only then the invoice row (taken by billing.services
when a dispense is billed; billing.locks states the order from there on).

A stock change locks every batch of each drug it touches at the branch (not only the batches it moves), so
changes of one drug at one branch run one at a time: FEFO picks and the reorder-level crossing (on-hand
before and after) are computed on quantities nobody else is changing. The on-hand itself is kept by
PostgreSQL (the ledger's trigger, the batch's CHECK), so even a write that skipped the locks could not
oversell.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable

from django.db.models import Q

from pharmacy.models import Batch, Dispense, Prescription


def prescription_lock(*, prescription_id: uuid.UUID) -> Prescription:
    """Re-read the prescription under a row lock (its row only)."""
    return Prescription.objects.select_for_update(of=("self",)).select_related("branch").get(pk=prescription_id)


def dispense_lock(*, dispense_id: uuid.UUID) -> Dispense:
    return Dispense.objects.select_for_update(of=("self",)).select_related("branch").get(pk=dispense_id)


def batches_lock(*, branch_drugs: Iterable[tuple[uuid.UUID, uuid.UUID]]) -> list[Batch]:
    """Lock every batch of each (branch id, drug id) pair, in id order (one statement, so two writers never
    hold parts of each other's set); returns them with their drugs, in id order."""
    pairs = sorted(set(branch_drugs))
    if not pairs:
        return []
    condition = Q()
    for branch_id, drug_id in pairs:
        condition |= Q(branch_id=branch_id, drug_id=drug_id)
    return list(Batch.objects.select_for_update(of=("self",)).select_related("drug").filter(condition).order_by("id"))
