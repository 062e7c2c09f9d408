"""The pharmacy in the admin (docs/api-rules.md §14): the drug catalogue with reorder levels per branch inline;
batches, the stock ledger, prescriptions, dispenses and the controlled drug register read-only.

Stock changes only through the services: receipts and adjustments come through the API, and the batch list's
actions write off expired batches and transfer stock to another branch (pharmacy.services). Prescriptions
are cancelled by an action with a reason. The register of Schedule H1 and X dispenses is exported as CSV by an action on the
rows selected (filter them by branch and date first). Pages that show a patient are audited.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable
from datetime import timedelta
from typing import Any

from django import forms
from django.conf import settings
from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.utils import timezone

from clinic.admin_actions import apply_to_each, form_confirmation, reason_confirmation
from clinic.admin_audit import PatientDataAuditMixin, staff_actor
from clinic.admin_records import NoDeleteAdminMixin, ReadOnlyAdminMixin
from clinic.models import Branch
from pharmacy import services
from pharmacy.models import (
    MAX_QUANTITY,
    Batch,
    ControlledDrugEntry,
    Dispense,
    DispenseLine,
    Drug,
    Prescription,
    PrescriptionItem,
    ReorderLevel,
    StockMovement,
)
from pharmacy.representations import local_today


class ReorderLevelInline(admin.TabularInline):
    model = ReorderLevel

    extra = 0
    fields = ("branch", "level")

    def get_queryset(self, request: HttpRequest) -> QuerySet[ReorderLevel]:
        return super().get_queryset(request).select_related("drug", "branch")  # each row's label names both


@admin.register(Drug)
class DrugAdmin(admin.ModelAdmin):
    """The catalogue: its constraints (HSN digits, statutory GST rate, code format) are validated as form
    errors by Django's model validation before PostgreSQL would refuse them."""

    list_display = ["code", "generic_name", "brand_name", "form", "strength", "schedule", "gst_rate", "active"]
    list_filter = ["schedule", "form", "active"]
    search_fields = ["code", "generic_name", "brand_name"]
    inlines = [ReorderLevelInline]

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # deactivate instead: batches, prescriptions and dispenses point at it


class _ReadOnlyInline(admin.TabularInline):
    extra = 0
    can_delete = False

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class StockMovementInline(_ReadOnlyInline):
    model = StockMovement
    fields = readonly_fields = ("at", "kind", "quantity", "reason", "actor")
    ordering = ("at", "id")


class TransferForm(forms.Form):
    to_branch = forms.ModelChoiceField(queryset=Branch.objects.filter(is_active=True).order_by("code"))
    quantity = forms.IntegerField(min_value=1, max_value=MAX_QUANTITY, help_text="Units of each selected batch.")
    reason = forms.CharField(max_length=500, required=False, widget=forms.TextInput(attrs={"size": 60}))


class ExpiryStatusFilter(admin.SimpleListFilter):
    """Forward-looking, as a pharmacist asks: what has expired, what expires within
    PHARMACY_EXPIRY_WARNING_DAYS, what is in date (Django's date filter only looked backwards). Today is the
    service's (TIME_ZONE); the column says it per branch."""

    title = "expiry status"
    parameter_name = "expiry"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [
            ("expired", "Expired"),
            ("expiring", f"Expires within {settings.PHARMACY_EXPIRY_WARNING_DAYS} days"),
            ("in_date", "In date"),
        ]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Batch]) -> QuerySet[Batch] | None:
        today = timezone.localdate()
        warning_end = today + timedelta(days=settings.PHARMACY_EXPIRY_WARNING_DAYS)
        if self.value() == "expired":
            return queryset.filter(expiry_date__lte=today)
        if self.value() == "expiring":
            return queryset.filter(expiry_date__gt=today, expiry_date__lte=warning_end)
        if self.value() == "in_date":
            return queryset.filter(expiry_date__gt=warning_end)
        return queryset


