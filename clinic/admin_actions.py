"""Admin actions that need a reason before they act (cancelling appointments or invoices): one
confirmation page listing the selected rows and asking for the reason."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django import forms
from django.contrib import admin
from django.contrib.admin import helpers
from django.db.models import Model, QuerySet
from django.http import HttpRequest
from django.template.response import TemplateResponse


class ReasonForm(forms.Form):
    reason = forms.CharField(max_length=500, widget=forms.TextInput(attrs={"size": 60}))


def reason_confirmation(
    modeladmin: admin.ModelAdmin[Any],
    request: HttpRequest,
    queryset: QuerySet[Any],
    *,
    action: str,
    title: str,
    intro: str,
    submit_label: str,
    describe: Callable[[Any], str] = str,
) -> str | TemplateResponse:
    """The reason once staff confirmed with one; until then the confirmation page (re-shown with the
    form's errors when the reason is missing)."""
    form = ReasonForm(request.POST if "confirm" in request.POST else None)
    if form.is_valid():
        return str(form.cleaned_data["reason"])
    rows: list[Model] = list(queryset)
    return TemplateResponse(
        request,
        "admin/reason_action.html",
        {
            **modeladmin.admin_site.each_context(request),
            "title": title,
            "intro": intro,
            "submit_label": submit_label,
            "action": action,
            "opts": modeladmin.model._meta,
            "items": [(row.pk, describe(row)) for row in rows],
            "form": form,
            "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
        },
    )
