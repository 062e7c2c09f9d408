"""Yes/no columns in words (docs/staff.md §8): Django draws a boolean column as a green tick or a red cross,
which staff misread (a tick in an "Expired" column read as "fine"). Every admin list shows "Yes" or "No"
instead, still sortable by the field; ClinicAdminSite.register puts this under every ModelAdmin."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib import admin
from django.core.exceptions import FieldDoesNotExist
from django.db import models
from django.http import HttpRequest


def yes_no(value: bool | None) -> str:
    return "" if value is None else ("Yes" if value else "No")


def _in_words(field: models.Field[Any, Any]) -> Callable[[Any], str]:
    name = field.name

    @admin.display(description=str(field.verbose_name), ordering=name)
    def column(obj: Any) -> str:
        return yes_no(getattr(obj, name))

    column.__name__ = f"{name}_in_words"
    return column


class BooleansInWords(admin.ModelAdmin):
    def get_list_display(self, request: HttpRequest) -> Any:
        shown = super().get_list_display(request)
        editable = set(self.list_editable)
        columns: list[Any] = []
        for item in shown:
            field = None
            if isinstance(item, str) and item not in editable and item != "__str__":
                try:
                    field = self.model._meta.get_field(item)
                except FieldDoesNotExist:
                    field = None
            columns.append(_in_words(field) if isinstance(field, models.BooleanField) else item)
        return columns
