"""Staff enter clinical data here: diagnoses, allergies, medications, inpatient stays and visits."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.http import HttpRequest

from patients import services
from patients.identifiers import normalise_aadhaar, normalise_phone
from patients.models import Allergy, Diagnosis, Insurance, Medication, Patient, Visit


class InsuranceInline(admin.TabularInline):
    model = Insurance
    extra = 0


class DiagnosisInline(admin.TabularInline):
    model = Diagnosis
    extra = 0


class AllergyInline(admin.TabularInline):
    model = Allergy
    extra = 0


class MedicationInline(admin.TabularInline):
    model = Medication
    extra = 0


class VisitInline(admin.TabularInline):
    model = Visit
    extra = 0
    autocomplete_fields = ["doctor"]
    fields = ["type", "start", "end", "branch", "doctor", "department", "reason"]
    ordering = ["-start"]


class PatientAdminForm(forms.ModelForm):
    national_id = forms.CharField(
        required=False,
        label="National ID (Aadhaar)",
        help_text="Leave empty to keep the stored one; it is never shown.",
    )

    class Meta:
        model = Patient
        fields = [
            "first_name", "last_name", "date_of_birth", "gender", "blood_group", "is_active", "phone", "email",
            "address_line1", "address_city", "address_state", "address_pincode", "registration_branch",
            "national_health_id",
        ]  # fmt: skip

    def clean_phone(self) -> str:
        try:
            return normalise_phone(self.cleaned_data["phone"])
        except ValueError as exc:
            raise forms.ValidationError(str(exc)) from None

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        phone, born = cleaned.get("phone"), cleaned.get("date_of_birth")
        if phone and born and cleaned.get("is_active", True):
            match = services.patient_duplicate_find(phone=phone, date_of_birth=born, exclude_id=self.instance.pk)
            if match is not None:
                self.add_error("phone", f"{match.patient_id} already has this phone number and date of birth.")
        return cleaned

    def service_data(self) -> dict[str, Any]:
        """The cleaned form in the shape patient_create / patient_update take."""
        cleaned = self.cleaned_data
        data: dict[str, Any] = {field: cleaned[field] for field in services.COLUMN_FIELDS if field in cleaned}
        data["address"] = {key: cleaned.get(column) or "" for key, column in services.ADDRESS_FIELDS.items()}
        if cleaned.get("national_id"):  # empty keeps the stored one
            data["national_id"] = cleaned["national_id"]
        return data

    def clean_national_id(self) -> str:
        value = self.cleaned_data.get("national_id") or ""
        if not value:
            return ""
        try:
            return normalise_aadhaar(value)
        except ValueError as exc:
            raise forms.ValidationError(str(exc)) from None


@admin.register(Patient)
class PatientAdmin(admin.ModelAdmin):
    form = PatientAdminForm
    list_display = [
        "patient_id",
        "first_name",
        "last_name",
        "phone",
        "date_of_birth",
        "registration_branch",
        "registered_at",
    ]
    list_filter = ["registration_branch", "gender", "is_active"]
    list_select_related = ["registration_branch"]
    search_fields = ["patient_id", "first_name", "last_name", "phone", "national_health_id"]
    readonly_fields = ["patient_id", "national_id_masked", "registered_at", "updated_at"]
    inlines = [InsuranceInline, DiagnosisInline, AllergyInline, MedicationInline, VisitInline]
    show_full_result_count = False
    fieldsets = [
        (
            None,
            {
                "fields": [
                    "patient_id",
                    "first_name",
                    "last_name",
                    "date_of_birth",
                    "gender",
                    "blood_group",
                    "is_active",
                ]
            },
        ),
        (
            "Contact",
            {"fields": ["phone", "email", "address_line1", "address_city", "address_state", "address_pincode"]},
        ),
        ("Identifiers", {"fields": ["registration_branch", "national_health_id", "national_id", "national_id_masked"]}),
        ("History", {"fields": ["registered_at", "updated_at"]}),
    ]

    @admin.display(description="national ID")
    def national_id_masked(self, obj: Patient) -> str:
        return obj.national_id_masked or "-"

    def save_model(self, request: HttpRequest, obj: Patient, form: Any, change: bool) -> None:
        """Registration and edits go through the services (duplicate rule under its lock, patient_id from
        the sequence, national ID encrypted); the form's object then becomes the saved row, so the
        inlines attach to it."""
        data = form.service_data()
        if change:
            saved = services.patient_update(patient=obj, data={**data, "branch": obj.registration_branch})
        else:
            saved = services.patient_create(branch=obj.registration_branch, data=data)
        obj.pk = saved.pk
        obj._state.adding = False
        obj.refresh_from_db()


@admin.register(Visit)
class VisitAdmin(admin.ModelAdmin):
    list_display = ["patient", "type", "start", "end", "branch", "doctor", "department"]
    list_filter = ["type", "branch", "department"]
    list_select_related = ["patient", "branch", "doctor", "department"]
    search_fields = ["patient__patient_id", "patient__last_name", "doctor__name", "reason"]
    raw_id_fields = ["patient"]
    autocomplete_fields = ["doctor"]
    date_hierarchy = "start"
