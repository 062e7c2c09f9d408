"""The laboratory's daily pages in the admin (docs/staff.md), added to the lab order admin:

- the work list (`worklist/`): open orders with lab items at the staff member's branches, STAT first, oldest
  first, with the turnaround clock, and the orders released in the last day with their report;
- result entry per order (`<id>/results/`): each lab item with its analytes, the reference band the results
  service reads a value against, and the current results with their flags. Saving posts the entered values
  as preliminary results through lab.results (the API's service: the same checks, versions, events);
- acknowledging a critical value (`<id>/results/<result id>/acknowledge/`, POST) through lab.review.

Each view checks a real permission (403 otherwise), reads through the staff member's branches (another
branch's order is 404, unknown ids too) and is audited as a page showing the order's patients.
"""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

from django import forms
from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBase, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils import timezone
from django.views.decorators.http import require_POST

from clinic.admin_audit import Clock, staff_actor, write_admin_audit
from clinic.errors import DomainError, FieldError, NotFound
from clinic.staff import staff_reader
from lab import interpretation, review
from lab import results as lab_results
from lab.admin_display import acknowledgement, band, duration_words, flag_html, local_moment, result_value
from lab.models import CRITICAL_FLAGS, LabOrder, LabResult, ResultStatus, ValueType
from lab.selectors import lab_order_get, released_lab_orders, work_list
from lab.workplace import EntryItem, result_entry_sheet

WORK_LIST_LIMIT = 200
RELEASED_WINDOW = timedelta(hours=24)
# A value longer than any the analyte can take is refused by the form, before the service reads it.
_MAX_LENGTH: dict[str, int] = {
    ValueType.QUANTITY: 40,
    ValueType.CODED: 60,
    ValueType.TEXT: interpretation.MAX_TEXT_LENGTH,
}


def work_list_url() -> str:
    """The work list, for a dashboard's link."""
    return reverse("admin:lab_laborder_worklist")


class AcknowledgementForm(forms.Form):
    """Who was told of a critical value and how; optional, as the laboratory's procedure decides (a NUL byte
    or more than 500 characters is refused with the field named, never stored cut)."""

    note = forms.CharField(max_length=500, required=False)


def critical_unacknowledged_url() -> str:
    """The lab order list filtered to the orders with an unacknowledged critical value (lab.admin's
    CriticalFilter), for a dashboard's link; lab.selectors.critical_unacknowledged counts the same."""
    return f"{reverse('admin:lab_laborder_changelist')}?critical=unacknowledged"


def _field_name(analyte_id: uuid.UUID) -> str:
    return f"value-{analyte_id}"


