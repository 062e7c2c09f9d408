"""The DICOM worklist's allow-list in the admin: the calling AE titles, their branch and address."""

from __future__ import annotations

from django.contrib import admin


class DicomCallingAEAdmin(admin.ModelAdmin):
    list_display = ["ae_title", "branch", "networks", "any_address", "active", "description", "created_at"]
    list_filter = ["active", "branch"]
    list_select_related = ["branch"]
    search_fields = ["ae_title", "description"]
    fields = ["ae_title", "branch", "networks", "any_address", "active", "description"]
