"""Migration 0006 maps the three appointment switches of the notification settings onto the list of event
kinds, exactly, and back; run against the real test database with Django's migration executor."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("integrations", "0005_column_defaults")]
AFTER = [("integrations", "0006_notification_event_kinds")]
SWITCHES = ("on_booked", "on_rescheduled", "on_cancelled")
KINDS = ("appointment.booked", "appointment.rescheduled", "appointment.cancelled")


_states: dict[str, Any] = {}


def migrate(targets: list[tuple[str, str]]) -> Any:
    """Migrate to `targets`; returns the historical apps of that state (rendered once: it is the slow part)."""
    executor = MigrationExecutor(connection)
    executor.migrate(targets)
    key = repr(targets)
    if key not in _states:
        _states[key] = executor.loader.project_state(targets).apps
    return _states[key]


@pytest.fixture
def executor_back_to_latest() -> Iterator[None]:
    yield
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())


# Each switch on and off, alone and mixed (a migration step takes about a second: not all eight).
COMBINATIONS = [(True, True, True), (False, False, False), (True, False, True), (False, True, False)]


def test_each_combination_of_switches_becomes_exactly_those_event_kinds(executor_back_to_latest):
    for switches in COMBINATIONS:
        old = migrate(BEFORE).get_model("integrations", "NotificationSettings")
        old.objects.all().delete()
        old.objects.create(id=1, sms_enabled=True, email_enabled=False, **dict(zip(SWITCHES, switches, strict=True)))

        new = migrate(AFTER).get_model("integrations", "NotificationSettings")

        row = new.objects.get()
        assert row.event_kinds == [kind for kind, on in zip(KINDS, switches, strict=True) if on], switches
        assert (row.sms_enabled, row.email_enabled) == (True, False)


def test_backwards_each_switch_is_on_when_its_event_kind_is_listed(executor_back_to_latest):
    for chosen in [[], ["appointment.cancelled"], ["appointment.rescheduled", "appointment.booked"]]:
        new = migrate(AFTER).get_model("integrations", "NotificationSettings")
        new.objects.all().delete()
        new.objects.create(id=1, email_enabled=True, event_kinds=chosen)

        old = migrate(BEFORE).get_model("integrations", "NotificationSettings")

        row = old.objects.get()
        assert tuple(getattr(row, switch) for switch in SWITCHES) == tuple(kind in chosen for kind in KINDS), chosen
        assert (row.sms_enabled, row.email_enabled) == (False, True)


def test_a_round_trip_keeps_the_appointment_kinds_and_drops_kinds_without_a_switch(executor_back_to_latest):
    new = migrate(AFTER).get_model("integrations", "NotificationSettings")
    new.objects.all().delete()
    new.objects.create(id=1, event_kinds=["appointment.cancelled", "patient.registered", "appointment.booked"])

    migrate(BEFORE)
    new = migrate(AFTER).get_model("integrations", "NotificationSettings")

    assert new.objects.get().event_kinds == ["appointment.booked", "appointment.cancelled"]