class ResultEntryForm(forms.Form):
    """One optional value per enterable analyte of the sheet; a blank one is not recorded."""

    def __init__(self, sheet: list[EntryItem], *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.entries: dict[str, tuple[str, str]] = {}  # field name -> (test code, analyte code)
        for entry in sheet:
            for row in entry.rows:
                if not row.enterable:
                    continue
                analyte = row.analyte
                name = _field_name(analyte.id)
                self.fields[name] = forms.CharField(
                    label=f"{analyte.code} · {analyte.name}",
                    required=False,
                    max_length=_MAX_LENGTH.get(analyte.value_type, 60),
                    widget=forms.TextInput(attrs={"size": 12, "autocomplete": "off"}),
                )
                self.entries[name] = (entry.item.test.code, analyte.code)

    def results(self) -> list[tuple[str, lab_results.ResultInput]]:
        """(field name, what to post) for each value entered, in the page's order."""
        entered = []
        for name, (test, analyte) in self.entries.items():
            value = self.cleaned_data.get(name) or ""
            if value:
                entered.append((name, lab_results.ResultInput(test=test, analyte=analyte, value=value)))
        return entered

    def refused(self, error: FieldError, names: list[str]) -> None:
        """The service's refusal, each `results.<i>.<field>` on the value of the i-th result posted."""
        for key, message in error.errors.items():
            parts = key.split(".")
            if parts[0] == "results" and len(parts) > 1 and parts[1].isdigit() and int(parts[1]) < len(names):
                self.add_error(names[int(parts[1])], message)
            else:
                self.add_error(None, f"{key}: {message}")

    def problems(self) -> list[str]:
        """Every error, each field's named by its analyte (the summary above the sheet)."""
        named = []
        for name, errors in self.errors.items():
            label = self.fields[name].label if name in self.fields else None
            named += [f"{label}: {error}" if label else str(error) for error in errors]
        return named


def _rows(sheet: list[EntryItem], form: ResultEntryForm, order: LabOrder) -> list[dict[str, Any]]:
    """The sheet as the template shows it: one dict per item, its rows ready to print."""
    zone = order.branch.zone
    shown = []
    for entry in sheet:
        rows = []
        for row in entry.rows:
            current = row.current
            name = _field_name(row.analyte.id)
            rows.append(
                {
                    "analyte": row.analyte,
                    "field": form[name] if name in form.fields else None,
                    "unit": row.analyte.unit,
                    "reference": band(row.reference_low, row.reference_high),
                    "current": current,
                    "value": result_value(current) if current else "",
                    "flag": flag_html(current.flag) if current else "",
                    "acknowledgement": acknowledgement(current, zone) if current else "",
                    "can_acknowledge": current is not None
                    and current.flag in CRITICAL_FLAGS
                    and current.critical_acknowledged_at is None,
                    "recorded": f"{current.recorded_by or current.performer}, {local_moment(current.recorded_at, zone)}"
                    if current
                    else "",
                }
            )
        shown.append({"item": entry.item, "rows": rows, "waiting_for_specimen": entry.waiting_for_specimen})
    return shown


class LabWorkplaceMixin:
    """The work list, result entry and critical acknowledgement views of LabOrderAdmin."""

    admin_site: Any
    model: type[LabOrder]

    def workplace_urls(self) -> list[URLPattern]:
        view = self.admin_site.admin_view
        return [
            path("worklist/", view(self.work_list_view), name="lab_laborder_worklist"),
            path(
                "<path:object_id>/results/<uuid:result_id>/acknowledge/",
                view(require_POST(self.acknowledge_view)),
                name="lab_laborder_acknowledge",
            ),
            path("<path:object_id>/results/", view(self.results_view), name="lab_laborder_results"),
        ]

    def _order(self, request: HttpRequest, object_id: str) -> LabOrder:
        try:
            return lab_order_get(client=staff_reader(request.user), ref=object_id)
        except NotFound:
            raise Http404(f"No lab order {object_id!r}.") from None

    def _page(self, request: HttpRequest, template: str, title: str, **context: Any) -> TemplateResponse:
        opts = self.model._meta
        return TemplateResponse(
            request,
            f"admin/lab/laborder/{template}",
            {**self.admin_site.each_context(request), "title": title, "opts": opts, **context},
        )

    # --- the work list ---------------------------------------------------------------------------------

    def work_list_view(self, request: HttpRequest) -> HttpResponse:
        if not request.user.has_perm("lab.view_laborder"):
            raise PermissionDenied
        clock = Clock()
        reader = staff_reader(request.user)
        now = timezone.now()
        entries = work_list(client=reader, limit=WORK_LIST_LIMIT, now=now)
        released = list(released_lab_orders(client=reader, since=now - RELEASED_WINDOW))
        rows = [
            {
                "entry": entry,
                "ordered": local_moment(entry.order.created_at, entry.order.branch.zone),
                "since_ordered": duration_words(entry.since_ordered),
                "since_collected": duration_words(entry.since_collected) if entry.since_collected else "",
                "target": duration_words(entry.target),
            }
            for entry in entries
        ]
        done = [{"order": order, "released": local_moment(order.updated_at, order.branch.zone)} for order in released]
        response = self._page(request, "work_list.html", "Lab work list", rows=rows, released=done)
        patients = [entry.order.patient_id for entry in entries] + [order.patient_id for order in released]
        write_admin_audit(request, response, patients, clock)
        return response

    # --- result entry ----------------------------------------------------------------------------------

    def results_view(self, request: HttpRequest, object_id: str) -> HttpResponseBase:
        if not request.user.has_perm("lab.add_labresult"):
            raise PermissionDenied
        clock = Clock()
        order = self._order(request, object_id)
        sheet = result_entry_sheet(order)
        form = ResultEntryForm(sheet, request.POST if request.method == "POST" else None)
        if request.method == "POST" and form.is_valid():
            response = self._record(request, order, form)
            if response is not None:
                write_admin_audit(request, response, [order.patient_id], clock)
                return response
        response = self._page(
            request,
            "results_entry.html",
            f"Enter results · {order.order_number}",
            order=order,
            items=_rows(sheet, form, order),
            form=form,
            problems=form.problems() if form.is_bound else [],
            entering=bool(form.fields),
            ordered=local_moment(order.created_at, order.branch.zone),
            collected=local_moment(order.collected_at, order.branch.zone) if order.collected_at else "",
        )
        write_admin_audit(request, response, [order.patient_id], clock)
        return response

    def _record(self, request: HttpRequest, order: LabOrder, form: ResultEntryForm) -> HttpResponseBase | None:
        """Post the entered values as preliminary results; the page again (None) when refused."""
        entered = form.results()
        if not entered:
            form.add_error(None, "Enter at least one value.")
            return None
        actor = staff_actor(request)
        try:
            lab_results.lab_results_record(
                order=order,
                results=[posted for _, posted in entered],
                performed_at=timezone.now(),
                performer=actor,
                status=ResultStatus.PRELIMINARY,
                recorded_by=actor,
            )
        except FieldError as error:
            form.refused(error, [name for name, _ in entered])
            return None
        except DomainError as error:
            form.add_error(None, error.detail)
            return None
        messages.success(request, f"{len(entered)} preliminary result(s) recorded on {order.order_number}.")
        return HttpResponseRedirect(reverse("admin:lab_laborder_results", args=[order.pk]))

    # --- critical acknowledgement ----------------------------------------------------------------------

    def acknowledge_view(self, request: HttpRequest, object_id: str, result_id: uuid.UUID) -> HttpResponseBase:
        if not request.user.has_perm("lab.change_labresult"):
            raise PermissionDenied
        clock = Clock()
        order = self._order(request, object_id)
        result = LabResult.objects.filter(pk=result_id, item__order_id=order.pk).first()
        if result is None:
            raise Http404(f"No result {result_id} on {order.order_number}.")
        form = AcknowledgementForm(request.POST)
        if not form.is_valid():
            problems = "; ".join(str(error) for error in form.errors["note"])
            messages.error(request, f"Note: {problems} Nothing was acknowledged.")
        else:
            try:
                review.lab_result_acknowledge_critical(
                    result=result, actor=staff_actor(request), note=form.cleaned_data["note"]
                )
            except DomainError as error:
                messages.error(request, error.detail)
            else:
                messages.success(request, f"Critical result acknowledged by {staff_actor(request)}.")
        response = HttpResponseRedirect(reverse("admin:lab_laborder_results", args=[order.pk]))
        write_admin_audit(request, response, [order.patient_id], clock)
        return response
