"""The lab and imaging catalogue in the admin (docs/api-rules.md §13): tests with their analytes inline, and
each analyte with its reference ranges inline. The forms check what PostgreSQL would refuse and more, so
staff get a form error naming the field or the rows, never a 500:

- LOINC codes: the format and the mod 10 check digit (lab.loinc);
- a lab test has a specimen type and no modality, an imaging test a modality and no specimen type (and no
  analytes);
- a quantity analyte has a plausible UCUM unit, a coded analyte its coded values, critical limits only on
  quantities with low below high;
- reference ranges (quantity analytes only): low at most high, a non-empty age band, and no two bands of
  one analyte overlapping for the same sex, nor an `any` band overlapping a `male` or `female` one (the
  database's exclusion constraint covers the same sex only).

A refusal by the database itself (another change saved meanwhile) is shown as a form error too.

Lab orders are read-only here: they are placed through the API (lab.services), and staff change them only
by the list page's actions, each a service call: collect the specimens, cancel with a reason, verify and
release the preliminary results (lab.review: re-posted as final through lab.results, so the versions are
kept; refused while a critical value is unacknowledged), and by the laboratory's own pages
(lab.admin_workplace): the work list, result entry per order and the acknowledgement of critical values.
A refusal of a service is an error message, never a 500; every page showing an order's patient is audited
(clinic.admin_audit)."""

from __future__ import annotations

import logging
import re
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.utils import unquote
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import IntegrityError, transaction
from django.db.models import Prefetch, QuerySet
from django.forms.models import BaseInlineFormSet
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBase, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join

from clinic.admin_actions import apply_to_each, form_confirmation, reason_confirmation
from clinic.admin_audit import Clock, PatientDataAuditMixin, staff_actor, write_admin_audit
from clinic.admin_records import NoDeleteAdminMixin
from clinic.lib.pdf import RenderError
from lab import review as lab_review
from lab import services as lab_services
from lab.admin_display import acknowledgement, flag_html, result_limits, result_value
from lab.admin_workplace import LabWorkplaceMixin
from lab.loinc import loinc_problem
from lab.models import (
    Analyte,
    ImagingStation,
    LabOrder,
    LabOrderItem,
    LabResult,
    LabTest,
    RangeSex,
    ReferenceRange,
    TestKind,
    ValueType,
)
from lab.report import lab_report_response
from lab.selectors import lab_order_load, orders_with_critical_unacknowledged

# A plausible UCUM unit: printable ASCII without spaces (g/dL, 10*3/uL, mg/dL, %, [iU]/L). Not a parser.
UCUM_PATTERN = re.compile(r"^[!-~]+$")

# Set on the request when the database refused a save: the re-run of the form shows it as a form error.
_REFUSED = "_lab_catalogue_refused"

CONSTRAINT_MESSAGES = {
    "referencerange_no_overlap_per_sex": "Two reference ranges of this analyte for the same sex overlap.",
    "analyte_code_unique_per_test": "Two analytes of this test have the same code.",
    "labtest_code_key": "A test with this code already exists.",
}

logger = logging.getLogger(__name__)


def _refusal(error: IntegrityError) -> str:
    constraint = getattr(getattr(error.__cause__, "diag", None), "constraint_name", None)
    message = CONSTRAINT_MESSAGES.get(constraint or "", f"The database refused the change ({constraint or error}).")
    return f"{message} Nothing was saved; check the rows (another change may have been saved meanwhile)."


def _check_loinc(form: forms.ModelForm, name: str = "loinc_code") -> None:
    code = form.cleaned_data.get(name)
    if code:
        problem = loinc_problem(code.strip())
        if problem:
            form.add_error(name, problem)
        else:
            form.cleaned_data[name] = code.strip()


class _RefusalForm(forms.ModelForm):
    """A form that shows the database's refusal of the last attempt (see _SaveRefusalAsFormError)."""

    refusal: str | None = None

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
        if self.refusal:
            raise ValidationError(self.refusal)
        return data


