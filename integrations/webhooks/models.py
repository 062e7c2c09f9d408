"""Webhook models: subscriptions, the outbox of events and their deliveries, and the attempt log.

Delivery state lives in rows, never in the broker: an event and one delivery per matching subscription
are written in the transaction of the change; workers claim deliveries with SELECT ... FOR UPDATE SKIP
LOCKED and a lease (`claimed_until`), so a killed worker's claim runs out and another worker takes over.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterable
from datetime import datetime
from decimal import Decimal
from typing import TYPE_CHECKING

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.core.exceptions import ValidationError
from django.db import models

from clinic.crypto import decrypt, encrypt
from clinic.lib import jsonbody
from clinic.models import Branch
from integrations.webhooks import signing
from integrations.webhooks.registry import NAME_MAX_LENGTH, event_kinds
from integrations.webhooks.targets import TargetRefused, target_check

__all__ = [
    "HEADER_MASK",
    "WebhookAttempt",
    "WebhookDelivery",
    "WebhookEvent",
    "WebhookSubscription",
    "extra_headers_merge",
    "validate_extra_headers",
]

MAX_EXTRA_HEADERS = 20
HEADER_MASK = "•" * 8  # a stored header value, as the admin and the API show it
_HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,100}$")  # an RFC 9110 token
# Set by the sender on every delivery; a subscription cannot replace them.
RESERVED_HEADERS = frozenset(
    {
        "webhook-id",
        "webhook-timestamp",
        "webhook-signature",
        "content-type",
        "content-length",
        "content-encoding",
        "transfer-encoding",
        "connection",
        "host",
        "user-agent",
        "te",
        "trailer",
        "upgrade",
        "expect",
        "keep-alive",
        "proxy-authorization",
        "proxy-connection",
    }
)


def validate_extra_headers(headers: dict[str, str]) -> None:
    errors = []
    if len(headers) > MAX_EXTRA_HEADERS:
        errors.append(f"At most {MAX_EXTRA_HEADERS} extra headers.")
    seen: set[str] = set()
    for name, value in headers.items():
        if not _HEADER_NAME.match(name):
            errors.append(f"{name!r} is not a valid header name.")
        elif name.lower() in RESERVED_HEADERS:
            errors.append(f"{name} is set by the sender and cannot be overridden.")
        elif name.lower() in seen:
            errors.append(f"{name} is given twice.")
        seen.add(name.lower())
        if not isinstance(value, str) or len(value) > 4000 or any(ord(c) < 0x20 and c != "\t" for c in value):
            errors.append(f"The value of {name} must be text on one line, at most 4000 characters.")
    if errors:
        raise ValidationError(errors)


def extra_headers_merge(*, stored: dict[str, str], given: Iterable[tuple[str, str]]) -> dict[str, str]:
    """The headers to store from those `given` (name, value) in an edit: a value left as HEADER_MASK (what the
    admin and the API show for a stored value) keeps the stored value of that name; a name not given is
    removed. Validated as `validate_extra_headers` does; raises ValidationError listing every problem."""
    known = {name.lower(): value for name, value in stored.items()}
    headers: dict[str, str] = {}
    errors = []
    for name, value in given:
        if value == HEADER_MASK:
            if name.lower() not in known:
                errors.append(f"Enter the value of {name}.")
                continue
            value = known[name.lower()]
        if name in headers:
            errors.append(f"{name} is given twice.")
        headers[name] = value
    try:
        validate_extra_headers(headers)
    except ValidationError as exc:
        errors.extend(exc.messages)
    if errors:
        raise ValidationError(errors)
    return headers


TEST_EVENT_TYPE = "webhook.test"

if TYPE_CHECKING:
    from integrations.clients.models import ApiClient


class WebhookSubscriptionQuerySet(models.QuerySet["WebhookSubscription"]):
    def visible_to(self, client: ApiClient) -> WebhookSubscriptionQuerySet:
        """The subscriptions an API client manages: those it created through the API. Subscriptions are
        per client, not per branch; staff-made ones (no owner) are never visible to the API."""
        return self.filter(owner=client)


class WebhookSubscription(models.Model):
    """A receiver of webhook events: where to send which kinds, for which branches, signed with which secret.

    The signing secret and the extra headers (the receiver's own credentials) are stored encrypted with
    FIELD_ENCRYPTION_KEY; the admin shows the secret once and masks both afterwards.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    target_url = models.CharField(
        "target URL",
        max_length=2000,
        help_text="https, on a public address. Checked on save and again before every delivery.",
    )
    # Wire names of registered kinds, checked in clean(), not by field choices: a domain that adds a kind
    # needs no migration here.
    event_types = ArrayField(
        models.CharField(max_length=NAME_MAX_LENGTH),
        help_text="Event kinds sent to this target.",
    )
    branches = models.ManyToManyField(
        Branch,
        blank=True,
        related_name="+",
        help_text="Only events at these branches. None selected: every branch.",
    )
    is_active = models.BooleanField("active", default=True)
    disabled_reason = models.CharField(max_length=300, blank=True)
    disabled_at = models.DateTimeField(null=True, blank=True)
    secret_encrypted = models.TextField(editable=False)
    previous_secret_encrypted = models.TextField(blank=True, editable=False)
    previous_secret_expires_at = models.DateTimeField(
        null=True, blank=True, editable=False, help_text="Until then deliveries are signed with both secrets."
    )
    extra_headers_encrypted = models.TextField(blank=True, editable=False)
    # The API client that created it through the API (it alone sees and changes it there); none for one made
    # by staff or the shell. A client's subscriptions go with the client.
    owner = models.ForeignKey(
        "integrations.ApiClient",
        null=True,
        blank=True,
        editable=False,
        on_delete=models.CASCADE,
        related_name="webhook_subscriptions",
        help_text="The API client that manages it through the API; empty when made in the admin or the shell.",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = WebhookSubscriptionQuerySet.as_manager()

    class Meta:
        verbose_name = "webhook subscription"
        ordering = ["name", "id"]
        constraints = [
            models.CheckConstraint(condition=~models.Q(event_types=[]), name="webhook_subscription_has_event_types"),
            models.CheckConstraint(condition=~models.Q(secret_encrypted=""), name="webhook_subscription_has_secret"),
        ]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        registered = [kind.name for kind in event_kinds()]
        unknown = sorted(set(self.event_types or []) - set(registered))
        if unknown:
            raise ValidationError({"event_types": f"Unknown event kinds: {', '.join(unknown)}."})
        chosen = set(self.event_types or [])
        self.event_types = [name for name in registered if name in chosen]
        self.target_url = (self.target_url or "").strip()
        try:
            target_check(self.target_url, allow_private=settings.WEBHOOK_ALLOW_PRIVATE_TARGETS)
        except TargetRefused as exc:
            raise ValidationError({"target_url": str(exc)}) from None

    @property
    def secret(self) -> str:
        return decrypt(self.secret_encrypted) if self.secret_encrypted else ""

    @secret.setter
    def secret(self, value: str) -> None:
        self.secret_encrypted = encrypt(value)

    @property
    def secret_masked(self) -> str:
        return signing.mask_secret(self.secret)

    def signing_secrets(self, now: datetime) -> list[str]:
        """The current secret, then the previous one while its grace period lasts."""
        secrets = [self.secret]
        expires = self.previous_secret_expires_at
        if self.previous_secret_encrypted and expires is not None and now < expires:
            secrets.append(decrypt(self.previous_secret_encrypted))
        return secrets

    @property
    def extra_headers(self) -> dict[str, str]:
        return json.loads(decrypt(self.extra_headers_encrypted)) if self.extra_headers_encrypted else {}

    @extra_headers.setter
    def extra_headers(self, headers: dict[str, str]) -> None:
        validate_extra_headers(headers)
        self.extra_headers_encrypted = encrypt(json.dumps(headers)) if headers else ""

    @property
    def extra_headers_masked(self) -> str:
        return ", ".join(f"{name}: {HEADER_MASK}" for name in self.extra_headers)


class PayloadEncoder(json.JSONEncoder):
    """Writes a payload as the API writes its bodies (clinic.api.renderers): money (Decimal) as an exact JSON
    number, never a string nor a float; dates, times and UUIDs as the API shows them."""

    def encode(self, o: object) -> str:
        return jsonbody.dumps(o).decode()


class PayloadDecoder(json.JSONDecoder):
    """Reads numbers with a fraction back as Decimal, so money leaves in the delivery as it was stored."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        kwargs["parse_float"] = Decimal
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]


class WebhookEvent(models.Model):
    """One published event (the outbox entry). Its id is the webhook-id of every delivery of it."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    type = models.CharField(max_length=40, db_index=True)
    payload = models.JSONField(encoder=PayloadEncoder, decoder=PayloadDecoder, help_text="The body's data object.")
    branch_ref = models.UUIDField(null=True, blank=True, help_text="Branch the event happened at (for the filter).")
    is_test = models.BooleanField(default=False, help_text="A test event sent from the admin to one subscription.")
    created_at = models.DateTimeField(db_index=True)

    class Meta:
        verbose_name = "webhook event"
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.type} {self.id}"

    def body(self) -> bytes:
        """The JSON body every delivery of this event sends (docs/api-rules.md §8), the same on every retry."""
        envelope = {
            "id": str(self.id),
            "type": self.type,
            "timestamp": self.created_at.isoformat(),
            "data": self.payload,
        }
        return jsonbody.dumps(envelope)


class WebhookDelivery(models.Model):
    """One event to one subscription, and where its delivery stands.

    pending: waiting for `next_attempt_at`. delivering: claimed by a worker (or queued by the relay) until
    `claimed_until`; a claim that runs out is taken over. succeeded and failed are final; a replay from the
    admin makes the delivery pending again with a fresh schedule.
    """

    class Status(models.TextChoices):
        PENDING = "pending"
        DELIVERING = "delivering"
        SUCCEEDED = "succeeded"
        FAILED = "failed"

    id = models.BigAutoField(primary_key=True)
    event = models.ForeignKey(WebhookEvent, on_delete=models.CASCADE, related_name="deliveries")
    subscription = models.ForeignKey(WebhookSubscription, on_delete=models.CASCADE, related_name="deliveries")
    status = models.CharField(max_length=12, choices=Status.choices, default=Status.PENDING)
    attempt_count = models.PositiveSmallIntegerField(
        default=0, help_text="Attempts in the current schedule (a replay starts a new one)."
    )
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    claimed_until = models.DateTimeField(null=True, blank=True)
    claim_token = models.UUIDField(null=True, blank=True, editable=False)
    attempt_started_at = models.DateTimeField(
        null=True, blank=True, help_text="Set while an attempt is in flight; left behind by a worker that died."
    )
    last_status_code = models.PositiveSmallIntegerField(null=True, blank=True)
    last_error = models.CharField(max_length=500, blank=True)
    last_attempt_at = models.DateTimeField(null=True, blank=True)
    delivered_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField()

    class Meta:
        verbose_name = "webhook delivery"
        verbose_name_plural = "webhook deliveries"
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["event", "subscription"], name="webhook_delivery_event_subscription_unique"
            ),
            models.CheckConstraint(
                condition=~models.Q(status="pending") | models.Q(next_attempt_at__isnull=False),
                name="webhook_delivery_pending_has_next_attempt",
            ),
            models.CheckConstraint(
                condition=~models.Q(status="delivering") | models.Q(claimed_until__isnull=False),
                name="webhook_delivery_delivering_has_claim",
            ),
        ]
        indexes = [
            # The relay's two questions: which pending deliveries are due, which claims ran out.
            models.Index(fields=["next_attempt_at"], condition=models.Q(status="pending"), name="webhook_delivery_due"),
            models.Index(
                fields=["claimed_until"], condition=models.Q(status="delivering"), name="webhook_delivery_claimed"
            ),
        ]

    def __str__(self) -> str:
        return f"delivery {self.pk} of {self.event_id} to {self.subscription_id}"


class WebhookAttempt(models.Model):
    """One HTTP attempt of a delivery (or one that a dying worker left without a result)."""

    id = models.BigAutoField(primary_key=True)
    delivery = models.ForeignKey(WebhookDelivery, on_delete=models.CASCADE, related_name="attempts")
    number = models.PositiveSmallIntegerField(help_text="1 for the first attempt of the schedule.")
    started_at = models.DateTimeField()
    duration_ms = models.FloatField(default=0)
    address = models.GenericIPAddressField(null=True, blank=True, help_text="The address connected to.")
    status_code = models.PositiveSmallIntegerField(null=True, blank=True)
    response_excerpt = models.TextField(blank=True, help_text="The first 1 KB of the response body.")
    error = models.CharField(max_length=500, blank=True)

    class Meta:
        verbose_name = "webhook attempt"
        ordering = ["started_at", "id"]
        indexes = [models.Index(fields=["delivery", "started_at"], name="webhook_attempt_delivery")]

    def __str__(self) -> str:
        return f"attempt {self.number} of delivery {self.delivery_id}"

    @property
    def succeeded(self) -> bool:
        return self.status_code is not None and 200 <= self.status_code < 300
