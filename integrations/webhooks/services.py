"""Writes on webhook subscriptions and deliveries, used by the admin, the API, the management command and
tests. The admin and the API validate through the same calls (target URL and SSRF rules, event kinds,
extra headers): there is no second validation path.

Signing secrets are returned once to the caller (to show once) and stored encrypted.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from datetime import timedelta
from typing import TYPE_CHECKING, Any, TypedDict

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction

from clinic.models import Branch
from clinic.visibility import client_branch_ids
from integrations.webhooks import clock
from integrations.webhooks.dispatch import deliveries_enqueue
from integrations.webhooks.models import (
    TEST_EVENT_TYPE,
    WebhookDelivery,
    WebhookEvent,
    WebhookSubscription,
    extra_headers_merge,
)
from integrations.webhooks.signing import secret_generate

if TYPE_CHECKING:
    from integrations.clients.models import ApiClient

Status = WebhookDelivery.Status


class DeliveryBusy(ValidationError):
    """The delivery is being attempted right now; replaying it would send it twice."""


@transaction.atomic
def subscription_save(*, subscription: WebhookSubscription, extra_headers: dict[str, str] | None = None) -> str | None:
    """Validate (target URL checked against DNS) and save. A new subscription gets its signing secret,
    which is returned, the only time it is available in clear; None for an existing one.
    `extra_headers` replaces the stored headers when given."""
    if extra_headers is not None:
        try:
            subscription.extra_headers = extra_headers
        except ValidationError as exc:
            raise ValidationError({"extra_headers": exc.messages}) from None
    secret = None
    if subscription._state.adding and not subscription.secret_encrypted:
        secret = secret_generate()
        subscription.secret = secret
    subscription.full_clean(exclude=["branches"])
    if not subscription.is_active and not subscription.disabled_at:
        subscription.disabled_at = clock.now()
        subscription.disabled_reason = subscription.disabled_reason or "Disabled by staff."
    elif subscription.is_active:
        subscription.disabled_at, subscription.disabled_reason = None, ""
    subscription.save()
    return secret


def _merged_headers(*, subscription: WebhookSubscription, given: dict[str, str]) -> dict[str, str]:
    """The headers to store, merged with the stored ones. Refused headers are reported together with every
    other bad field of the subscription (its clean(), the target URL's check included), not alone."""
    stored = subscription.extra_headers if not subscription._state.adding else {}
    try:
        return extra_headers_merge(stored=stored, given=given.items())
    except ValidationError as exc:
        errors: dict[str, list[str]] = {"extra_headers": exc.messages}
        try:
            subscription.full_clean(exclude=["branches", "secret_encrypted"])
        except ValidationError as other:
            errors = {**other.message_dict, **errors}
        raise ValidationError(errors) from None


def _branch_filter(*, owner: ApiClient | None, branch_ids: Iterable[uuid.UUID]) -> list[Branch]:
    """The branches of a subscription's filter. A client limited to some branches subscribes to events of
    those only: an empty filter from it means its branches, and a branch outside them is refused (the API
    checks this first, naming the field; this is the service's own guard)."""
    ids = list(dict.fromkeys(branch_ids))
    allowed = client_branch_ids(owner) if owner is not None else None
    if allowed is not None:
        if set(ids) - allowed:
            raise ValidationError({"branch_ids": "A branch this client may not see."})
        ids = ids or sorted(allowed)
    branches = list(Branch.objects.filter(pk__in=ids))
    if len(branches) != len(ids):
        raise ValidationError({"branches" if owner is None else "branch_ids": "Unknown branch id."})
    return branches


@transaction.atomic
def subscription_create(
    *,
    name: str,
    target_url: str,
    event_types: Iterable[str],
    branch_ids: Iterable[uuid.UUID] = (),
    extra_headers: dict[str, str] | None = None,
    description: str = "",
    is_active: bool = True,
    owner: ApiClient | None = None,
) -> tuple[WebhookSubscription, str]:
    """Create a subscription; returns it with its signing secret (whsec_...), shown to the caller once.
    `owner` is the API client creating it through the API (None for staff and the shell)."""
    subscription = WebhookSubscription(
        name=name,
        description=description,
        target_url=target_url,
        event_types=list(event_types),
        is_active=is_active,
        owner=owner,
    )
    if not is_active and owner is not None:
        subscription.disabled_reason = f"Disabled by API client {owner.name}."[:300]
    headers = _merged_headers(subscription=subscription, given=extra_headers or {})
    secret = subscription_save(subscription=subscription, extra_headers=headers)
    assert secret is not None
    subscription.branches.set(_branch_filter(owner=owner, branch_ids=branch_ids))
    return subscription, secret


class SubscriptionChanges(TypedDict, total=False):
    """What an edit may change; a key left out stays as it is."""

    name: str
    description: str
    target_url: str
    event_types: list[str]
    is_active: bool
    extra_headers: dict[str, str]  # replaces them all; a value sent as HEADER_MASK keeps the stored one
    branch_ids: list[uuid.UUID]


@transaction.atomic
def subscription_update(
    *, subscription: WebhookSubscription, changes: SubscriptionChanges, actor: str = "staff"
) -> WebhookSubscription:
    """Apply `changes` and validate the result as on creation (the target URL checked against DNS again).
    A change of the active flag alone does not re-check the target, so a subscription whose target went bad
    can still be disabled. Returns the subscription as saved."""
    locked = WebhookSubscription.objects.select_for_update().get(pk=subscription.pk)
    active = changes.get("is_active", locked.is_active)
    if set(changes) <= {"is_active"}:
        if active != locked.is_active:
            subscription_set_active(subscription=locked, active=active, reason=f"Disabled by {actor}.")
        return locked
    for field in ("name", "description", "target_url", "event_types"):
        if field in changes:
            setattr(locked, field, changes[field])
    if active != locked.is_active:
        locked.is_active = active
        locked.disabled_at = None  # subscription_save stamps a disabling now, or clears it on enabling
        locked.disabled_reason = "" if active else f"Disabled by {actor}."[:300]
    headers = changes.get("extra_headers")
    merged = None if headers is None else _merged_headers(subscription=locked, given=headers)
    subscription_save(subscription=locked, extra_headers=merged)
    if "branch_ids" in changes:
        locked.branches.set(_branch_filter(owner=locked.owner, branch_ids=changes["branch_ids"]))
    return locked


@transaction.atomic
def subscription_delete(*, subscription: WebhookSubscription) -> None:
    """Delete the subscription with its deliveries and their attempts: nothing more is sent to it."""
    WebhookSubscription.objects.filter(pk=subscription.pk).delete()


@transaction.atomic
def subscription_set_active(*, subscription: WebhookSubscription, active: bool, reason: str = "") -> None:
    """Enable or disable. Pending deliveries of a disabled subscription fail when their turn comes."""
    now = clock.now()
    subscription.is_active = active
    subscription.disabled_at = None if active else now
    subscription.disabled_reason = "" if active else (reason or "Disabled by staff.")[:300]
    subscription.save(update_fields=["is_active", "disabled_at", "disabled_reason", "updated_at"])


@transaction.atomic
def secret_rotate(*, subscription: WebhookSubscription, grace_seconds: int | None = None) -> str:
    """Issue a new signing secret and return it (shown once). For the grace period
    (WEBHOOK_SECRET_ROTATION_GRACE_SECONDS) deliveries are signed with the old secret too."""
    locked = WebhookSubscription.objects.select_for_update().get(pk=subscription.pk)
    grace = settings.WEBHOOK_SECRET_ROTATION_GRACE_SECONDS if grace_seconds is None else grace_seconds
    secret = secret_generate()
    locked.previous_secret_encrypted = locked.secret_encrypted if grace > 0 else ""
    locked.previous_secret_expires_at = clock.now() + timedelta(seconds=grace) if grace > 0 else None
    locked.secret = secret
    locked.save(
        update_fields=["secret_encrypted", "previous_secret_encrypted", "previous_secret_expires_at", "updated_at"]
    )
    subscription.refresh_from_db()
    return secret


@transaction.atomic
def delivery_replay(*, delivery: WebhookDelivery) -> WebhookDelivery:
    """Send the delivery again from the start of the schedule (same event, same webhook-id). A delivery
    being attempted right now is refused."""
    locked = (
        WebhookDelivery.objects.select_for_update(of=("self",))
        .select_related("subscription", "event")
        .get(pk=delivery.pk)
    )
    now = clock.now()
    if locked.status == Status.DELIVERING and locked.claimed_until and locked.claimed_until > now:
        raise DeliveryBusy("The delivery is being attempted right now; replay it when that attempt has finished.")
    if not locked.subscription.is_active and not locked.event.is_test:
        raise ValidationError("The subscription is disabled; enable it before replaying its deliveries.")
    locked.status = Status.PENDING
    locked.attempt_count = 0
    locked.next_attempt_at = now
    locked.claim_token = None
    locked.claimed_until = None
    locked.attempt_started_at = None
    locked.save(
        update_fields=[
            "status",
            "attempt_count",
            "next_attempt_at",
            "claim_token",
            "claimed_until",
            "attempt_started_at",
        ]
    )
    deliveries_enqueue([(locked.pk, None)])
    return locked


@transaction.atomic
def test_event_send(*, subscription: WebhookSubscription) -> WebhookDelivery:
    """Send a `webhook.test` event to this one subscription (active or not), once, signed as any other."""
    now = clock.now()
    payload: dict[str, Any] = {
        "subscription": {"id": str(subscription.pk), "name": subscription.name},
        "message": "A test event sent from the clinic's administration or API. It carries no appointment.",
    }
    event = WebhookEvent.objects.create(type=TEST_EVENT_TYPE, payload=payload, is_test=True, created_at=now)
    delivery = WebhookDelivery.objects.create(
        event=event, subscription=subscription, status=Status.PENDING, next_attempt_at=now, created_at=now
    )
    deliveries_enqueue([(delivery.pk, None)])
    return delivery
