"""Admin for webhooks: subscriptions (secret shown once, headers masked; test event, rotate secret,
enable/disable), the read-only event and delivery logs with their attempts, and replay of a delivery.
Every write goes through integrations.webhooks.services."""

from __future__ import annotations

import json
from typing import Any, cast

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import ValidationError
from django.db.models import Count, QuerySet
from django.http import HttpRequest, HttpResponse
from django.template import engines
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.html import format_html

from clinic.admin_audit import PatientDataAuditMixin, patient_ids_in_payload
from clinic.admin_records import ReadOnlyAdminMixin
from clinic.api.context import request_context
from integrations.webhooks.models import (
    HEADER_MASK,
    WebhookAttempt,
    WebhookDelivery,
    WebhookEvent,
    WebhookSubscription,
    extra_headers_merge,
)
from integrations.webhooks.registry import event_kinds
from integrations.webhooks.services import (
    delivery_replay,
    secret_rotate,
    subscription_save,
    subscription_set_active,
    test_event_send,
)

MASK = HEADER_MASK

# Kept here rather than in a template directory: the page exists for this admin only.
_SECRET_PAGE = engines["django"].from_string(
    """{% extends "admin/base_site.html" %}
{% block title %}Signing secret · {{ block.super }}{% endblock %}
{% block content %}
<h1>Signing secret of {{ subscription.name }}</h1>
<p><strong>Copy the secret now.</strong> It will not be shown again; if it is lost, rotate it from the
subscription list.{% if rotated %} Until {{ grace_until }} deliveries are signed with the previous secret
as well, so the receiver can switch over without losing a message.{% endif %}</p>
<table>
  <tr><th scope="row">target</th><td><code>{{ subscription.target_url }}</code></td></tr>
  <tr><th scope="row">signing secret</th><td><code id="signing-secret">{{ secret }}</code></td></tr>
  <tr><th scope="row">verify with</th><td>any Standard Webhooks library, e.g. <code>standardwebhooks.Webhook(secret).verify(body, headers)</code></td></tr>
</table>
<p><a class="button" href="{{ continue_url }}">I have stored the secret: continue</a></p>
{% endblock %}"""
)


class ExtraHeadersField(forms.CharField):
    """Headers edited as "Name: value" lines; returns a list of (name, value) pairs."""

    widget = forms.Textarea(attrs={"rows": 3, "cols": 60})

    def to_python(self, value: Any) -> list[tuple[str, str]]:  # type: ignore[override]
        pairs = []
        for line in (value or "").splitlines():
            if not line.strip():
                continue
            name, colon, header_value = line.partition(":")
            if not colon:
                raise ValidationError(f"Write each header as 'Name: value' (got {line.strip()!r}).")
            pairs.append((name.strip(), header_value.strip()))
        return pairs


def event_type_choices() -> list[tuple[str, str]]:
    """The registered kinds, read when a form is built: a kind an app adds shows up without a migration."""
    return [(kind.name, f"{kind.name}: {kind.description}") for kind in event_kinds()]


class WebhookSubscriptionForm(forms.ModelForm):
    event_types = forms.MultipleChoiceField(
        choices=event_type_choices, widget=forms.CheckboxSelectMultiple, label="Event kinds"
    )
    extra_headers = ExtraHeadersField(
        required=False,
        help_text=(
            "Sent with every delivery, for the receiver's own authentication: one 'Name: value' per line. "
            f"Stored encrypted; saved values are shown as {MASK}: leave them so to keep them."
        ),
    )

    class Meta:
        model = WebhookSubscription
        fields = ["name", "description", "target_url", "event_types", "branches", "is_active"]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.instance.pk:
            self.initial["extra_headers"] = "\n".join(f"{name}: {MASK}" for name in self.instance.extra_headers)

    def clean_extra_headers(self) -> dict[str, str]:
        stored = self.instance.extra_headers if self.instance.pk else {}
        return extra_headers_merge(stored=stored, given=self.cleaned_data["extra_headers"])


