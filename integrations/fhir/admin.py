"""Bulk export jobs in the admin, read-only: who exported what and where each job stands. Jobs are started,
cancelled and expired through the FHIR API and the beat task only."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest


class ExportJobAdmin(admin.ModelAdmin):
    list_display = ["created_at", "client", "level", "status", "completed_at", "expires_at"]
    list_filter = ["status", "level", "client"]
    list_select_related = ["client"]
    search_fields = ["id", "client__name", "request_url"]
    date_hierarchy = "created_at"

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
