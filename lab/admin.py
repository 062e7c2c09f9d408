"""The lab and imaging catalogue in the admin (CONTRACT section 14): tests with their analytes inline, and
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

A refusal by the database itself (another change saved meanwhile) is shown as a form error too."""

from __future__ import annotations

import re
from typing import Any

from django import forms
from django.contrib import admin
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.forms.models import BaseInlineFormSet
from django.http import HttpRequest, HttpResponse

from lab.loinc import loinc_problem
from lab.models import Analyte, LabTest, RangeSex, ReferenceRange, TestKind, ValueType

# A plausible UCUM unit: printable ASCII without spaces (g/dL, 10*3/uL, mg/dL, %, [iU]/L). Not a parser.
UCUM_PATTERN = re.compile(r"^[!-~]+$")

# Set on the request when the database refused a save: the re-run of the form shows it as a form error.
_REFUSED = "_lab_catalogue_refused"

CONSTRAINT_MESSAGES = {
    "referencerange_no_overlap_per_sex": "Two reference ranges of this analyte for the same sex overlap.",
    "analyte_code_unique_per_test": "Two analytes of this test have the same code.",
    "labtest_code_key": "A test with this code already exists.",
}


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
