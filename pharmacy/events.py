"""The pharmacy events (docs/api-rules.md §8 and §14): their names, their registration and their publication.

Each body's `data` holds the API representation of its entity, re-read inside the transaction of the change
(the outbox row commits with it). Subscriptions filtered by branch receive the events of the entity's branch.
"""

from __future__ import annotations

from integrations.webhooks.events import event_publish
from integrations.webhooks.registry import EventKind, PayloadPart, event_kind_register
from pharmacy import selectors
from pharmacy.models import Dispense, Prescription
from pharmacy.representations import (
    StockEntry,
    dispense_representation,
    prescription_representation,
    stock_level_representation,
)

PRESCRIPTION_CREATED = "prescription.created"
DISPENSE_COMPLETED = "dispense.completed"
STOCK_BELOW_REORDER = "stock.below_reorder"
STOCK_EXPIRING = "stock.expiring"

_STOCK = PayloadPart("stock", "StockLevel", "The drug's stock at the branch, as GET /api/v1/pharmacy/stock shows it.")

EVENT_KINDS: tuple[EventKind, ...] = (
    EventKind(
        PRESCRIPTION_CREATED,
        label="prescription created",
        description="A prescription was written: numbered, one item per drug.",
        payload=(
            PayloadPart("prescription", "Prescription", "As GET /api/v1/pharmacy/prescriptions/{id} returns it."),
        ),
    ),
    EventKind(
        DISPENSE_COMPLETED,
        label="dispense completed",
        description="Drugs were dispensed (stock taken from their batches, first expiry first).",
        payload=(PayloadPart("dispense", "Dispense", "As GET /api/v1/pharmacy/dispenses/{id} returns it."),),
    ),
    EventKind(
        STOCK_BELOW_REORDER,
        label="stock below reorder level",
        description=(
            "A dispense, adjustment, transfer or write-off took a drug's non-expired stock at a branch from its "
            "reorder level or above to below it; once per crossing."
        ),
        payload=(_STOCK,),
    ),
    EventKind(
        STOCK_EXPIRING,
        label="stock expiring",
        description=(
            "Daily: a drug at a branch has a batch holding stock that expires within PHARMACY_EXPIRY_WARNING_DAYS "
            "(default 90) days; one event per drug and branch, its batches with their expiry dates."
        ),
        payload=(_STOCK,),
    ),
)


def events_register() -> None:
    """Called by PharmacyConfig.ready()."""
    event_kind_register(*EVENT_KINDS)


def prescription_publish(event_type: str, prescription: Prescription) -> None:
    payload = {"prescription": prescription_representation(selectors.prescription_load(prescription.pk))}
    event_publish(event_type=event_type, payload=dict(payload), branch_id=prescription.branch_id)


def dispense_publish(event_type: str, dispense: Dispense) -> None:
    """`dispense` with what its representation reads (as pharmacy.selectors loads it, or as the service that
    wrote it made it known: clinic.db.related_known)."""
    payload = {"dispense": dispense_representation(dispense)}
    event_publish(event_type=event_type, payload=dict(payload), branch_id=dispense.branch_id)


def stock_publish(event_type: str, entry: StockEntry) -> None:
    payload = {"stock": stock_level_representation(entry)}
    event_publish(event_type=event_type, payload=dict(payload), branch_id=entry.branch_id)
