"""Webhook subscriptions through the API, under /api/v1/webhooks/subscriptions (docs/api-rules.md §16), scope
`webhooks:manage`.

A client manages only the subscriptions it created: every read goes through
`WebhookSubscription.objects.visible_to(client)` (integrations.webhooks.selectors), so another client's id,
or a staff-made subscription's, is the same 404 as an unknown one. Writes call the services the admin calls
(integrations.webhooks.services), so the SSRF rules, the event registry and the header rules are checked
in one place. Each operation's description is its handler's docstring.
"""

from __future__ import annotations

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from clinic.api.idempotency import ShownOnceResponse
from clinic.api.pagination import HeaderPagination, PageParams
from clinic.api.schema import error_example, list_responses, location_header, pagination_parameters, path_id
from clinic.api.shapes import shape
from clinic.api.viewsets import ClinicViewSet
from integrations.webhooks import selectors, services
from integrations.webhooks.api import schema
from integrations.webhooks.api.serializers import EmptyBody, WebhookSubscriptionSerializer
from integrations.webhooks.models import WebhookSubscription as WebhookSubscriptionModel
from integrations.webhooks.representations import (
    WebhookSubscription,
    WebhookSubscriptionWithSecret,
    WebhookTestEvent,
    queued_test_event_representation,
    subscription_representation,
    subscription_with_secret,
)

SCOPE = "webhooks:manage"
_ID = path_id("Webhook subscription UUID (one this client created).")
_INVALID = OpenApiResponse(
    description="`validation_error`: `errors` names every bad field: `target_url` refused by the SSRF rules (not "
    "https, a private, loopback, link-local or metadata address, a name that does not resolve or resolves to "
    "one), an unknown kind in `event_types`, a branch the client may not see in `branch_ids`, a bad header in "
    "`extra_headers`; or `unknown_field`."
)
_NOT_FOUND = OpenApiResponse(description="`not_found`: unknown id, or a subscription this client did not create.")
_SUBSCRIPTION = OpenApiResponse(shape(WebhookSubscription), description="The subscription, secrets masked.")
_WITH_SECRET = OpenApiResponse(
    shape(WebhookSubscriptionWithSecret),
    description="The subscription with `signing_secret` in clear: shown in this answer only. An idempotent "
    "replay of it shows `signing_secret` masked.",
)