class _SaveRefusalAsFormError(admin.ModelAdmin):
    """Runs the change form in a savepoint; when PostgreSQL refuses the save (an IntegrityError, e.g. the
    exclusion constraint after a concurrent change) everything is rolled back and the form is shown again
    with the refusal as its error."""

    def changeform_view(
        self,
        request: HttpRequest,
        object_id: str | None = None,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        try:
            with transaction.atomic():
                return super().changeform_view(request, object_id, form_url, extra_context)
        except IntegrityError as error:
            setattr(request, _REFUSED, _refusal(error))
            return super().changeform_view(request, object_id, form_url, extra_context)

    def get_form(self, request: HttpRequest, obj: Any = None, change: bool = False, **kwargs: Any) -> Any:
        form = super().get_form(request, obj, change, **kwargs)
        refusal = getattr(request, _REFUSED, None)
        return type(form.__name__, (form,), {"refusal": refusal}) if refusal else form


# --- Tests ------------------------------------------------------------------------------------------------


class LabTestForm(_RefusalForm):
    class Meta:
        model = LabTest
        fields = ["code", "name", "loinc_code", "kind", "specimen_type", "modality", "billable_service", "active"]

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
        _check_loinc(self)
        data["specimen_type"] = (data.get("specimen_type") or "").strip()
        kind, specimen, modality = data.get("kind"), data["specimen_type"], data.get("modality") or ""
        if kind == TestKind.LAB:
            if not specimen:
                self.add_error("specimen_type", "A lab test needs its specimen type (e.g. Serum).")
            if modality:
                self.add_error("modality", "A lab test has no imaging modality.")
        elif kind == TestKind.IMAGING:
            if not modality:
                self.add_error("modality", "An imaging test needs its modality (CT, MR, US, XR, ...).")
            if specimen:
                self.add_error("specimen_type", "An imaging test has no specimen type.")
        return data


class AnalyteForm(forms.ModelForm):
    class Meta:
        model = Analyte
        fields = [
            "position",
            "code",
            "loinc_code",
            "name",
            "unit",
            "value_type",
            "coded_values",
            "critical_low",
            "critical_high",
        ]

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
        _check_loinc(self)
        data["unit"] = unit = (data.get("unit") or "").strip()
        value_type, coded = data.get("value_type"), [v.strip() for v in data.get("coded_values") or [] if v.strip()]
        data["coded_values"] = coded
        low, high = data.get("critical_low"), data.get("critical_high")
        if unit and not UCUM_PATTERN.match(unit):
            self.add_error("unit", "A UCUM unit is printable ASCII without spaces, e.g. g/dL, 10*3/uL, mg/dL, %.")
        if value_type == ValueType.QUANTITY and not unit:
            self.add_error("unit", "A quantity needs its UCUM unit, e.g. g/dL.")
        if value_type == ValueType.CODED:
            if not coded:
                self.add_error("coded_values", "A coded analyte needs its values, e.g. A,B,AB,O.")
            elif len(set(coded)) != len(coded):
                self.add_error("coded_values", "Each value once.")
        elif coded:
            self.add_error("coded_values", "Only a coded analyte has coded values.")
        if value_type != ValueType.QUANTITY and (low is not None or high is not None):
            self.add_error("critical_low" if low is not None else "critical_high", "Only quantities have limits.")
        if low is not None and high is not None and low >= high:
            self.add_error("critical_high", "Must be above the critical low.")
        return data


class AnalyteFormSet(BaseInlineFormSet):
    def clean(self) -> None:
        super().clean()
        test = self.instance
        rows = [form for form in self.forms if form.cleaned_data and not form.cleaned_data.get("DELETE")]
        if getattr(test, "kind", None) == TestKind.IMAGING and rows:
            raise ValidationError("An imaging test has no analytes: its result is a text report.")


class AnalyteInline(admin.TabularInline):
    model = Analyte
    form = AnalyteForm
    formset = AnalyteFormSet
    extra = 0
    show_change_link = True  # the reference ranges are edited on the analyte's page


@admin.register(LabTest)
class LabTestAdmin(_SaveRefusalAsFormError):
    form = LabTestForm
    inlines = [AnalyteInline]
    list_display = ["code", "name", "loinc_code", "kind", "specimen_type", "modality", "billable_service", "active"]
    list_filter = ["kind", "modality", "active"]
    list_select_related = ["billable_service"]
    search_fields = ["code", "name", "loinc_code"]
    ordering = ["code"]
    autocomplete_fields = ["billable_service"]


# --- Analytes and their reference ranges ------------------------------------------------------------------


class AnalyteAdminForm(_RefusalForm, AnalyteForm):
    class Meta(AnalyteForm.Meta):
        fields = ["test", *AnalyteForm.Meta.fields]

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
        test = data.get("test")
        if test is not None and test.kind == TestKind.IMAGING:
            self.add_error("test", "An imaging test has no analytes: its result is a text report.")
        return data


def _band(form: forms.BaseForm) -> str:
    data = form.cleaned_data
    upper = data.get("age_max_days")
    return f"{data['sex']} {data['age_min_days']}-{'' if upper is None else upper} days"


def _overlap(first: dict[str, Any], second: dict[str, Any]) -> bool:
    """Whether the age bands [min, max) of two rows meet, an empty max being no upper limit."""
    first_max, second_max = first.get("age_max_days"), second.get("age_max_days")
    return (second_max is None or first["age_min_days"] < second_max) and (
        first_max is None or second["age_min_days"] < first_max
    )


class ReferenceRangeForm(forms.ModelForm):
    class Meta:
        model = ReferenceRange
        fields = ["sex", "age_min_days", "age_max_days", "low", "high"]

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
        low, high = data.get("low"), data.get("high")
        age_min, age_max = data.get("age_min_days"), data.get("age_max_days")
        if "low" in data and "high" in data and low is None and high is None:
            self.add_error("high", "Give a low limit, a high limit or both.")
        if low is not None and high is not None and low > high:
            self.add_error("high", "Must be at least the low limit.")
        if age_min is not None and age_max is not None and age_max <= age_min:
            self.add_error("age_max_days", "The age band is empty: the upper age (exclusive) must be above the lower.")
        return data

    def validate_constraints(self, exclude: Any = None) -> None:
        # The formset compares the rows with each other (and names them); the exclusion constraint's own
        # check against the saved rows would refuse moving two bands at once.
        return None


class ReferenceRangeFormSet(BaseInlineFormSet):
    def clean(self) -> None:
        super().clean()
        rows = [
            (number, form)
            for number, form in enumerate(self.forms, start=1)
            if form.is_valid() and form.cleaned_data and not form.cleaned_data.get("DELETE")
        ]
        if rows and getattr(self.instance, "value_type", None) != ValueType.QUANTITY:
            raise ValidationError("Only a quantity analyte has reference ranges.")
        problems = []
        for index, (number, form) in enumerate(rows):
            for other_number, other in rows[index + 1 :]:
                sexes = {form.cleaned_data["sex"], other.cleaned_data["sex"]}
                comparable = len(sexes) == 1 or RangeSex.ANY in sexes
                if comparable and _overlap(form.cleaned_data, other.cleaned_data):
                    problems.append(
                        f"Rows {number} and {other_number} overlap: {_band(form)} and {_band(other)} "
                        "(bands of one sex, or of any sex and either sex, must not share an age)."
                    )
        if problems:
            raise ValidationError(problems)


class ReferenceRangeInline(admin.TabularInline):
    model = ReferenceRange
    form = ReferenceRangeForm
    formset = ReferenceRangeFormSet
    extra = 0


@admin.register(Analyte)
class AnalyteAdmin(_SaveRefusalAsFormError):
    form = AnalyteAdminForm
    inlines = [ReferenceRangeInline]
    list_display = ["code", "name", "test", "loinc_code", "unit", "value_type", "critical_low", "critical_high"]
    list_filter = ["value_type", "test__kind"]
    list_select_related = ["test"]
    search_fields = ["code", "name", "loinc_code", "test__code", "test__name"]
    ordering = ["test__code", "position", "code"]


# --- Lab orders (read-only; changed by actions through the services) ----------------------------------------


class LabOrderItemInline(admin.TabularInline):
    """The order's items with the current version of each result (value, unit, flag, reference band,
    status) and how many versions it has; read-only."""

    model = LabOrderItem
    extra = 0
    can_delete = False
    fields = readonly_fields = ("position", "test", "accession_number", "status", "scheduled_at", "current_results")
    ordering = ["position", "id"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[LabOrderItem]:
        versions = LabResult.objects.select_related("analyte").order_by("analyte__position", "analyte__code", "version")
        return (
            super()
            .get_queryset(request)
            .select_related("test", "order__branch")
            .prefetch_related(Prefetch("results", queryset=versions))
        )

    @admin.display(description="current results")
    def current_results(self, item: LabOrderItem) -> str:
        if item.pk is None:
            return ""
        versions = list(item.results.all())  # prefetched, every version
        current = [result for result in versions if result.current]
        if not current:
            return "—"
        count: dict[Any, int] = {}
        for result in versions:
            count[result.analyte_id] = count.get(result.analyte_id, 0) + 1
        rows = format_html_join(
            "",
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>v{} of {}</td></tr>",
            (
                (
                    result.analyte.code if result.analyte is not None else "report",
                    result_value(result),
                    result.unit,
                    flag_html(result.flag),
                    result_limits(result),
                    result.status,
                    result.recorded_by or result.performer,  # who released it: the verifier of a final result
                    acknowledgement(result, item.order.branch.zone),
                    result.version,
                    count[result.analyte_id],
                )
                for result in current
            ),
        )
        return format_html(
            '<table class="lab-results"><thead><tr><th>analyte</th><th>value</th><th>unit</th><th>flag</th>'
            "<th>reference</th><th>status</th><th>recorded by</th><th>critical acknowledged</th><th>version</th></tr></thead>"
            "<tbody>{}</tbody></table>",
            rows,
        )

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class CriticalFilter(admin.SimpleListFilter):
    """`?critical=unacknowledged`: the orders with a current critical result nobody has acknowledged (what
    the dashboard links to)."""

    title = "critical results"
    parameter_name = "critical"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("unacknowledged", "unacknowledged")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[LabOrder]) -> QuerySet[LabOrder]:
        if self.value() == "unacknowledged":
            return orders_with_critical_unacknowledged(queryset)
        return queryset


@admin.register(LabOrder)
class LabOrderAdmin(PatientDataAuditMixin, NoDeleteAdminMixin, LabWorkplaceMixin, admin.ModelAdmin):
    """Read-only: orders are placed through the API; staff collect, cancel and verify with the actions."""

    list_display = ["order_number", "ordered_on", "branch", "patient", "priority", "status"]
    list_filter = ["status", "priority", "branch", CriticalFilter]
    list_select_related = ["branch", "patient"]
    search_fields = [
        "order_number",
        "items__accession_number",
        "patient__patient_id",
        "patient__first_name",
        "patient__last_name",
    ]
    show_full_result_count = False
    fields = readonly_fields = (
        *("order_number", "branch", "patient", "doctor", "appointment", "priority", "status", "clinical_notes"),
        *("invoice", "ordered_by", "created_at", "collected_at", "cancelled_at", "cancellation_reason"),
    )
    inlines = [LabOrderItemInline]
    actions = ["collect", "cancel", "verify_preliminary"]

    @admin.display(description="date", ordering="created_at")
    def ordered_on(self, order: LabOrder) -> Any:
        return timezone.localtime(order.created_at, order.branch.zone).date()

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # placed through the API (lab.services.lab_order_create) only

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # The order's page is read-only; the list page's actions (change permission) go through the services.
        return obj is None and super().has_change_permission(request, obj)

    def get_urls(self) -> list[URLPattern]:
        view = self.admin_site.admin_view
        return [
            path("<path:object_id>/report/", view(self.report_view), name="lab_laborder_report"),
            *self.workplace_urls(),
            *super().get_urls(),
        ]

    def change_view(
        self, request: HttpRequest, object_id: str, form_url: str = "", extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        key = unquote(object_id)
        tools = {
            "report_url": reverse("admin:lab_laborder_report", args=[key]),
            "worklist_url": reverse("admin:lab_laborder_worklist"),
            "results_url": reverse("admin:lab_laborder_results", args=[key])
            if request.user.has_perm("lab.add_labresult")
            else "",
        }
        return super().change_view(request, object_id, form_url, {**tools, **(extra_context or {})})

    def report_view(self, request: HttpRequest, object_id: str) -> HttpResponseBase:
        """The laboratory report as the API prints it, for the admin session (the API's PDF URL wants a
        token); audited as a page showing the order's patient."""
        clock = Clock()
        order = self.get_object(request, unquote(object_id))
        if order is None:
            raise Http404(f"No {self.opts.verbose_name} {object_id!r}.")
        if not self.has_view_permission(request, order):
            raise PermissionDenied
        back = reverse("admin:lab_laborder_change", args=[order.pk])
        try:
            response: HttpResponseBase = lab_report_response(lab_order_load(order.pk))
        except RenderError:
            logger.exception("Could not render the lab report of %s for %s", order.order_number, staff_actor(request))
            self.message_user(request, "The report could not be rendered; the error has been logged.", messages.ERROR)
            return HttpResponseRedirect(back)
        write_admin_audit(request, response, [order.patient_id], clock)
        return response

    def _apply(self, request: HttpRequest, queryset: QuerySet[LabOrder], change: Any) -> None:
        apply_to_each(self, request, queryset.select_related("branch", "patient").order_by("created_at", "id"), change)

    @admin.action(description="Collect the specimens of the selected orders", permissions=["change"])
    def collect(self, request: HttpRequest, queryset: QuerySet[LabOrder]) -> None:
        self._apply(request, queryset, lambda order: lab_services.lab_order_collect(order=order))

    @admin.action(
        description="Cancel the selected orders (only before a specimen is collected)", permissions=["change"]
    )
    def cancel(self, request: HttpRequest, queryset: QuerySet[LabOrder]) -> HttpResponse | None:
        reason = reason_confirmation(
            self,
            request,
            queryset.select_related("patient"),
            action="cancel",
            title="Cancel lab orders",
            intro="Cancel these lab orders? Only orders with nothing collected yet can be cancelled; the order "
            "and accession numbers are never reused.",
            submit_label="Cancel orders",
            describe=lambda o: f"{o} — {o.patient} ({o.get_status_display()})",
        )
        if not isinstance(reason, str):
            return reason
        self._apply(request, queryset, lambda order: lab_services.lab_order_cancel(order=order, reason=reason))
        return None

    @admin.action(
        description="Verify the preliminary results of the selected orders (as final)", permissions=["change"]
    )
    def verify_preliminary(self, request: HttpRequest, queryset: QuerySet[LabOrder]) -> TemplateResponse | None:
        user = staff_actor(request)
        confirmed = form_confirmation(
            self,
            request,
            queryset.order_by("created_at", "id"),
            form_class=forms.Form,  # nothing to fill in: the page is the confirmation
            action="verify_preliminary",
            title="Verify and release the preliminary results?",
            intro=f"Every current preliminary result of these orders becomes final and is released (a new version; "
            f"the preliminary one is kept), verified by {user}. An order with a critical value nobody has "
            "acknowledged is not released.",
            submit_label="Verify and release",
        )
        if isinstance(confirmed, TemplateResponse):
            return confirmed
        self._apply(request, queryset, lambda order: lab_review.lab_order_verify(order=order, verifier=user))
        return None


@admin.register(ImagingStation)
class ImagingStationAdmin(_SaveRefusalAsFormError):
    """The modality performing a branch's imaging tests of one modality: its AE title is the DICOM worklist's
    Scheduled Station AE Title of those items, and what a modality may query the worklist by."""

    class Form(_RefusalForm):
        class Meta:
            model = ImagingStation
            fields = ["branch", "modality", "ae_title", "name"]

    form = Form
    list_display = ["branch", "modality", "ae_title", "name"]
    list_filter = ["branch", "modality"]
    list_select_related = ["branch"]
    search_fields = ["ae_title", "name"]
