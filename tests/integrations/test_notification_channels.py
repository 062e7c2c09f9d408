"""notification_channels reads the settings with one hand-written statement (integrations.notifications.services);
it must answer what the ORM reading of the settings row answers, for every combination of switches, kinds and
branch filter."""

from __future__ import annotations

import itertools
import uuid

import pytest

from integrations.models import NotificationSettings
from integrations.notifications.services import notification_channels
from tests.factories import BranchFactory

pytestmark = pytest.mark.django_db

BOOKED, CANCELLED = "appointment.booked", "appointment.cancelled"


def orm_channels(*, event_type: str, branch_id: uuid.UUID) -> list[str]:
    """The reference: the settings row read through the ORM and decided in Python."""
    config = NotificationSettings.objects.filter(id=1).first()
    if config is None or event_type not in config.event_kinds:
        return []
    branch_ids = set(config.branches.values_list("id", flat=True))
    if branch_ids and branch_id not in branch_ids:
        return []
    return [channel for channel, on in (("sms", config.sms_enabled), ("email", config.email_enabled)) if on]


def test_the_statement_answers_what_the_orm_reading_answers_for_every_settings_shape():
    north, south, east = BranchFactory(code="NTH"), BranchFactory(code="STH"), BranchFactory(code="EST")
    answers = set()
    for sms, email, kinds, branches in itertools.product(
        (True, False), (True, False), ([], [BOOKED], [BOOKED, CANCELLED]), ([], [north], [north, south])
    ):
        config = NotificationSettings.load()
        config.sms_enabled, config.email_enabled, config.event_kinds = sms, email, kinds
        config.save()
        config.branches.set(branches)
        for event_type, branch in itertools.product((BOOKED, CANCELLED), (north, south, east)):
            expected = orm_channels(event_type=event_type, branch_id=branch.id)
            assert notification_channels(event_type=event_type, branch_id=branch.id) == expected, (
                sms, email, kinds, branches, event_type, branch,
            )  # fmt: skip
            answers.add(tuple(expected))
    # Every answer occurs somewhere in the matrix, so the comparison is not between two empty lists.
    assert answers == {(), ("sms",), ("email",), ("sms", "email")}


def test_without_a_settings_row_nobody_is_notified():
    NotificationSettings.objects.all().delete()
    assert notification_channels(event_type=BOOKED, branch_id=uuid.uuid4()) == []
