"""Staff enter clinical data here: diagnoses, allergies, medications, inpatient stays and visits."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.utils import unquote
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils import timezone

from clinic.admin_actions import apply_to_each, form_confirmation, reason_confirmation
from clinic.admin_audit import Clock, PatientDataAuditMixin, write_admin_audit
from clinic.admin_records import (
    ClinicalInlineMixin,
    ClinicalRecordAdminMixin,
    NoDeleteAdminMixin,
    NoDeleteInlineMixin,
    RecordHistoryAdminMixin,
    staff_actor,
)
from clinic.staff import StaffReader, staff_reader
from clinic.states import IndianState
from clinic.text import mask_phone
from patients import selectors, services
from patients.errors import DuplicatePatient
from patients.identifiers import normalise_aadhaar, normalise_phone
from patients.models import Allergy, Diagnosis, Insurance, Medication, Patient, Visit


class InsuranceInline(NoDeleteInlineMixin, admin.TabularInline):
    model = Insurance
    extra = 0


class DiagnosisInline(ClinicalInlineMixin, admin.TabularInline):
    model = Diagnosis
    extra = 0


class AllergyInline(ClinicalInlineMixin, admin.TabularInline):
    model = Allergy
    extra = 0


class MedicationInline(ClinicalInlineMixin, admin.TabularInline):
    model = Medication
    extra = 0


class VisitInline(ClinicalInlineMixin, admin.TabularInline):
    model = Visit
    extra = 0
    autocomplete_fields = ["doctor"]
    fields = ["type", "start", "end", "branch", "doctor", "department", "reason", "entered_in_error_marker"]
    ordering = ["-start"]


DISTINCT_PERSON_LABEL = "Yes, this is a different person (e.g. a twin)"


class PatientAdminForm(forms.ModelForm):
    national_id = forms.CharField(
        required=False,
        label="National ID (Aadhaar)",
        help_text="Leave empty to keep the stored one; it is never shown.",
    )
    # Hidden until the duplicate rule matches: then staff see the registrations it matched and confirm.
    distinct_person = forms.BooleanField(required=False, label="", widget=forms.HiddenInput)
    reader: StaffReader  # set per request by PatientAdmin.get_form

    class Meta:
        model = Patient
        fields = [
            "first_name", "last_name", "date_of_birth", "gender", "blood_group", "is_active", "phone", "email",
            "address_line1", "address_city", "address_state", "address_pincode", "registration_branch",
            "national_health_id",
        ]  # fmt: skip

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # A state stored before the closed list (that its migration could not map) is shown as it is, so that
        # saving another field does not silently blank it; the model's choices refuse it until staff pick one.
        legacy = self.instance.address_state
        field = self.fields.get("address_state")
        if isinstance(field, forms.ChoiceField) and legacy and legacy not in IndianState.values:
            field.choices = [
                ("", "---------"),
                (legacy, f"{legacy} (not a known state: choose one)"),
                *IndianState.choices,
            ]

    def clean_phone(self) -> str:
        try:
            return normalise_phone(self.cleaned_data["phone"])
        except ValueError as exc:
            raise forms.ValidationError(str(exc)) from None

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        phone, born = cleaned.get("phone"), cleaned.get("date_of_birth")
        # Compared with the stored values (clean() runs before the instance takes the form's): an edit that
        # keeps them (a twin's later edit) is not asked again.
        stored = (self.instance.phone, self.instance.date_of_birth)
        identity_changed = self.instance._state.adding or (phone, born) != stored
        if phone and born and cleaned.get("is_active", True) and identity_changed:
            self._check_duplicates(phone, born, confirmed=bool(cleaned.get("distinct_person")))
        return cleaned

    def _check_duplicates(self, phone: str, born: Any, *, confirmed: bool) -> None:
        """The duplicate rule as the API applies it, except that staff may confirm another person (twins)."""
        shown, elsewhere = selectors.patient_possible_duplicates(
            client=self.reader, phone=phone, date_of_birth=born, exclude_id=self.instance.pk
        )
        if not shown and not elsewhere:
            return
        self.fields["distinct_person"].widget = forms.CheckboxInput()
        self.fields["distinct_person"].label = self["distinct_person"].label = DISTINCT_PERSON_LABEL  # bound: cached
        if confirmed:
            return
        if shown:
            self.add_error("phone", f"{shown[0].patient_id} already has this phone number and date of birth.")
        else:
            self.add_error(
                "phone", "A patient with this phone number and date of birth is registered at another branch."
            )
        listed = "; ".join(
            f"{p.patient_id} {p.name}, born {p.date_of_birth:%d %b %Y}, registered at {p.registration_branch.code}"
            for p in shown
        )
        self.add_error(
            "distinct_person",
            (f"Possible duplicates: {listed}. " if listed else "")
            + "Open the existing record instead, or tick the box if this is a different person and save again.",
        )

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


class PatientMergeForm(forms.Form):
    target = forms.CharField(max_length=32, label="Surviving patient (patient_id, e.g. PAT-000123)")
    reason = forms.CharField(max_length=500, widget=forms.TextInput(attrs={"size": 60}))

    def clean_target(self) -> Patient:
        ref = self.cleaned_data["target"].strip()
        target = Patient.objects.filter(patient_id__iexact=ref).first()
        if target is None:
            raise forms.ValidationError(f"No patient {ref}.")
        return target


class FindForm(forms.Form):
    """The search box: a CharField refuses NUL characters (PostgreSQL cannot take them), as the API does."""

    q = forms.CharField(required=False, max_length=100)

    def clean_q(self) -> str:
        return " ".join(self.cleaned_data["q"].split())


FIND_MIN_CHARACTERS = 2  # as the API's `search`
FIND_LIMIT = 20  # the best candidates shown; the page says how many more matched


def _national_id(search_term: str) -> str | None:
    """The 12 digits of a national ID typed whole (spaces and dashes allowed), else None."""
    digits = search_term.replace(" ", "").replace("-", "")
    return digits if len(digits) == 12 and digits.isascii() and digits.isdigit() else None


@admin.register(Patient)
class PatientAdmin(PatientDataAuditMixin, NoDeleteAdminMixin, RecordHistoryAdminMixin, admin.ModelAdmin):
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
    readonly_fields = [
        "patient_id", "national_id_masked", "registered_at", "updated_at", "merged_into", "merged_at", "record_history"
    ]  # fmt: skip
    actions = ["deactivate", "merge"]
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
        ("History", {"fields": ["registered_at", "updated_at", "merged_into", "merged_at", "record_history"]}),
    ]

    def get_form(self, request: HttpRequest, obj: Any = None, change: bool = False, **kwargs: Any) -> Any:
        form = super().get_form(request, obj, change, **kwargs)
        return type(form.__name__, (form,), {"reader": staff_reader(request.user)})

    def get_fieldsets(self, request: HttpRequest, obj: Any = None) -> Any:
        fieldsets = []
        for name, options in super().get_fieldsets(request, obj):
            fields = list(options["fields"])
            if "phone" in fields:  # the confirmation of another person sits under the phone it concerns
                fields.insert(fields.index("phone") + 1, "distinct_person")
            fieldsets.append((name, {**options, "fields": fields}))
        return fieldsets

    def get_changeform_initial_data(self, request: HttpRequest) -> dict[str, Any]:
        """A staff member of one open branch registers there: it is preselected (the choices are their
        branches, as everywhere in the admin)."""
        initial = super().get_changeform_initial_data(request)
        branches = list(selectors.registration_branches(client=staff_reader(request.user))[:2])
        if len(branches) == 1:
            initial.setdefault("registration_branch", str(branches[0].pk))
        return initial

    # --- Find a patient: the API's search engine, ranked, with its cut-off ---------------------------------

    def get_urls(self) -> list[URLPattern]:
        return [
            path("find/", self.admin_site.admin_view(self.find_view), name="patients_patient_find"),
            *super().get_urls(),
        ]

    def changelist_view(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> HttpResponse:
        find = reverse("admin:patients_patient_find")
        # The list's search box alone is a patient search: the API's engine, ranked, on Find a patient (a
        # substring match over a million names read them all and missed "Manj Varma"). With a filter
        # chosen too, the list searches as Django's lists do.
        query = request.GET.get("q", "").strip()
        if query and set(request.GET) <= {"q"} and _national_id(query) is None:  # a national ID: by its hash
            return HttpResponseRedirect(f"{find}?{urlencode({'q': query})}")
        return super().changelist_view(request, {"find_url": find, **(extra_context or {})})

    def change_view(
        self, request: HttpRequest, object_id: str, form_url: str = "", extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        tools: dict[str, Any] = {}
        patient = self.get_object(request, unquote(object_id))
        if patient is not None and patient.is_active and request.user.has_perm("appointments.add_appointment"):
            tools["book_url"] = f"{reverse('admin:appointments_appointment_book')}?patient={patient.patient_id}"
        return super().change_view(request, object_id, form_url, {**tools, **(extra_context or {})})

    def find_view(self, request: HttpRequest) -> HttpResponse:
        """The best matches of the API's search engine among the staff member's patients, in its order and
        with its cut-off (a changelist would re-sort them); audited like every page showing patients."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        clock = Clock()
        search = FindForm(request.GET)
        query = search.cleaned_data["q"] if search.is_valid() else ""
        found: list[Patient] = []
        total = 0
        if len(query) >= FIND_MIN_CHARACTERS:
            found, total = selectors.patient_find(client=staff_reader(request.user), search=query, limit=FIND_LIMIT)
        today = timezone.localdate()
        can_book = request.user.has_perm("appointments.add_appointment")
        book = reverse("admin:appointments_appointment_book")
        rows = [
            {
                "patient": patient,
                "url": reverse("admin:patients_patient_change", args=[patient.pk]),
                "age_sex": f"{patient.age_on(today)} y · {patient.get_gender_display()}",
                "phone": mask_phone(patient.phone),
                "book_url": f"{book}?patient={patient.patient_id}" if can_book and patient.is_active else "",
            }
            for patient in found
        ]
        context = {
            **self.admin_site.each_context(request),
            "title": "Find a patient",
            "opts": self.opts,
            "query": query,
            "errors": search.errors.get("q", []),
            "too_short": 0 < len(query) < FIND_MIN_CHARACTERS,
            "rows": rows,
            "total": total,
            "cut_off": total > len(rows),
            "min_characters": FIND_MIN_CHARACTERS,
            "add_url": reverse("admin:patients_patient_add") if self.has_add_permission(request) else "",
        }
        response = TemplateResponse(request, "admin/patients/patient/find.html", context)
        write_admin_audit(request, response, [patient.pk for patient in found], clock)
        return response

    def get_search_results(self, request: HttpRequest, queryset: Any, search_term: str) -> tuple[Any, bool]:
        found, may_have_duplicates = super().get_search_results(request, queryset, search_term)
        # The national ID is stored encrypted: a whole 12-digit number is matched by its lookup hash.
        digits = _national_id(search_term)
        if digits is not None:
            found |= queryset.with_national_id(digits)
        return found, may_have_duplicates

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        # A merged record stays inactive: the database refuses reactivating it (patient_merge_consistent).
        merged = obj is not None and obj.merged_into_id is not None
        return [*super().get_readonly_fields(request, obj), *(["is_active"] if merged else [])]

    @admin.action(description="Deactivate the selected patients (never deleted)", permissions=["change"])
    def deactivate(self, request: HttpRequest, queryset: Any) -> Any:
        reason = reason_confirmation(
            self,
            request,
            queryset,
            action="deactivate",
            title="Deactivate patients",
            intro="Deactivate these patients? Their records stay, readable with their history; an inactive "
            "registration is no longer a duplicate of a new one. Patients are never deleted.",
            submit_label="Deactivate",
        )
        if not isinstance(reason, str):
            return reason
        by = staff_actor(request)
        apply_to_each(self, request, queryset, lambda p: services.patient_deactivate(patient=p, by=by, reason=reason))
        return None

    @admin.action(description="Merge the selected duplicate patients into another record", permissions=["change"])
    def merge(self, request: HttpRequest, queryset: Any) -> Any:
        confirmed = form_confirmation(
            self,
            request,
            queryset,
            form_class=PatientMergeForm,
            action="merge",
            title="Merge patients",
            intro="Merge these duplicate registrations into the record that survives? They keep their records, "
            "are deactivated and point at it; its profile includes their clinical records, and the API "
            "resolves their ids to it.",
            submit_label="Merge",
        )
        if not isinstance(confirmed, dict):
            return confirmed
        by, target, reason = staff_actor(request), confirmed["target"], confirmed["reason"]
        apply_to_each(
            self,
            request,
            queryset,
            lambda p: services.patient_merge(source=p, target=target, by=by, reason=reason),
        )
        return None

    def patient_ids_of(self, obj: Patient) -> list[Any]:
        return [obj.pk]  # every page of a patient is audited (PatientDataAuditMixin)

    @admin.display(description="national ID")
    def national_id_masked(self, obj: Patient) -> str:
        return obj.national_id_masked or "-"

    def changeform_view(
        self, request: HttpRequest, object_id: str | None = None, form_url: str = "", extra_context: Any = None
    ) -> HttpResponse:
        """A registration that loses the race to another of the same person (both checked the form before
        either saved) is refused by the service under its lock: the page's transaction is rolled back and the
        form comes again with the reason, not a 500 (docs/staff.md §4)."""
        try:
            return super().changeform_view(request, object_id, form_url, extra_context)
        except DuplicatePatient as refusal:
            messages.error(request, f"{refusal.detail} Nothing was saved: find the patient, or confirm a twin.")
            return HttpResponseRedirect(request.get_full_path())

    def save_model(self, request: HttpRequest, obj: Patient, form: Any, change: bool) -> None:
        """Registration and edits go through the services (duplicate rule under its lock, patient_id from
        the sequence, national ID encrypted); the form's object then becomes the saved row, so the
        inlines attach to it. The patient event waits for the inlines (save_related)."""
        data = form.service_data()
        confirmed = bool(form.cleaned_data.get("distinct_person"))
        if change:
            saved = services.patient_update(
                patient=obj,
                data={**data, "branch": obj.registration_branch},
                publish=False,
                distinct_person_confirmed=confirmed,
            )
        else:
            saved = services.patient_create(
                branch=obj.registration_branch, data=data, publish=False, distinct_person_confirmed=confirmed
            )
        obj.pk = saved.pk
        obj._state.adding = False
        obj.refresh_from_db()

    def save_related(self, request: HttpRequest, form: Any, formsets: Any, change: bool) -> None:
        """After the inlines, in the page's transaction: `patient.registered` for a registration, and
        `patient.updated` when the patient's own fields or its insurance rows changed (the record; the
        clinical inlines publish no patient event), carrying the profile with the inlines saved."""
        super().save_related(request, form, formsets, change)
        insurance_changed = any(formset.has_changed() for formset in formsets if formset.model is Insurance)
        if not change or form.has_changed() or insurance_changed:
            services.patient_saved_publish(patient=form.instance, registered=not change)


