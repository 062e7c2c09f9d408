"""Shared pieces of admin actions: running a service on each selected row, and the confirmation page of
actions that need a reason first (cancelling appointments or invoices)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.db.models import Model, QuerySet
from django.http import HttpRequest
from django.template.response import TemplateResponse

from clinic.errors import DomainError, FieldError


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
    confirmed = form_confirmation(
        modeladmin,
        request,
        queryset,
        form_class=ReasonForm,
        action=action,
        title=title,
        intro=intro,
        submit_label=submit_label,
        describe=describe,
    )
    return confirmed if isinstance(confirmed, TemplateResponse) else str(confirmed["reason"])


def form_confirmation(
    modeladmin: admin.ModelAdmin[Any],
    request: HttpRequest,
    queryset: QuerySet[Any],
    *,
    form_class: type[forms.Form],
    action: str,
    title: str,
    intro: str,
    submit_label: str,
    describe: Callable[[Any], str] = str,
) -> dict[str, Any] | TemplateResponse:
    """The cleaned form once staff confirmed with a valid one (a reason, a merge target...); until then the
    confirmation page, re-shown with the form's errors."""
    form = form_class(request.POST if "confirm" in request.POST else None)
    if form.is_valid():
        return form.cleaned_data
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


def apply_to_each(
    modeladmin: admin.ModelAdmin[Any], request: HttpRequest, rows: Iterable[Any], change: Callable[[Any], Any]
) -> None:
    """Run `change` (a service call) on each selected row. A refusal is reported for that row and the
    others still go through; the count of rows changed is reported once."""
    done = 0
    for row in rows:
        try:
            change(row)
            done += 1
        except DomainError as exc:
            detail = "; ".join(exc.errors.values()) if isinstance(exc, FieldError) else exc.detail
            modeladmin.message_user(request, f"{row}: {detail}", messages.ERROR)
    if done:
        noun = modeladmin.model._meta.verbose_name
        modeladmin.message_user(request, f"{done} {noun}(s) updated.", messages.SUCCESS)
