"""Who receives an event: the matching webhook subscriptions and HL7 destinations, in one statement.

Every change that publishes an event (each booking, payment, lab result, dispense) runs this inside its
transaction, so it is written as one constant SQL statement rather than composed by the ORM: composing the
equivalent queryset (a UNION of two filtered querysets with a DISTINCT over the branch join) cost more CPU
than the rest of the booking's event write, and the booking path has a CPU budget
(bench/results/plans_retired.md). It is Django's public API (a cursor and the models' `_meta` table
names); tests/integrations/test_event_recipients.py holds the ORM query it must agree with, over every
combination of active flag, kind and branch filter. docs/architecture.md §6 lists it among the hand-written
statements to re-check on a Django upgrade.
"""

from __future__ import annotations

import uuid
from functools import cache

from django.db import connection

from integrations.hl7.kinds import MESSAGE_KINDS as hl7_message_kinds
from integrations.hl7.models import Hl7Destination
from integrations.webhooks.models import WebhookSubscription


@cache
def _statement() -> str:
    subscriptions = WebhookSubscription._meta.db_table
    branches = WebhookSubscription.branches.through._meta.db_table
    destinations = Hl7Destination._meta.db_table
    # A subscription matches when it is active, takes the kind, and its branch filter is empty or holds the
    # event's branch (an event without a branch reaches only subscriptions without a filter). An HL7
    # destination matches when it is active and takes the kind; %(hl7)s is false for kinds HL7 never sends.
    return f"""
        SELECT s.id, FALSE FROM {subscriptions} s
         WHERE s.is_active AND s.event_types @> ARRAY[%(kind)s]::varchar[]
           AND (NOT EXISTS (SELECT 1 FROM {branches} b WHERE b.webhooksubscription_id = s.id)
                OR EXISTS (SELECT 1 FROM {branches} b
                            WHERE b.webhooksubscription_id = s.id AND b.branch_id = %(branch)s))
        UNION ALL
        SELECT d.id, TRUE FROM {destinations} d
         WHERE %(hl7)s AND d.is_active AND d.event_types @> ARRAY[%(kind)s]::varchar[]
    """  # noqa: S608 - the identifiers are the models' own table names; every value is a parameter


def event_recipients(*, event_type: str, branch_id: uuid.UUID | None) -> tuple[list[uuid.UUID], list[uuid.UUID]]:
    """(matching webhook subscription ids, matching HL7 destination ids) for an event of `event_type` at
    `branch_id`, read in the caller's transaction."""
    params = {"kind": event_type, "branch": branch_id, "hl7": event_type in hl7_message_kinds}
    with connection.cursor() as cursor:
        cursor.execute(_statement(), params)
        rows = cursor.fetchall()
    webhooks = [recipient for recipient, is_hl7 in rows if not is_hl7]
    hl7 = [recipient for recipient, is_hl7 in rows if is_hl7]
    return webhooks, hl7
