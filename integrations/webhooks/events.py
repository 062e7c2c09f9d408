"""The event publication point of the domain apps (the transactional outbox).

Domain services call event_publish() inside the transaction of the change, with a kind their app registered
(integrations.webhooks.registry) and a plain payload built by the owning app. It writes the WebhookEvent row and one WebhookDelivery per matching active
subscription in that same transaction, so nothing is published for a change that rolls back, and nothing
committed is lost: after commit a delivery task is queued per delivery, and should the broker be down
then, the periodic relay finds the rows (they are due at once) when it is back.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

from django.db import transaction

from integrations.hl7.outbox import hl7_messages_add
from integrations.webhooks import clock
from integrations.webhooks.dispatch import deliveries_enqueue
from integrations.webhooks.models import WebhookDelivery, WebhookEvent
from integrations.webhooks.recipients import event_recipients
from integrations.webhooks.registry import event_kind_get

logger = logging.getLogger("integrations.webhooks.events")


def event_publish(*, event_type: str, payload: dict[str, Any], branch_id: uuid.UUID | None = None) -> uuid.UUID:
    """Publish `event_type` (a registered kind, see integrations.webhooks.registry) with `payload` (the
    body's `data`); returns the event id, which is the webhook-id of its deliveries. Call it inside the
    transaction of the change. Raises UnknownEventKind (a ValueError) for a kind no app registered."""
    event_kind_get(event_type)
    return _event_write(event_type=event_type, payload=payload, branch_id=branch_id)


# No savepoint: inside the change's transaction the event commits or rolls back with the change, so there
# is nothing to recover to (and every change saves two round trips).
@transaction.atomic(savepoint=False)
def _event_write(*, event_type: str, payload: dict[str, Any], branch_id: uuid.UUID | None) -> uuid.UUID:
    subscription_ids, hl7_destination_ids = event_recipients(event_type=event_type, branch_id=branch_id)
    now = clock.now()
    event = WebhookEvent.objects.create(type=event_type, payload=payload, branch_ref=branch_id, created_at=now)
    deliveries = WebhookDelivery.objects.bulk_create(
        WebhookDelivery(
            event=event,
            subscription_id=subscription_id,
            status=WebhookDelivery.Status.PENDING,
            next_attempt_at=now,
            created_at=now,
        )
        for subscription_id in subscription_ids
    )
    deliveries_enqueue([(delivery.pk, None) for delivery in deliveries])
    # The HL7 v2 destinations take their messages from the same event, in the same transaction.
    hl7_messages = hl7_messages_add(event, hl7_destination_ids)
    logger.info("event %s %s: %d deliveries, %d HL7 messages", event.id, event_type, len(deliveries), hl7_messages)
    return event.id
