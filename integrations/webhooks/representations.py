"""The response bodies of the webhook subscription API (docs/api-rules.md §16): one TypedDict per shape, named
as its OpenAPI component, and the functions that build them.

Secrets never leave twice: the signing secret is in clear only in the answers of the create and the rotation
(`SubscriptionWithSecret`), masked everywhere else; extra header values are always masked, as in the admin.
Subscriptions belong to no branch: datetimes carry the offset of the organisation's TIME_ZONE.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal, TypedDict

from django.utils import timezone

from clinic.lib.shapes import DateTimeText, Doc, UUIDText
from integrations.webhooks import models
from integrations.webhooks.models import HEADER_MASK


class WebhookSubscription(TypedDict):
    """A webhook subscription of the calling client. The signing secret and header values are masked."""

    id: UUIDText
    name: str
    description: str
    target_url: Annotated[str, Doc("https, on a public address; checked on every save and before every attempt.")]
    event_types: Annotated[list[str], Doc("Event kinds sent to the target (the `webhooks` of this document).")]
    branch_ids: Annotated[
        list[UUIDText],
        Doc("Only events at these branches; empty: every branch (a client limited to branches: its own)."),
    ]
    extra_headers: Annotated[
        dict[str, str], Doc(f"Headers sent with every delivery, each value masked as `{HEADER_MASK}`.")
    ]
    is_active: bool
    disabled_reason: Annotated[str | None, Doc("Why it is inactive (by the client, staff, or a 410 answer).")]
    disabled_at: DateTimeText | None
    signing_secret_masked: Annotated[str, Doc("The signing secret's prefix and last four characters.")]
    previous_secret_expires_at: Annotated[
        DateTimeText | None, Doc("After a rotation: until then every delivery is signed with the previous secret too.")
    ]
    created_at: DateTimeText
    updated_at: DateTimeText


class WebhookSubscriptionWithSecret(WebhookSubscription):
    """A webhook subscription with its signing secret in clear: in this answer only, never again."""

    signing_secret: Annotated[
        str, Doc("`whsec_<base64 of 32 random bytes>`: verify deliveries with it. Shown in this answer only.")
    ]


class WebhookTestEvent(TypedDict):
    """A test event queued for one subscription (a real delivery, tried once)."""

    id: Annotated[UUIDText, Doc("The event id: the `webhook-id` header of the delivery.")]
    type: Annotated[str, Doc("Always `webhook.test`.")]
    subscription_id: UUIDText
    status: Annotated[
        Literal["pending", "delivering", "succeeded", "failed"], Doc("Where the delivery stands now: queued.")
    ]
    created_at: DateTimeText


def _local(moment: datetime | None) -> str | None:
    return timezone.localtime(moment).isoformat() if moment is not None else None


def subscription_representation(subscription: models.WebhookSubscription) -> WebhookSubscription:
    return {
        "id": str(subscription.id),
        "name": subscription.name,
        "description": subscription.description,
        "target_url": subscription.target_url,
        "event_types": list(subscription.event_types),
        "branch_ids": sorted(str(branch.pk) for branch in subscription.branches.all()),
        "extra_headers": {name: HEADER_MASK for name in subscription.extra_headers},
        "is_active": subscription.is_active,
        "disabled_reason": subscription.disabled_reason or None,
        "disabled_at": _local(subscription.disabled_at),
        "signing_secret_masked": subscription.secret_masked,
        "previous_secret_expires_at": _local(subscription.previous_secret_expires_at),
        "created_at": timezone.localtime(subscription.created_at).isoformat(),
        "updated_at": timezone.localtime(subscription.updated_at).isoformat(),
    }


def subscription_with_secret(subscription: models.WebhookSubscription, secret: str) -> WebhookSubscriptionWithSecret:
    return {**subscription_representation(subscription), "signing_secret": secret}


def queued_test_event_representation(delivery: models.WebhookDelivery) -> WebhookTestEvent:
    return {
        "id": str(delivery.event_id),
        "type": "webhook.test",
        "subscription_id": str(delivery.subscription_id),
        "status": delivery.status,  # type: ignore[typeddict-item]
        "created_at": timezone.localtime(delivery.created_at).isoformat(),
    }
