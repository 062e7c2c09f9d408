"""Admin for API clients (secret shown exactly once), access tokens and the read-only audit log."""

from __future__ import annotations

import uuid
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import reverse

from clinic.api.context import request_context
from integrations.clients.jwks import JwksRefused, jwks_fetch
from integrations.clients.models import validate_jwks_url
from integrations.clients.scopes import SCOPE_CHOICES
from integrations.clients.services import api_client_create, api_client_rotate_secret, api_client_set_active
from integrations.models import (
    ApiClient,
    AuditLogEntry,
    validate_network,
)


class LinesField(forms.CharField):
    """An array edited as one item per line."""

    widget = forms.Textarea(attrs={"rows": 3, "cols": 40})

    def prepare_value(self, value: Any) -> Any:
        return "\n".join(value) if isinstance(value, list) else value

    def to_python(self, value: Any) -> list[str]:  # type: ignore[override]
        return [line.strip() for line in (value or "").replace(",", "\n").splitlines() if line.strip()]


class NetworkLinesField(LinesField):
    def validate(self, value: list[str]) -> None:
        super().validate(value)
        # Rejected here, so a bad entry never reaches ApiClient.clean(), which would crash parsing it.
        errors = []
        for network in value:
            try:
                validate_network(network)
            except forms.ValidationError as exc:
                errors.extend(exc.error_list)
        if errors:
            raise forms.ValidationError(errors)


class JwksField(forms.JSONField):
    """The JWKS as JSON text; empty when the client has none (Django's field would show `null`)."""

    def prepare_value(self, value: Any) -> Any:
        return "" if value is None else super().prepare_value(value)


class ApiClientForm(forms.ModelForm):
    allowed_scopes = forms.MultipleChoiceField(
        choices=SCOPE_CHOICES, widget=forms.CheckboxSelectMultiple, required=False
    )
    ip_allowlist = NetworkLinesField(
        required=False,
        label="IP allow-list",
        help_text="One address or CIDR per line (IPv4 or IPv6). Empty: any address.",
    )
    jwks = JwksField(
        required=False,
        label="JWKS",
        widget=forms.Textarea(attrs={"rows": 6, "cols": 80}),
        help_text=ApiClient._meta.get_field("jwks").help_text,
    )

    class Meta:
        model = ApiClient
        fields = [
            "name",
            "description",
            "allowed_scopes",
            "branches",
            "default_branch",
            "ip_allowlist",
            "rate_limit_per_minute",
            "token_lifetime_seconds",
            "is_active",
            "jwks_uri",
            "jwks",
            "assertion_only",
        ]

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        default, branches = cleaned.get("default_branch"), cleaned.get("branches")
        if default is not None and branches and default not in branches:
            self.add_error("default_branch", "Choose one of the client's branches (or none).")
        url = cleaned.get("jwks_uri")
        if url and "jwks_uri" in self.changed_data:
            self._check_jwks_url(url)
        return cleaned

    def _check_jwks_url(self, url: str) -> None:
        """A URL must serve a valid set when it is registered, not first when an assertion arrives."""
        try:
            validate_jwks_url(url)
        except forms.ValidationError:
            return  # the model's validation reports it, once
        try:
            jwks_fetch(url)
        except JwksRefused as exc:
            self.add_error("jwks_uri", str(exc))