@admin.register(Visit)
class VisitAdmin(PatientDataAuditMixin, ClinicalRecordAdminMixin, admin.ModelAdmin):
    list_display = ["patient", "type", "start", "end", "branch", "doctor", "department", "entered_in_error_flag"]
    list_filter = ["type", "branch", "department", "entered_in_error"]
    list_select_related = ["patient", "branch", "doctor", "department"]
    search_fields = ["patient__patient_id", "patient__last_name", "doctor__name", "reason"]
    raw_id_fields = ["patient"]
    autocomplete_fields = ["doctor"]
    date_hierarchy = "start"


class ClinicalRowAdmin(PatientDataAuditMixin, ClinicalRecordAdminMixin, admin.ModelAdmin):
    """Diagnoses, allergies and medications on their own pages: where staff mark one entered in error
    (action) and read its history; they are entered on the patient's page."""

    list_filter = ["entered_in_error"]
    list_select_related = ["patient"]
    raw_id_fields = ["patient"]
    search_fields = ["patient__patient_id", "patient__last_name"]

    def patient_ids_of(self, obj: Any) -> list[Any]:
        return [obj.patient_id]


@admin.register(Diagnosis)
class DiagnosisAdmin(ClinicalRowAdmin):
    list_display = ["patient", "code", "description", "onset_date", "status", "entered_in_error_flag"]
    list_filter = ["status", "entered_in_error"]
    search_fields = [*ClinicalRowAdmin.search_fields, "code", "description"]


@admin.register(Allergy)
class AllergyAdmin(ClinicalRowAdmin):
    list_display = ["patient", "substance", "reaction", "severity", "entered_in_error_flag"]
    list_filter = ["severity", "entered_in_error"]
    search_fields = [*ClinicalRowAdmin.search_fields, "substance"]


@admin.register(Medication)
class MedicationAdmin(ClinicalRowAdmin):
    list_display = ["patient", "name", "dosage", "frequency", "start_date", "end_date", "entered_in_error_flag"]
    search_fields = [*ClinicalRowAdmin.search_fields, "name"]