class WebhookSubscriptionViewSet(ClinicViewSet[WebhookSubscriptionModel]):
    selector = staticmethod(selectors.subscription_get)
    required_scopes = {
        "list": SCOPE,
        "create": SCOPE,
        "retrieve": SCOPE,
        "partial_update": SCOPE,
        "destroy": SCOPE,
        "test": SCOPE,
        "rotate_secret": SCOPE,
    }
    query_params = {"list": (PageParams,)}

    @property
    def _actor(self) -> str:
        return f"API client {self.api_client.name}"

    @extend_schema(
        operation_id="webhooks_subscriptions_list",
        summary="List webhook subscriptions",
        tags=["webhooks"],
        parameters=pagination_parameters(),
        responses={
            **list_responses(WebhookSubscription),
            400: OpenApiResponse(description="`validation_error` (`page`, `per_page`) or `unknown_parameter`."),
        },
        examples=[schema.LIST_EXAMPLE],
    )
    def list(self, request: Request) -> Response:
        """The subscriptions this client created through the API, oldest first (then id), secrets and header
        values masked. Subscriptions are per API client, not per branch: those of other clients and those made by
        staff in the admin are not listed, whatever the client's branches. Scope: `webhooks:manage`."""
        pagination = HeaderPagination(request)
        page = pagination.paginate(selectors.subscription_list(client=self.api_client))
        return pagination.response([subscription_representation(subscription) for subscription in page])

    @extend_schema(
        operation_id="webhooks_subscriptions_create",
        summary="Create a webhook subscription",
        tags=["webhooks"],
        request=WebhookSubscriptionSerializer,
        parameters=[location_header("/api/v1/webhooks/subscriptions/{id}")],
        responses={201: _WITH_SECRET, 400: _INVALID},
        examples=[
            schema.CREATE_REQUEST,
            schema.CREATED_EXAMPLE,
            error_example("Metadata address", schema.PRIVATE_TARGET),
            error_example("Unknown kind", schema.UNKNOWN_KIND),
        ],
    )
    def create(self, request: Request) -> Response:
        """Subscribes `target_url` to `event_types` (registered kinds, see this document's `webhooks`), with
        optional `branch_ids`, `extra_headers` and `is_active` (default true). The target must be https on a
        public address, checked against DNS now and again before every attempt, by the rules the admin applies.
        Answers 201 with the signing secret (`whsec_...`) in `signing_secret`: the only time it is shown; GET
        shows it masked. Verify deliveries with any Standard Webhooks library. Honours `Idempotency-Key` (a replay
        shows the secret masked).

        Subscriptions are per API client, not per branch: a client sees and changes only those it created here
        (another client's, or one made by staff, answers 404 like an unknown id). What a subscription receives
        is decided by its `branch_ids` filter, as for every webhook: a client limited to some branches may name
        only those, and an empty filter means its branches. Scope: `webhooks:manage`."""
        client = self.api_client
        body = WebhookSubscriptionSerializer(data=request.data, context={"client": client})
        body.is_valid(raise_exception=True)
        data = body.validated_data
        subscription, secret = services.subscription_create(
            name=data["name"],
            description=data["description"],
            target_url=data["target_url"],
            event_types=data["event_types"],
            branch_ids=data.get("branch_ids", []),
            extra_headers=data.get("extra_headers"),
            is_active=data["is_active"],
            owner=client,
        )
        shown = selectors.subscription_get(client=client, ref=str(subscription.pk))
        return ShownOnceResponse(
            subscription_with_secret(shown, secret),
            replay_data=subscription_with_secret(shown, shown.secret_masked),
            status=201,
            headers={"Location": f"/api/v1/webhooks/subscriptions/{subscription.pk}"},
        )

    @extend_schema(
        operation_id="webhooks_subscriptions_retrieve",
        summary="Get a webhook subscription",
        tags=["webhooks"],
        parameters=[_ID],
        responses={200: _SUBSCRIPTION, 404: _NOT_FOUND},
        examples=[schema.SUBSCRIPTION_EXAMPLE],
    )
    def retrieve(self, request: Request, id: str) -> Response:
        """The subscription, with its signing secret and header values masked. Scope: `webhooks:manage`."""
        return Response(subscription_representation(self.get_object()))

    @extend_schema(
        operation_id="webhooks_subscriptions_partial_update",
        summary="Change, disable or enable a webhook subscription",
        tags=["webhooks"],
        parameters=[_ID],
        request=WebhookSubscriptionSerializer,
        responses={200: _SUBSCRIPTION, 400: _INVALID, 404: _NOT_FOUND},
        examples=[
            schema.DISABLE_REQUEST,
            schema.EDIT_REQUEST,
            schema.DISABLED_EXAMPLE,
            error_example("Metadata address", schema.PRIVATE_TARGET),
        ],
    )
    def partial_update(self, request: Request, id: str) -> Response:
        """Changes any subset of the fields; the others stay. `is_active: false` disables it (nothing more is
        sent; pending deliveries fail when their turn comes) and `true` enables it again. Any other change is
        validated as on creation, the target checked against DNS again. `extra_headers` replaces the stored
        set; a value sent as shown (masked) keeps the stored one. Answers the whole subscription, secrets
        masked. Honours `Idempotency-Key`. Scope: `webhooks:manage`."""
        subscription = self.get_object()
        body = WebhookSubscriptionSerializer(data=request.data, partial=True, context={"client": self.api_client})
        body.is_valid(raise_exception=True)
        services.subscription_update(subscription=subscription, changes=body.validated_data, actor=self._actor)
        return Response(self._shown(subscription))

    @extend_schema(
        operation_id="webhooks_subscriptions_destroy",
        summary="Delete a webhook subscription",
        tags=["webhooks"],
        parameters=[_ID],
        request=None,
        responses={204: OpenApiResponse(description="Deleted: nothing more is sent to it."), 404: _NOT_FOUND},
    )
    def destroy(self, request: Request, id: str) -> Response:
        """Deletes the subscription with its pending deliveries and their log. Honours `Idempotency-Key`. Scope:
        `webhooks:manage`."""
        services.subscription_delete(subscription=self.get_object())
        return Response(status=204)

    @extend_schema(
        operation_id="webhooks_subscriptions_test",
        summary="Send a test event",
        tags=["webhooks"],
        parameters=[_ID],
        request=None,
        responses={
            202: OpenApiResponse(shape(WebhookTestEvent), description="Queued: one delivery, tried once."),
            400: OpenApiResponse(description="`unknown_field`: this operation takes no body."),
            404: _NOT_FOUND,
        },
        examples=[schema.TEST_EVENT_EXAMPLE],
    )
    @action(detail=True, methods=["post"])
    def test(self, request: Request, id: str) -> Response:
        """Queues a `webhook.test` event for this subscription alone (active or not), signed and sent like any
        other delivery and tried once, as the admin's *Send a test event* does; its body carries no patient
        data. The answer's `id` is the `webhook-id` the receiver gets. Takes no body. Honours `Idempotency-Key`.
        Scope: `webhooks:manage`."""
        subscription = self.get_object()
        EmptyBody(data=request.data or {}).is_valid(raise_exception=True)
        delivery = services.test_event_send(subscription=subscription)
        return Response(queued_test_event_representation(delivery), status=202)

    @extend_schema(
        operation_id="webhooks_subscriptions_rotate_secret",
        summary="Rotate the signing secret",
        tags=["webhooks"],
        parameters=[_ID],
        request=None,
        responses={
            200: _WITH_SECRET,
            400: OpenApiResponse(description="`unknown_field`: this operation takes no body."),
            404: _NOT_FOUND,
        },
        examples=[schema.ROTATED_EXAMPLE],
    )
    @action(detail=True, methods=["post"], url_path="rotate-secret")
    def rotate_secret(self, request: Request, id: str) -> Response:
        """Issues a new signing secret, answered in `signing_secret` (the only time it is shown), as the admin's
        rotation does. Until `previous_secret_expires_at` (WEBHOOK_SECRET_ROTATION_GRACE_SECONDS, 24 hours by
        default) every delivery carries both signatures (`v1,<new> v1,<old>`), so the receiver can switch over
        without losing a message. Takes no body. Honours `Idempotency-Key` (a replay shows the secret masked).
        Scope: `webhooks:manage`."""
        subscription = self.get_object()
        EmptyBody(data=request.data or {}).is_valid(raise_exception=True)
        secret = services.secret_rotate(subscription=subscription)
        shown = selectors.subscription_get(client=self.api_client, ref=str(subscription.pk))
        return ShownOnceResponse(
            subscription_with_secret(shown, secret), replay_data=subscription_with_secret(shown, shown.secret_masked)
        )

    def _shown(self, subscription: WebhookSubscriptionModel) -> WebhookSubscription:
        return subscription_representation(selectors.subscription_get(client=self.api_client, ref=str(subscription.pk)))