class ApiClientAdmin(admin.ModelAdmin):
    form = ApiClientForm
    list_display = ["name", "client_id", "scope_list", "is_active", "rate_limit_per_minute", "created"]
    list_filter = ["is_active", "branches"]
    search_fields = ["name", "client_id", "description"]
    readonly_fields = ["client_id", "created", "updated"]
    filter_horizontal = ["branches"]
    actions = ["rotate_secret", "deactivate", "activate"]
    fieldsets = [
        (None, {"fields": ["name", "description", "client_id", "is_active"]}),
        ("Access", {"fields": ["allowed_scopes", "branches", "default_branch"]}),
        ("Controls", {"fields": ["ip_allowlist", "rate_limit_per_minute", "token_lifetime_seconds"]}),
        (
            "SMART Backend Services (signed assertions)",
            {
                "fields": ["jwks_uri", "jwks", "assertion_only"],
                "description": "Public keys the client signs its token requests with (private_key_jwt, RS384 or "
                "ES384): a JWKS URL or the JWKS itself, not both.",
            },
        ),
        ("History", {"fields": ["created", "updated"]}),
    ]

    def get_fieldsets(self, request: HttpRequest, obj: ApiClient | None = None) -> Any:
        fieldsets = super().get_fieldsets(request, obj)
        if obj is not None:
            return fieldsets
        # The add form shows no client id: the model's default there was not the id the service then
        # generated and saved. The saved id is shown with the secret, once the client exists.
        return [
            (name, {**options, "fields": [field for field in options["fields"] if field != "client_id"]})
            for name, options in fieldsets
        ]

    @admin.display(description="scopes")
    def scope_list(self, obj: ApiClient) -> str:
        return " ".join(obj.allowed_scopes)

    def save_model(self, request: HttpRequest, obj: ApiClient, form: Any, change: bool) -> None:
        if not change:
            # Created by the service, like create_api_client; the form's object then becomes that row (its
            # branches are set by the form's save_m2m right after).
            created, secret = api_client_create(
                name=obj.name,
                scopes=obj.allowed_scopes,
                description=obj.description,
                ip_allowlist=obj.ip_allowlist,
                rate_limit_per_minute=obj.rate_limit_per_minute,
                token_lifetime_seconds=obj.token_lifetime_seconds,
                jwks=obj.jwks,
                jwks_uri=obj.jwks_uri,
                assertion_only=obj.assertion_only,
            )
            request_context(request).secret_to_show = secret
            obj.pk = created.pk
            obj._state.adding = False
            obj.refresh_from_db()
            if not form.cleaned_data.get("is_active", True):
                api_client_set_active(client=obj, active=False)
            return
        was_active = ApiClient.objects.filter(pk=obj.pk).values_list("is_active", flat=True).first() if change else True
        super().save_model(request, obj, form, change)
        if change and was_active and not obj.is_active:
            api_client_set_active(client=obj, active=False)

    def response_add(self, request: HttpRequest, obj: ApiClient, post_url_continue: str | None = None) -> HttpResponse:
        # The secret goes into this one response only: no redirect, no message storage, no session.
        return self._secret_page(request, obj, request_context(request).secret_to_show)

    def _secret_page(self, request: HttpRequest, client: ApiClient, secret: str) -> HttpResponse:
        context = {
            **self.admin_site.each_context(request),
            "client": client,
            "secret": secret,
            "continue_url": reverse("admin:integrations_apiclient_change", args=[client.pk]),
            "opts": self.model._meta,
        }
        response = TemplateResponse(request, "admin/integrations/apiclient/secret.html", context)
        response["Cache-Control"] = "no-store"
        return response

    @admin.action(description="Rotate the secret (shows the new one once)")
    def rotate_secret(self, request: HttpRequest, queryset: QuerySet[ApiClient]) -> HttpResponse | None:
        if queryset.count() != 1:
            self.message_user(request, "Select exactly one client to rotate its secret.", messages.WARNING)
            return None
        client = queryset.get()
        if client.assertion_only:
            # Its secret is never accepted: rotating would show a credential that cannot be used.
            self.message_user(
                request,
                f"{client.name} authenticates with signed JWTs only; it has no secret to rotate.",
                messages.WARNING,
            )
            return None
        return self._secret_page(request, client, api_client_rotate_secret(client=client))

    @admin.action(description="Deactivate (revokes its tokens at once)")
    def deactivate(self, request: HttpRequest, queryset: QuerySet[ApiClient]) -> None:
        for client in queryset:
            api_client_set_active(client=client, active=False)
        self.message_user(request, f"Deactivated {queryset.count()} client(s); their tokens no longer work.")

    @admin.action(description="Activate")
    def activate(self, request: HttpRequest, queryset: QuerySet[ApiClient]) -> None:
        for client in queryset:
            api_client_set_active(client=client, active=True)
        self.message_user(request, f"Activated {queryset.count()} client(s).")


class AuditLogEntryAdmin(admin.ModelAdmin):
    """Read-only. Search by patient UUID, request id, path or token reference."""

    list_display = ["created_at", "client", "actor", "method", "path", "status", "duration_ms", "ip", "request_id"]
    list_filter = ["client", "status", "method"]
    list_select_related = ["client"]
    search_fields = ["request_id", "path", "token_ref", "actor"]
    date_hierarchy = "created_at"
    show_full_result_count = False  # the log grows large; skip the unfiltered COUNT(*)

    def get_search_results(self, request: HttpRequest, queryset: QuerySet[AuditLogEntry], search_term: str) -> Any:
        try:
            patient_id = uuid.UUID(search_term.strip())
        except ValueError:
            return super().get_search_results(request, queryset, search_term)
        return queryset.filter(patient_ids__contains=[patient_id]), False

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
