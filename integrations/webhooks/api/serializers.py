"""Input of the webhook subscription API: the shape of the body only. What a value must be (the target URL's
SSRF rules, registered event kinds, header names and values) is decided by the services, the same calls the
admin makes, and their refusals name the field like any other 400."""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiSerializerFieldExtension
from rest_framework import serializers

from clinic.api.serializers import BoundedListField, StrictSerializer, visible_branch
from integrations.webhooks.models import HEADER_MASK, MAX_EXTRA_HEADERS
from integrations.webhooks.registry import NAME_MAX_LENGTH, event_kinds
from integrations.webhooks.targets import MAX_URL_LENGTH

# Not a limit of the model (a TextField): the API's, so a body stays far below MAX_REQUEST_BODY_BYTES.
DESCRIPTION_MAX_LENGTH = 2000
MAX_EVENT_TYPES = 100
MAX_BRANCHES = 100


class EventKindField(serializers.CharField):
    """The name of an event kind. Whether it is registered is the service's check (the model's clean(), as in
    the admin); the document lists the registered kinds as an enum."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(max_length=NAME_MAX_LENGTH, **kwargs)


class EventKindFieldSchema(OpenApiSerializerFieldExtension):
    """The registered kinds, read when the document is built (an app registers its kinds in ready())."""

    target_class = EventKindField

    def map_serializer_field(self, auto_schema: Any, direction: Any) -> dict[str, Any]:
        return {"type": "string", "enum": [kind.name for kind in event_kinds()]}


class WebhookSubscriptionSerializer(StrictSerializer):
    """Needs context={"client": ApiClient}. With partial=True (PATCH) every field is optional."""

    openapi_description = (
        "A webhook subscription: where to send which event kinds. Unknown fields are refused (400 `unknown_field`)."
    )

    name = serializers.CharField(max_length=200)
    description = serializers.CharField(max_length=DESCRIPTION_MAX_LENGTH, required=False, allow_blank=True, default="")
    target_url = serializers.CharField(
        max_length=MAX_URL_LENGTH,
        trim_whitespace=False,
        help_text="https, on a public address (no credentials in the URL, no private, loopback, link-local or "
        "metadata address, no name resolving to one); checked against DNS on every save and again before every "
        "attempt.",
    )
    event_types = BoundedListField(
        child=EventKindField(),
        min_length=1,
        max_length=MAX_EVENT_TYPES,
        help_text="Registered event kinds (each a key of this document's `webhooks`), e.g. `appointment.booked`.",
    )
    branch_ids = BoundedListField(
        child=serializers.UUIDField(),
        required=False,
        max_length=MAX_BRANCHES,
        help_text="Only events at these branches (each one the client may see); empty or absent: every branch, "
        "or for a client limited to some branches, those branches.",
    )
    extra_headers = serializers.DictField(
        child=serializers.CharField(max_length=4000, allow_blank=True, trim_whitespace=False),
        required=False,
        help_text=f"At most {MAX_EXTRA_HEADERS} headers sent with every delivery, for the receiver's own "
        "authentication; stored encrypted and shown masked. Replaces the stored set; a value sent as "
        f"`{HEADER_MASK}` (as shown) keeps the stored value of that header.",
    )
    is_active = serializers.BooleanField(required=False, default=True, help_text="false: nothing is sent.")

    def validate_branch_ids(self, value: list[Any]) -> list[Any]:
        return [visible_branch(self, branch_id).id for branch_id in dict.fromkeys(value)]


class EmptyBody(StrictSerializer):
    """The test event and the rotation take no body; a stray field is refused like everywhere else."""
