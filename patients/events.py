"""The patient events (CONTRACT section 12): their names and their registration.

`patient.registered` and `patient.updated` are named by the contract but not published yet: the issue that
publishes them adds their `EventKind`s (payload: the patient's API representation) to EVENT_KINDS, from
which point subscriptions, notification settings and the OpenAPI document offer them. Until then they stay
unregistered, so nothing advertises an event that never arrives, and publishing one fails loudly.
"""

from __future__ import annotations

from integrations.webhooks.registry import EventKind, event_kind_register

PATIENT_REGISTERED = "patient.registered"
PATIENT_UPDATED = "patient.updated"

EVENT_KINDS: tuple[EventKind, ...] = ()


def events_register() -> None:
    """Called by PatientsConfig.ready()."""
    event_kind_register(*EVENT_KINDS)
