"""The billing events (CONTRACT section 12): their names and their registration.

`invoice.finalized`, `invoice.cancelled`, `payment.recorded`, `credit_note.issued` and `refund.recorded` are
named by the contract but not published yet: the issue that publishes them adds their `EventKind`s (payload:
the entity's API representation) to EVENT_KINDS, from which point subscriptions and the OpenAPI document
offer them. Until then they stay unregistered, so nothing advertises an event that never arrives, and
publishing one fails loudly.
"""

from __future__ import annotations

from integrations.webhooks.registry import EventKind, event_kind_register

INVOICE_FINALIZED = "invoice.finalized"
INVOICE_CANCELLED = "invoice.cancelled"
PAYMENT_RECORDED = "payment.recorded"
CREDIT_NOTE_ISSUED = "credit_note.issued"
REFUND_RECORDED = "refund.recorded"

EVENT_KINDS: tuple[EventKind, ...] = ()


def events_register() -> None:
    """Called by BillingConfig.ready()."""
    event_kind_register(*EVENT_KINDS)