class WebhookSubscriptionAdmin(admin.ModelAdmin):
    form = WebhookSubscriptionForm
    list_display = [
        "name",
        "target_url",
        "event_kinds",
        "branch_filter",
        "owner",
        "is_active",
        "disabled_reason",
        "created_at",
    ]
    list_filter = ["is_active", "branches"]
    search_fields = ["name", "target_url", "description"]
    filter_horizontal = ["branches"]
    actions = ["send_test_event", "rotate_secret", "enable", "disable"]
    readonly_fields = [
        "signing_secret",
        "previous_secret_expires_at",
        "disabled_at",
        "disabled_reason",
        "deliveries_link",
        "owner",
        "created_at",
        "updated_at",
    ]

    def get_queryset(self, request: HttpRequest) -> QuerySet[WebhookSubscription]:
        return super().get_queryset(request).select_related("owner").prefetch_related("branches")

    def get_fieldsets(self, request: HttpRequest, obj: WebhookSubscription | None = None) -> Any:
        fieldsets: list[Any] = [
            (None, {"fields": ["name", "description", "target_url", "is_active"]}),
            ("Events", {"fields": ["event_types", "branches"]}),
            ("Receiver authentication", {"fields": ["extra_headers"]}),
        ]
        if obj is not None:
            fieldsets += [
                ("Signing", {"fields": ["signing_secret", "previous_secret_expires_at"]}),
                (
                    "History",
                    {
                        "fields": [
                            "deliveries_link",
                            "owner",
                            "disabled_at",
                            "disabled_reason",
                            "created_at",
                            "updated_at",
                        ]
                    },
                ),
            ]
        return fieldsets

    @admin.display(description="event kinds")
    def event_kinds(self, obj: WebhookSubscription) -> str:
        # The whole kind (`invoice.finalized`): a short label alone ("finalized") does not say what finished.
        return ", ".join(obj.event_types)

    @admin.display(description="branches")
    def branch_filter(self, obj: WebhookSubscription) -> str:
        return ", ".join(branch.code for branch in obj.branches.all()) or "all"

    @admin.display(description="signing secret")
    def signing_secret(self, obj: WebhookSubscription) -> str:
        return obj.secret_masked

    @admin.display(description="deliveries")
    def deliveries_link(self, obj: WebhookSubscription) -> str:
        url = reverse("admin:integrations_webhookdelivery_changelist") + f"?subscription__id__exact={obj.pk}"
        return format_html('<a href="{}">{} deliveries</a>', url, obj.deliveries.count())

    def save_model(self, request: HttpRequest, obj: WebhookSubscription, form: Any, change: bool) -> None:
        secret = subscription_save(subscription=obj, extra_headers=form.cleaned_data["extra_headers"])
        request_context(request).secret_to_show = secret or ""  # a new subscription's secret, shown once

    def response_add(
        self, request: HttpRequest, obj: WebhookSubscription, post_url_continue: str | None = None
    ) -> HttpResponse:
        # The secret goes into this one response only: no redirect, no message storage, no session.
        return self._secret_page(request, obj, request_context(request).secret_to_show, rotated=False)

    def _secret_page(
        self, request: HttpRequest, subscription: WebhookSubscription, secret: str, rotated: bool
    ) -> HttpResponse:
        context = {
            **self.admin_site.each_context(request),
            "subscription": subscription,
            "secret": secret,
            "rotated": rotated,
            "grace_until": subscription.previous_secret_expires_at,
            "continue_url": reverse("admin:integrations_webhooksubscription_change", args=[subscription.pk]),
            "opts": self.model._meta,
        }
        response = TemplateResponse(request, _SECRET_PAGE, context)
        response["Cache-Control"] = "no-store"
        return response

    @admin.action(description="Send a test event")
    def send_test_event(self, request: HttpRequest, queryset: QuerySet[WebhookSubscription]) -> None:
        for subscription in queryset:
            delivery = test_event_send(subscription=subscription)
            url = reverse("admin:integrations_webhookdelivery_change", args=[delivery.pk])
            self.message_user(
                request,
                format_html(
                    'Test event queued for {}: <a href="{}">delivery {}</a> shows the result.',
                    subscription.name,
                    url,
                    delivery.pk,
                ),
            )

    @admin.action(description="Rotate the signing secret (shows the new one once)")
    def rotate_secret(self, request: HttpRequest, queryset: QuerySet[WebhookSubscription]) -> HttpResponse | None:
        if queryset.count() != 1:
            self.message_user(request, "Select exactly one subscription to rotate its secret.", messages.WARNING)
            return None
        subscription = queryset.get()
        secret = secret_rotate(subscription=subscription)
        return self._secret_page(request, subscription, secret, rotated=True)

    @admin.action(description="Enable")
    def enable(self, request: HttpRequest, queryset: QuerySet[WebhookSubscription]) -> None:
        for subscription in queryset:
            subscription_set_active(subscription=subscription, active=True)
        self.message_user(request, f"Enabled {len(queryset)} subscription(s).")

    @admin.action(description="Disable")
    def disable(self, request: HttpRequest, queryset: QuerySet[WebhookSubscription]) -> None:
        for subscription in queryset:
            subscription_set_active(subscription=subscription, active=False, reason=f"Disabled by {request.user}.")
        self.message_user(request, f"Disabled {len(queryset)} subscription(s); their pending deliveries will fail.")


