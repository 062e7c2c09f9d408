"""Admin for the patient notification settings (one row) and the read-only notification log."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect

from clinic.admin_audit import PatientDataAuditMixin
from integrations.notifications.models import NotificationAttempt, NotificationSettings
from integrations.webhooks.registry import event_kinds_notifying


def notifying_kind_choices() -> list[tuple[str, str]]:
    """The kinds that may notify, with the labels their apps declared, read when a form is built."""
    return [(kind.name, kind.notification_label) for kind in event_kinds_notifying()]


class NotificationSettingsForm(forms.ModelForm):
    event_kinds = forms.MultipleChoiceField(
        choices=notifying_kind_choices,
        widget=forms.CheckboxSelectMultiple,
        required=False,
        label="Notify the patient",
    )

    class Meta:
        model = NotificationSettings
        fields = ["sms_enabled", "email_enabled", "event_kinds", "branches"]

    def clean_event_kinds(self) -> list[str]:
        chosen = set(self.cleaned_data["event_kinds"])
        return [name for name, _ in notifying_kind_choices() if name in chosen]


class NotificationSettingsAdmin(admin.ModelAdmin):
    """One row: the list page opens it directly."""

    form = NotificationSettingsForm
    fieldsets = [
        ("Channels", {"fields": ["sms_enabled", "email_enabled"]}),
        ("Events", {"fields": ["event_kinds"]}),
        ("Scope", {"fields": ["branches"]}),
    ]
    filter_horizontal = ["branches"]

    def changelist_view(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> HttpResponse:
        settings_row = NotificationSettings.load()
        return redirect("admin:integrations_notificationsettings_change", settings_row.pk)

    def get_object(self, request: HttpRequest, object_id: str, from_field: str | None = None) -> Any:
        return NotificationSettings.load() if object_id == "1" else None

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class NotificationAttemptAdmin(PatientDataAuditMixin, admin.ModelAdmin):
    """The log of patient notifications: read-only. Shows whom a message went to (masked): audited."""

    list_display = ["created_at", "event_type", "channel", "recipient", "status", "attempt", "detail", "duration_ms"]
    list_filter = ["status", "channel", "event_type"]
    search_fields = ["=subject_id", "=patient_ref"]
    search_help_text = "Subject (e.g. appointment) or patient UUID."
    date_hierarchy = "created_at"

    def patient_ids_of(self, obj: NotificationAttempt) -> list[Any]:
        return [obj.patient_ref]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