@admin.register(Batch)
class BatchAdmin(NoDeleteAdminMixin, admin.ModelAdmin):
    """Read-only: stock arrives by receipts (API) and changes by the ledger; expired batches are written off
    with the action."""

    list_display = ["batch_number", "drug", "branch", "expiry_date", "quantity_on_hand", "mrp", "expired"]
    list_filter = ["branch", ExpiryStatusFilter]
    list_select_related = ["drug", "branch"]
    search_fields = ["batch_number", "drug__code", "drug__generic_name"]
    fields = readonly_fields = (
        *("drug", "branch", "batch_number", "expiry_date", "quantity_on_hand", "unit_cost", "mrp"),
        "received_at",
    )
    inlines = [StockMovementInline]
    actions = ["write_off_expired", "transfer"]

    @admin.display(description="expiry status", ordering="expiry_date")
    def expired(self, batch: Batch) -> str:
        # Words, not Django's boolean icons: a green tick next to an expired batch read as "fine".
        days = (batch.expiry_date - local_today(batch.branch.zone)).days
        if days <= 0:
            return "EXPIRED"
        if days <= settings.PHARMACY_EXPIRY_WARNING_DAYS:
            return f"expires in {days} day{'s' if days != 1 else ''}"
        return "in date"

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return obj is None and super().has_change_permission(request, obj)

    @admin.action(description="Write off the selected expired batches", permissions=["change"])
    def write_off_expired(self, request: HttpRequest, queryset: QuerySet[Batch]) -> None:
        actor = staff_actor(request)
        apply_to_each(
            self,
            request,
            queryset.select_related("drug", "branch").order_by("expiry_date", "id"),
            lambda batch: services.batch_write_off_expired(batch=batch, actor=actor),
        )

    @admin.action(description="Transfer units of the selected batches to another branch", permissions=["change"])
    def transfer(self, request: HttpRequest, queryset: QuerySet[Batch]) -> HttpResponse | None:
        confirmed = form_confirmation(
            self,
            request,
            queryset.select_related("drug", "branch"),
            form_class=TransferForm,
            action="transfer",
            title="Transfer stock",
            intro="Move units of these batches to another branch: a transfer_out here and a transfer_in into the "
            "batch of the same number and expiry there, in one transaction.",
            submit_label="Transfer",
            describe=lambda b: f"{b.drug.code} {b} at {b.branch.code}: {b.quantity_on_hand} on hand",
        )
        if isinstance(confirmed, TemplateResponse):
            return confirmed
        actor = staff_actor(request)
        apply_to_each(
            self,
            request,
            queryset.select_related("drug", "branch").order_by("id"),
            lambda batch: services.stock_transfer(
                batch=batch,
                to_branch=confirmed["to_branch"],
                quantity=confirmed["quantity"],
                actor=actor,
                reason=confirmed["reason"],
            ),
        )
        return None


@admin.register(StockMovement)
class StockMovementAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    """The append-only ledger (PostgreSQL refuses updates and deletes)."""

    list_display = ["at", "kind", "quantity", "batch", "branch", "actor", "reason"]
    list_filter = ["kind", "batch__branch"]
    list_select_related = ["batch__branch", "batch__drug"]
    search_fields = ["batch__batch_number", "batch__drug__code", "actor"]
    raw_id_fields = ["batch", "dispense_line", "return_line"]

    @admin.display(ordering="batch__branch__code")
    def branch(self, movement: StockMovement) -> Any:
        return movement.batch.branch


class PrescriptionItemInline(_ReadOnlyInline):
    model = PrescriptionItem

    fields = readonly_fields = (
        *("drug", "dose", "frequency", "route", "duration_days", "quantity", "dispensed_quantity"),
        "instructions",
    )

    def get_queryset(self, request: HttpRequest) -> QuerySet[PrescriptionItem]:
        return super().get_queryset(request).select_related("drug")  # each row is labelled with its drug


