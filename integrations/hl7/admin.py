"""Admin for HL7 v2: destinations and senders (edited here), the outbound messages with their attempts
(read-only; replay action), and the received control ids (read-only). The message page shows the ER7 text
(patient data): audited like the webhook delivery page; the lists show ids only."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.contrib.postgres.forms import SimpleArrayField
from django.core.exceptions import ValidationError
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.html import format_html

from clinic.admin_audit import PatientDataAuditMixin, patient_ids_in_payload
from clinic.admin_records import ReadOnlyAdminMixin
from integrations.hl7.kinds import EVENT_TYPE_CHOICES
from integrations.hl7.messages import MessageBuildError, message_build
from integrations.hl7.models import Hl7Attempt, Hl7Destination, Hl7Message, Hl7ReceivedMessage, Hl7Sender
from integrations.hl7.outbox import message_replay
from integrations.hl7.services import hl7_sender_identity_check


class Hl7DestinationForm(forms.ModelForm):
    event_types = forms.MultipleChoiceField(choices=EVENT_TYPE_CHOICES, widget=forms.CheckboxSelectMultiple)

    class Meta:
        model = Hl7Destination
        fields = [
            "name",
            "host",
            "port",
            "event_types",
            "sending_application",
            "sending_facility",
            "receiving_application",
            "receiving_facility",
            "is_active",
            "connect_timeout_seconds",
            "ack_timeout_seconds",
        ]


class Hl7DestinationAdmin(admin.ModelAdmin):
    form = Hl7DestinationForm
    list_display = ["name", "host", "port", "receiving_application", "is_active", "claimed_until"]
    list_filter = ["is_active"]
    search_fields = ["name", "host"]


class Hl7SenderForm(forms.ModelForm):
    networks = SimpleArrayField(forms.CharField(max_length=50), help_text="Comma-separated addresses or CIDR networks.")

    class Meta:
        model = Hl7Sender
        fields = [
            "name",
            "networks",
            "branches",
            "sending_application",
            "sending_facility",
            "default_charset",
            "is_active",
        ]

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if not data.get("branches"):
            self.add_error("branches", "Name at least one branch whose orders the sender reports on.")
        application, facility = data.get("sending_application") or "", data.get("sending_facility") or ""
        try:
            # The same rule as create_hl7_sender: an identity is one sender's, whatever its case (docs/hl7-inbound.md).
            hl7_sender_identity_check(application=application, facility=facility, exclude=self.instance)
        except ValidationError as exc:
            for field, messages in exc.message_dict.items():
                self.add_error(field, messages)
        return data


class Hl7SenderAdmin(admin.ModelAdmin):
    form = Hl7SenderForm
    list_display = ["name", "networks", "identity", "branch_codes", "default_charset", "is_active"]
    list_filter = ["is_active", "default_charset"]
    search_fields = ["name", "sending_application", "sending_facility"]
    filter_horizontal = ["branches"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Hl7Sender]:
        return super().get_queryset(request).prefetch_related("branches")

    @admin.display(description="MSH-3/MSH-4")
    def identity(self, obj: Hl7Sender) -> str:
        return "/".join((obj.sending_application or "*", obj.sending_facility or "*"))

    @admin.display(description="branches")
    def branch_codes(self, obj: Hl7Sender) -> str:
        return ", ".join(sorted(branch.code for branch in obj.branches.all()))


class Hl7AttemptInline(ReadOnlyAdminMixin, admin.TabularInline):
    model = Hl7Attempt
    fields = readonly_fields = ("number", "started_at", "duration_ms", "ack_code", "ack_text", "error")
    extra = 0


class Hl7MessageAdmin(PatientDataAuditMixin, ReadOnlyAdminMixin, admin.ModelAdmin):
    audit_list_page = False

    def patient_ids_of(self, obj: Hl7Message) -> list[str]:
        return patient_ids_in_payload(obj.event.payload)

    list_display = [
        "id",
        "message_type",
        "control_id",
        "destination",
        "status",
        "attempt_count",
        "last_ack_code",
        "next_attempt_at",
        "created_at",
    ]
    list_filter = ["status", "destination", "message_type"]
    list_select_related = ["destination"]
    search_fields = ["=control_id", "=event__id"]
    search_help_text = "Control id (MSH-10) or event id."
    show_full_result_count = False
    actions = ["replay"]
    inlines = [Hl7AttemptInline]
    fields = readonly_fields = (
        "destination",
        "event",
        "message_type",
        "control_id",
        "status",
        "attempt_count",
        "next_attempt_at",
        "last_ack_code",
        "last_error",
        "acknowledged_at",
        "created_at",
        "er7",
    )

    @admin.display(description="message (ER7)")
    def er7(self, obj: Hl7Message) -> str:
        try:
            text = message_build(
                event_type=obj.event.type,
                payload=obj.event.payload,
                destination=obj.destination,
                control_id=obj.control_id,
                created_at=obj.event.created_at,
            )
        except MessageBuildError as exc:
            text = str(exc)
        return format_html("<pre>{}</pre>", text.replace("\r", "\n"))

    @admin.action(description="Replay (send again from the first attempt, same control id)")
    def replay(self, request: HttpRequest, queryset: QuerySet[Hl7Message]) -> None:
        for message in queryset:
            message_replay(message=message)
        self.message_user(request, f"Queued {queryset.count()} HL7 message(s) again.")


class Hl7ReceivedMessageAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ["control_id", "sender", "sending_application", "sending_facility", "peer", "received_at"]
    list_filter = ["sender", "message_type"]
    list_select_related = ["sender"]
    search_fields = ["=control_id", "=content_sha256"]
    show_full_result_count = False
    fields = readonly_fields = (
        "sender",
        "sending_application",
        "sending_facility",
        "control_id",
        "content_sha256",
        "message_type",
        "order_ids",
        "peer",
        "received_at",
        "ack_text",
    )

    @admin.display(description="ACK sent")
    def ack_text(self, obj: Hl7ReceivedMessage) -> Any:
        return format_html("<pre>{}</pre>", obj.ack.replace("\r", "\n"))