class WebhookAttemptInline(ReadOnlyAdminMixin, admin.TabularInline):
    model = WebhookAttempt
    fields = readonly_fields = (
        "number",
        "started_at",
        "duration_ms",
        "address",
        "status_code",
        "error",
        "response_excerpt",
    )
    extra = 0


def _pretty_body(event: WebhookEvent) -> str:
    return format_html("<pre>{}</pre>", json.dumps(json.loads(event.body()), indent=2, ensure_ascii=False))


class WebhookDeliveryAdmin(PatientDataAuditMixin, ReadOnlyAdminMixin, admin.ModelAdmin):
    """Read-only, with every attempt; the replay action sends a delivery again from the start. Its page
    shows the body (the patient's name): audited; the list shows no patient data."""

    audit_list_page = False

    def patient_ids_of(self, obj: WebhookDelivery) -> list[str]:
        return patient_ids_in_payload(obj.event.payload)

    list_display = [
        "id",
        "event_type",
        "subscription",
        "status",
        "attempt_count",
        "last_status_code",
        "next_attempt_at",
        "created_at",
    ]
    list_filter = ["status", "subscription", "event__type", "event__is_test"]
    list_select_related = ["event", "subscription"]
    search_fields = ["=event__id"]
    search_help_text = "Event id (the webhook-id header)."
    date_hierarchy = "created_at"
    show_full_result_count = False
    actions = ["replay"]
    inlines = [WebhookAttemptInline]
    fields = readonly_fields = (
        "event_link",
        "subscription",
        "status",
        "attempt_count",
        "next_attempt_at",
        "claimed_until",
        "last_attempt_at",
        "last_status_code",
        "last_error",
        "delivered_at",
        "created_at",
        "body",
    )

    @admin.display(description="event type", ordering="event__type")
    def event_type(self, obj: WebhookDelivery) -> str:
        return obj.event.type

    @admin.display(description="event (webhook-id)")
    def event_link(self, obj: WebhookDelivery) -> str:
        url = reverse("admin:integrations_webhookevent_change", args=[obj.event_id])
        return format_html('<a href="{}">{}</a> {}', url, obj.event_id, obj.event.type)

    @admin.display(description="body")
    def body(self, obj: WebhookDelivery) -> str:
        return _pretty_body(obj.event)

    @admin.action(description="Replay (send again from the first attempt)")
    def replay(self, request: HttpRequest, queryset: QuerySet[WebhookDelivery]) -> None:
        replayed = 0
        for delivery in queryset:
            try:
                delivery_replay(delivery=delivery)
                replayed += 1
            except ValidationError as exc:
                self.message_user(request, f"Delivery {delivery.pk}: {' '.join(exc.messages)}", messages.WARNING)
        if replayed:
            self.message_user(request, f"Queued {replayed} delivery(ies) again.")


class WebhookDeliveryInline(ReadOnlyAdminMixin, admin.TabularInline):
    model = WebhookDelivery
    fields = readonly_fields = (
        "delivery_link",
        "subscription",
        "status",
        "attempt_count",
        "last_status_code",
        "next_attempt_at",
    )
    extra = 0

    @admin.display(description="delivery")
    def delivery_link(self, obj: WebhookDelivery) -> str:
        return format_html(
            '<a href="{}">{}</a>', reverse("admin:integrations_webhookdelivery_change", args=[obj.pk]), obj.pk
        )


class WebhookEventAdmin(PatientDataAuditMixin, ReadOnlyAdminMixin, admin.ModelAdmin):
    """The outbox: every published event, read-only, with its deliveries. Its page shows the body (the
    patient's name): audited; the list shows no patient data."""

    audit_list_page = False

    def patient_ids_of(self, obj: WebhookEvent) -> list[str]:
        return patient_ids_in_payload(obj.payload)

    list_display = ["id", "type", "created_at", "delivery_count", "is_test"]
    list_filter = ["type", "is_test"]
    search_fields = ["=id"]
    date_hierarchy = "created_at"
    show_full_result_count = False
    inlines = [WebhookDeliveryInline]
    fields = readonly_fields = ("id", "type", "created_at", "branch_ref", "is_test", "body")

    def get_queryset(self, request: HttpRequest) -> QuerySet[WebhookEvent]:
        return super().get_queryset(request).annotate(delivery_total=Count("deliveries"))

    @admin.display(description="deliveries", ordering="delivery_total")
    def delivery_count(self, obj: WebhookEvent) -> int:
        return cast(Any, obj).delivery_total  # annotated by get_queryset

    @admin.display(description="body")
    def body(self, obj: WebhookEvent) -> str:
        return _pretty_body(obj)
