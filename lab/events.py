"""The lab events (CONTRACT sections 12 and 14): their names and their registration.

Each kind is registered (EVENT_KINDS) by the change that publishes it, with its payload (the order's API
representation); until then it stays unregistered, so nothing advertises an event that never arrives.
"""

from __future__ import annotations

from integrations.webhooks.registry import EventKind, event_kind_register

LAB_ORDER_CREATED = "lab_order.created"
LAB_ORDER_CANCELLED = "lab_order.cancelled"
LAB_ORDER_COLLECTED = "lab_order.collected"
LAB_RESULT_FINALIZED = "lab_result.finalized"
LAB_RESULT_AMENDED = "lab_result.amended"
LAB_RESULT_CRITICAL = "lab_result.critical"

EVENT_KINDS: tuple[EventKind, ...] = ()


def events_register() -> None:
    """Called by LabConfig.ready()."""
    event_kind_register(*EVENT_KINDS)
