"""The row locks the billing services take, each held until the transaction commits.

Lock order, whatever the write: the invoice's row first, then its branch's invoice-number counter row
(taken by finalization through billing.numbering), and only then are payment rows written.

Every change to an existing invoice (draft edits, line changes, finalization, cancellation, payments)
starts with invoice_lock, so changes of one invoice run one at a time and each sees the state the
previous one left: two payments can never together exceed the total, and an invoice cannot be paid and
cancelled at once. A new invoice finalized at creation holds its own uncommitted row the same way.
"""

from __future__ import annotations

import uuid

from billing.models import Invoice


def invoice_lock(*, invoice_id: uuid.UUID) -> Invoice:
    """Re-read the invoice under a row lock (its row only; the branch is read, not locked)."""
    return Invoice.objects.select_for_update(of=("self",)).select_related("branch").get(pk=invoice_id)
