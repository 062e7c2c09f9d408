"""The event publication point of the domain apps.

Domain services call event_publish() inside the transaction of the change, with a plain payload built
by the owning app's events.py. The webhooks issue fills this in: it will write the WebhookEvent row and
one WebhookDelivery per matching subscription in that same transaction (the outbox), so nothing is
published for a change that rolls back. Until then it only logs the event id and type.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

logger = logging.getLogger("integrations.events")


def event_publish(*, event_type: str, payload: dict[str, Any], branch_id: uuid.UUID | None = None) -> uuid.UUID:
    """Publish `event_type` (e.g. "appointment.booked") with `payload`; returns the event id."""
    event_id = uuid.uuid4()
    logger.info("event %s %s (webhook delivery not configured yet)", event_id, event_type)
    return event_id
