"""The event registry: every kind of event the domain apps publish, each declared by the app that owns it.

A domain app names its events as constants in `<app>/events.py` and registers their `EventKind`s from its
AppConfig.ready(). Integrations learns the kinds from here only: `event_publish` refuses a kind nobody
registered, subscriptions and notification settings offer the registered kinds (chosen at form time and
stored as plain wire names, so a new kind needs no migration), and the OpenAPI document lists each kind
with its payload. Nothing in this module names a domain.

It lives beside the outbox because a kind is what the outbox carries; patient notifications react to the
same events and read their switches from here too. It imports no model, so anything may import it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from django.core.exceptions import ImproperlyConfigured

__all__ = [
    "EventKind",
    "PayloadPart",
    "UnknownEventKind",
    "event_kind_get",
    "event_kind_register",
    "event_kinds",
    "event_kinds_notifying",
]

# `<entity>.<past tense>`; 40 characters is the width of the columns that store the name.
_NAME = re.compile(r"^[a-z][a-z_]*\.[a-z][a-z_]*$")
NAME_MAX_LENGTH = 40


@dataclass(frozen=True)
class PayloadPart:
    """One key of the body's `data` object and the OpenAPI component of its value (the entity's API
    representation), e.g. `PayloadPart("appointment", "Appointment")`."""

    key: str
    component: str
    description: str = ""


@dataclass(frozen=True)
class EventKind:
    """One kind of event, as its owning app declares it.

    `label` is the short name the admin lists show ("booked"); `description` says when the event happens.
    A non-empty `notification_label` ("when an appointment is booked") means the kind may trigger a patient
    notification, and is the text of its switch in the notification settings.
    """

    name: str
    label: str
    description: str
    payload: tuple[PayloadPart, ...]
    notification_label: str = ""

    @property
    def notifies(self) -> bool:
        return bool(self.notification_label)


class UnknownEventKind(ValueError):
    """No app registered an event kind of this name."""

    def __init__(self, name: str) -> None:
        super().__init__(f"Unknown event type {name!r}.")
        self.name = name


class EventRegistry:
    """Event kinds by name, in registration order (the order the admin and the OpenAPI document show)."""

    def __init__(self) -> None:
        self._kinds: dict[str, EventKind] = {}

    def register(self, *kinds: EventKind) -> None:
        """Add `kinds`. Registering the same definition again is harmless (ready() may run twice); a
        different definition under a taken name is a programming error and raises."""
        for kind in kinds:
            if not _NAME.match(kind.name) or len(kind.name) > NAME_MAX_LENGTH:
                raise ImproperlyConfigured(
                    f"Event kind {kind.name!r}: name it <entity>.<past tense> in lower case, "
                    f"at most {NAME_MAX_LENGTH} characters."
                )
            if not kind.payload:
                raise ImproperlyConfigured(f"Event kind {kind.name!r} declares no payload.")
            registered = self._kinds.setdefault(kind.name, kind)
            if registered != kind:
                raise ImproperlyConfigured(
                    f"Event kind {kind.name!r} is registered twice with different definitions: "
                    f"{registered!r} and {kind!r}."
                )

    def get(self, name: str) -> EventKind:
        try:
            return self._kinds[name]
        except KeyError:
            raise UnknownEventKind(name) from None

    def kinds(self) -> list[EventKind]:
        return list(self._kinds.values())


_registry = EventRegistry()


def event_kind_register(*kinds: EventKind) -> None:
    """Register the kinds of an app; call it from the app's AppConfig.ready()."""
    _registry.register(*kinds)


def event_kind_get(name: str) -> EventKind:
    """The registered kind named `name`; raises UnknownEventKind (a ValueError) if there is none."""
    return _registry.get(name)


def event_kinds() -> list[EventKind]:
    """Every registered kind, in registration order."""
    return _registry.kinds()


def event_kinds_notifying() -> list[EventKind]:
    """The kinds that may trigger a patient notification."""
    return [kind for kind in _registry.kinds() if kind.notifies]
