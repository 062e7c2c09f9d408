"""The event's recipients are read by one hand-written statement (integrations.webhooks.recipients); it must
find exactly what the ORM query it replaced finds, for every combination of active flag, kinds and branch
filter, for events with a branch, without one, and of kinds HL7 sends or does not send."""

from __future__ import annotations

import itertools
import uuid

import pytest
from django.db.models import Q

from integrations.hl7.kinds import MESSAGE_KINDS
from integrations.hl7.models import Hl7Destination
from integrations.webhooks.models import WebhookSubscription
from integrations.webhooks.recipients import event_recipients
from tests.factories import BranchFactory

pytestmark = pytest.mark.django_db

BOOKED, CANCELLED, CHECKED_IN = "appointment.booked", "appointment.cancelled", "appointment.checked_in"
KIND_SETS = ([BOOKED], [CANCELLED], [BOOKED, CANCELLED], [CHECKED_IN])


def orm_recipients(*, event_type: str, branch_id: uuid.UUID | None) -> tuple[set[uuid.UUID], set[uuid.UUID]]:
    """The reference: the ORM query the statement replaced (a subscription matches when active, taking the
    kind, and its branch filter is empty or holds the event's branch; a destination when active and taking
    a kind HL7 sends)."""
    subscriptions = WebhookSubscription.objects.filter(is_active=True, event_types__contains=[event_type])
    if branch_id is None:
        subscriptions = subscriptions.filter(branches__isnull=True)
    else:
        subscriptions = subscriptions.filter(Q(branches__isnull=True) | Q(branches=branch_id))
    destinations = Hl7Destination.objects.filter(is_active=True, event_types__contains=[event_type])
    hl7 = set(destinations.values_list("id", flat=True)) if event_type in MESSAGE_KINDS else set()
    return set(subscriptions.values_list("id", flat=True)), hl7


def test_the_statement_finds_what_the_orm_query_finds_for_every_subscription_and_destination_shape():
    north, south, east = BranchFactory(code="NTH"), BranchFactory(code="STH"), BranchFactory(code="EST")
    filters = ([], [north], [south], [north, south])
    for number, (active, kinds, branches) in enumerate(itertools.product((True, False), KIND_SETS, filters)):
        subscription = WebhookSubscription.objects.create(
            name=f"s{number}",
            target_url="https://erp.example.com/hook",
            event_types=kinds,
            is_active=active,
            secret_encrypted="not read here",
        )
        subscription.branches.set(branches)
    for number, (active, kinds) in enumerate(itertools.product((True, False), KIND_SETS)):
        Hl7Destination.objects.create(
            name=f"d{number}", host="127.0.0.1", port=2575, event_types=kinds, receiving_application="LIS",
            is_active=active,
        )  # fmt: skip

    checked = 0
    for event_type, branch in itertools.product(
        (BOOKED, CANCELLED, CHECKED_IN, "invoice.finalized"), (north, south, east, None)
    ):
        branch_id = branch.id if branch else None
        webhooks, hl7 = event_recipients(event_type=event_type, branch_id=branch_id)
        expected_webhooks, expected_hl7 = orm_recipients(event_type=event_type, branch_id=branch_id)
        assert (sorted(webhooks), sorted(hl7)) == (sorted(expected_webhooks), sorted(expected_hl7)), (
            event_type,
            branch,
        )
        assert len(webhooks) == len(set(webhooks))  # a subscription filtered to two branches is one recipient
        checked += len(webhooks) + len(hl7)
    # The matrix is not vacuous: a booking at the north branch reaches the active subscriptions taking it with
    # no filter or a filter holding north (2 kind sets x 3 filters), and the 2 active destinations taking it.
    webhooks, hl7 = event_recipients(event_type=BOOKED, branch_id=north.id)
    assert (len(webhooks), len(hl7)) == (6, 2)
    # A kind HL7 does not send reaches no destination, though an active one lists it.
    webhooks, hl7 = event_recipients(event_type=CHECKED_IN, branch_id=None)
    assert (len(webhooks), hl7) == (1, [])
    assert Hl7Destination.objects.filter(is_active=True, event_types__contains=[CHECKED_IN]).count() == 1
    assert checked > 30


def test_an_event_with_no_subscription_or_destination_has_no_recipient():
    assert event_recipients(event_type=BOOKED, branch_id=uuid.uuid4()) == ([], [])
