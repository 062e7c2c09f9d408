"""Queueing delivery tasks after commit. Only ids (and a claim token) cross the broker.

A broker that is down when the change commits must not fail the request: the change and its delivery
rows are committed already, so the failure is logged and the relay picks the rows up once the broker
is back. Publishing is tried twice at most, so a dead broker costs the request little time.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence

from django.db import transaction

from clinic.celery import task_get

logger = logging.getLogger("integrations.webhooks")

DELIVER_TASK = "integrations.tasks.deliver_webhook"
_RETRY_POLICY = {"max_retries": 1, "interval_start": 0, "interval_step": 0.2, "interval_max": 0.2}


def deliveries_enqueue(deliveries: Sequence[tuple[int, uuid.UUID | None]], *, countdown: float | None = None) -> None:
    """Queue one deliver task per (delivery id, claim token) once the current transaction commits."""
    if not deliveries:
        return
    items = [(delivery_id, str(token) if token else None) for delivery_id, token in deliveries]

    def send() -> None:
        # By name: the task module imports the delivery code, which imports this module.
        deliver_webhook = task_get(DELIVER_TASK)
        for sent, (delivery_id, token) in enumerate(items):
            try:
                deliver_webhook.apply_async(
                    (delivery_id, token), countdown=countdown or 0, retry=True, retry_policy=_RETRY_POLICY
                )
            except Exception:  # any broker failure: the rows stay due and the relay sends them
                logger.warning(
                    "could not queue %d webhook deliveries (first id %s): the relay will send them",
                    len(items) - sent,
                    delivery_id,
                    exc_info=True,
                )
                return

    transaction.on_commit(send)
