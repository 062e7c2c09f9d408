"""Which event kinds become which HL7 v2 message (docs/hl7-outbound.md). Nothing here imports a model."""

from __future__ import annotations

from typing import NamedTuple


class MessageKind(NamedTuple):
    message_type: str  # MSH-9.1
    trigger: str  # MSH-9.2
    structure: str  # MSH-9.3
    order_control: str = ""  # ORC-1 for ORM^O01

    @property
    def label(self) -> str:
        label = f"{self.message_type}^{self.trigger}"
        return f"{label} {self.order_control}" if self.order_control else label


# Event kind (integrations.webhooks.registry wire name) -> the message a destination receives for it.
MESSAGE_KINDS: dict[str, MessageKind] = {
    "patient.registered": MessageKind("ADT", "A04", "ADT_A01"),
    "patient.updated": MessageKind("ADT", "A08", "ADT_A01"),
    "appointment.booked": MessageKind("SIU", "S12", "SIU_S12"),
    "appointment.rescheduled": MessageKind("SIU", "S13", "SIU_S12"),
    "appointment.cancelled": MessageKind("SIU", "S15", "SIU_S12"),
    "appointment.no_show": MessageKind("SIU", "S26", "SIU_S12"),
    "lab_order.created": MessageKind("ORM", "O01", "ORM_O01", "NW"),
    "lab_order.cancelled": MessageKind("ORM", "O01", "ORM_O01", "CA"),
}

EVENT_TYPE_CHOICES = [(name, f"{name} ({kind.label})") for name, kind in MESSAGE_KINDS.items()]
