"""Reads of webhook subscriptions for the API: always through `WebhookSubscription.objects.visible_to(client)`,
so a subscription of another client (or one made by staff) is never loaded: its id is the same 404 as an
unknown one."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from django.db.models import QuerySet

from clinic.errors import NotFound
from integrations.webhooks.models import WebhookSubscription

if TYPE_CHECKING:
    from integrations.clients.models import ApiClient


def subscription_list(*, client: ApiClient) -> QuerySet[WebhookSubscription]:
    """The client's subscriptions, by creation time then id (a stable order for paging)."""
    return WebhookSubscription.objects.visible_to(client).prefetch_related("branches").order_by("created_at", "id")


def subscription_get(*, client: ApiClient, ref: str) -> WebhookSubscription:
    """By UUID; 404 when unknown, malformed or another client's (no existence oracle)."""
    try:
        key = uuid.UUID(ref)
    except ValueError:
        raise NotFound(f"No webhook subscription {ref!r}.") from None
    found = WebhookSubscription.objects.visible_to(client).prefetch_related("branches").filter(id=key).first()
    if found is None:
        raise NotFound(f"No webhook subscription {ref!r}.")
    return found