@admin.register(Prescription)
class PrescriptionAdmin(PatientDataAuditMixin, NoDeleteAdminMixin, admin.ModelAdmin):
    """Read-only: prescriptions are written through the API; staff cancel them with the action."""

    list_display = ["prescription_number", "branch", "patient", "doctor", "status", "created_at"]
    list_filter = ["status", "branch"]
    list_select_related = ["branch", "patient", "doctor"]
    search_fields = ["prescription_number", "patient__patient_id", "patient__first_name", "patient__last_name"]
    show_full_result_count = False
    fields = readonly_fields = (
        *("prescription_number", "branch", "patient", "doctor", "appointment", "status", "created_by"),
        *("created_at", "cancelled_at", "cancellation_reason"),
    )
    inlines = [PrescriptionItemInline]
    actions = ["cancel"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return obj is None and super().has_change_permission(request, obj)

    @admin.action(description="Cancel the selected prescriptions", permissions=["change"])
    def cancel(self, request: HttpRequest, queryset: QuerySet[Prescription]) -> HttpResponse | None:
        reason = reason_confirmation(
            self,
            request,
            queryset.select_related("patient"),
            action="cancel",
            title="Cancel prescriptions",
            intro="Cancel these prescriptions? Nothing more is dispensed against them; what was dispensed stays.",
            submit_label="Cancel prescriptions",
            describe=lambda p: f"{p} — {p.patient} ({p.get_status_display()})",
        )
        if not isinstance(reason, str):
            return reason
        apply_to_each(
            self,
            request,
            queryset.order_by("created_at", "id"),
            lambda prescription: services.prescription_cancel(prescription=prescription, reason=reason),
        )
        return None


class DispenseLineInline(_ReadOnlyInline):
    model = DispenseLine
    fields = readonly_fields = ("drug", "batch", "quantity", "returned_quantity", "unit_price", "prescription_item")

    def get_queryset(self, request: HttpRequest) -> QuerySet[DispenseLine]:
        return super().get_queryset(request).select_related("drug", "batch", "prescription_item__drug")


@admin.register(Dispense)
class DispenseAdmin(PatientDataAuditMixin, ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ["dispense_number", "branch", "patient", "prescription", "invoice", "created_at"]
    list_filter = ["branch"]
    list_select_related = ["branch", "patient", "prescription", "invoice"]
    search_fields = ["dispense_number", "patient__patient_id", "prescription__prescription_number"]
    show_full_result_count = False
    fields = readonly_fields = (
        *("dispense_number", "branch", "patient", "prescription", "invoice", "dispensed_by", "created_at"),
    )
    inlines = [DispenseLineInline]

    def patient_ids_of(self, obj: Any) -> Iterable[Any]:
        return [obj.patient_id] if obj.patient_id else []


REGISTER_COLUMNS = (
    ("date", "Date"),
    ("dispense_number", "Dispense"),
    ("patient", "Patient"),
    ("prescriber", "Prescriber"),
    ("prescription_number", "Prescription"),
    ("drug", "Drug"),
    ("schedule", "Schedule"),
    ("batch", "Batch"),
    ("quantity", "Quantity"),
)


def register_csv(entries: Iterable[ControlledDrugEntry]) -> HttpResponse:
    """The register rows as CSV: date, dispense and prescription numbers, patient (business id and name),
    prescriber, drug, schedule, batch (number and expiry) and quantity."""
    response = HttpResponse(content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="controlled-drug-register-{timezone.localdate()}.csv"'
    response["Cache-Control"] = "no-store"
    writer = csv.writer(response)
    writer.writerow(["Branch", *(title for _, title in REGISTER_COLUMNS)])
    for entry in entries:
        writer.writerow(
            [
                entry.branch.code,
                entry.date.isoformat(),
                entry.dispense_number,
                f"{entry.patient.patient_id} {entry.patient.name}",
                entry.prescriber.name,
                entry.prescription_number,
                f"{entry.drug.code} {entry.drug.display_name}",
                entry.schedule,
                f"{entry.batch.batch_number} (exp. {entry.batch.expiry_date:%Y-%m-%d})",
                entry.quantity,
            ]
        )
    return response


@admin.register(ControlledDrugEntry)
class ControlledDrugEntryAdmin(PatientDataAuditMixin, ReadOnlyAdminMixin, admin.ModelAdmin):
    """The Schedule H1 and X register, written by the dispense service; exported as CSV by the action."""

    list_display = ["date", "branch", "dispense_number", "patient", "prescriber", "drug", "batch", "quantity"]
    list_filter = ["branch", "schedule", "date"]
    date_hierarchy = "date"
    list_select_related = ["branch", "patient", "prescriber", "drug", "batch"]
    search_fields = ["dispense_number", "prescription_number", "patient__patient_id", "drug__code"]
    actions = ["export_csv"]

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # The list page's export action runs with the view permission; nothing is ever changed here.
        return False

    @admin.action(description="Export the selected entries as CSV", permissions=["view"])
    def export_csv(self, request: HttpRequest, queryset: QuerySet[ControlledDrugEntry]) -> HttpResponse:
        entries = queryset.select_related("branch", "patient", "prescriber", "drug", "batch").order_by(
            "branch__code", "date", "id"
        )
        return register_csv(entries)
