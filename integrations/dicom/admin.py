"""The DICOM worklist's allow-list in the admin: the calling AE titles, their branch and the addresses they may
connect from. An entry accepted from any address is flagged in the list (a column and a filter), on its page
and whenever it is saved: an AE title is easy to forge, so such an entry lets anyone on the network read the
branch's worklist."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.http import HttpRequest
from django.utils.html import format_html

from integrations.dicom.models import DicomCallingAE

ANY_ADDRESS_WARNING = (
    "accepted from ANY address: anyone on the network presenting this AE title reads the branch's worklist. "
    "Give the modality's addresses (networks) instead."
)


class DicomCallingAEForm(forms.ModelForm):
    class Meta:
        model = DicomCallingAE
        fields = ["ae_title", "branch", "networks", "any_address", "active", "description"]

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        if not cleaned.get("networks") and not cleaned.get("any_address"):
            self.add_error("networks", "Give the addresses the modality connects from, or tick 'any address'.")
        return cleaned


@admin.display(description="addresses", ordering="any_address")
def addresses(entry: DicomCallingAE) -> str:
    if entry.any_address:
        return format_html('<strong style="color:#ba2121">{}</strong>', "⚠ ANY ADDRESS")
    return ", ".join(entry.networks)


class DicomCallingAEAdmin(admin.ModelAdmin):
    form = DicomCallingAEForm
    list_display = ["ae_title", "branch", addresses, "active", "description", "created_at"]
    list_filter = ["any_address", "active", "branch"]
    list_select_related = ["branch"]
    search_fields = ["ae_title", "description"]
    fields = ["ae_title", "branch", "networks", "any_address", "active", "description"]

    def change_view(
        self, request: HttpRequest, object_id: str, form_url: str = "", extra_context: dict[str, Any] | None = None
    ) -> Any:
        entry = self.get_object(request, object_id)
        if entry is not None and entry.any_address and request.method == "GET":
            messages.warning(request, f"{entry.ae_title} is {ANY_ADDRESS_WARNING}")
        return super().change_view(request, object_id, form_url, extra_context)

    def save_model(self, request: HttpRequest, obj: DicomCallingAE, form: Any, change: bool) -> None:
        super().save_model(request, obj, form, change)
        if obj.any_address:
            messages.warning(request, f"{obj.ae_title} is {ANY_ADDRESS_WARNING}")
