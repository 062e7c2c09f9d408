"""The billing events (docs/api-rules.md §8): their names, their registration, and their publication.

Each carries the API representation of what happened, as the API returns it: `invoice.finalized` and
`invoice.cancelled` the invoice detail; `payment.recorded`, `credit_note.issued` and `refund.recorded` the
payment, credit note or refund together with the invoice detail as it stands after it, so an accounting
system can post the document and its effect on the invoice from one delivery. The invoice is re-read with
everything its detail shows, inside the transaction of the change (the outbox row commits with it).
Subscriptions filtered by branch receive the events of the invoice's branch.
"""

from __future__ import annotations

from typing import Any

from billing import models
from billing.representations import (
    credit_note_representation,
    invoice_detail,
    payment_representation,
    refund_representation,
)
from billing.selectors import invoice_detail_load
from integrations.webhooks.events import event_publish
from integrations.webhooks.registry import EventKind, PayloadPart, event_kind_register

INVOICE_FINALIZED = "invoice.finalized"
INVOICE_CANCELLED = "invoice.cancelled"
PAYMENT_RECORDED = "payment.recorded"
CREDIT_NOTE_ISSUED = "credit_note.issued"
REFUND_RECORDED = "refund.recorded"

_INVOICE = PayloadPart(
    "invoice", "InvoiceDetail", "The invoice detail, as GET /api/v1/billing/invoices/{id} returns it."
)
_INVOICE_AFTER = PayloadPart("invoice", "InvoiceDetail", "The invoice detail after the change.")

EVENT_KINDS = (
    EventKind(
        INVOICE_FINALIZED,
        label="finalized",
        description="An invoice was finalized: numbered, and from now on a record of account.",
        payload=(_INVOICE,),
    ),
    EventKind(
        INVOICE_CANCELLED,
        label="cancelled",
        description="An invoice was cancelled (only possible while nothing is paid or credited).",
        payload=(_INVOICE,),
    ),
    EventKind(
        PAYMENT_RECORDED,
        label="payment recorded",
        description="A payment was recorded against an invoice.",
        payload=(PayloadPart("payment", "Payment"), _INVOICE_AFTER),
    ),
    EventKind(
        CREDIT_NOTE_ISSUED,
        label="credit note issued",
        description="A credit note was issued against an invoice.",
        payload=(PayloadPart("credit_note", "CreditNote"), _INVOICE_AFTER),
    ),
    EventKind(
        REFUND_RECORDED,
        label="refund recorded",
        description="Money was paid back to the patient on an invoice.",
        payload=(PayloadPart("refund", "Refund"), _INVOICE_AFTER),
    ),
)


def events_register() -> None:
    """Called by BillingConfig.ready()."""
    event_kind_register(*EVENT_KINDS)


def _publish(event_type: str, invoice: models.Invoice, data: dict[str, Any]) -> None:
    data["invoice"] = invoice_detail(invoice_detail_load(invoice.pk))
    event_publish(event_type=event_type, payload=data, branch_id=invoice.branch_id)


def invoice_publish(event_type: str, invoice: models.Invoice) -> None:
    _publish(event_type, invoice, {})


def payment_publish(payment: models.Payment, invoice: models.Invoice) -> None:
    _publish(PAYMENT_RECORDED, invoice, {"payment": payment_representation(payment, invoice)})


def credit_note_publish(credit_note: models.CreditNote, invoice: models.Invoice) -> None:
    _publish(CREDIT_NOTE_ISSUED, invoice, {"credit_note": credit_note_representation(credit_note, invoice)})


def refund_publish(refund: models.Refund, invoice: models.Invoice) -> None:
    _publish(REFUND_RECORDED, invoice, {"refund": refund_representation(refund, invoice)})
