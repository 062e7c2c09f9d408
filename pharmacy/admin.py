"""The pharmacy in the admin (docs/api-rules.md §14): the drug catalogue with reorder levels per branch inline;
batches, the stock ledger, prescriptions, dispenses and the controlled drug register read-only.

Stock changes only through the services (the same the API calls): the batch list's "Receive stock" page
(stock_receive), its actions writing off expired batches and transferring stock to another branch; a
prescription's "Dispense" page shows each item's first-expiry-first-out batches and dispenses
(dispense_record); a dispense's "Return drugs" page takes units back (dispense_return). Prescriptions are
cancelled by an action with a reason. The reorder level list filters the drugs below their level; the
register of Schedule H1 and X dispenses shows the balance after each line and is exported as CSV by an
action on the rows selected (filter them by branch and date first). Pages that show a patient are audited.

The custom pages check a real permission (403 otherwise) and read through the staff member's reader
(clinic.staff.staff_reader), so another branch's prescription or dispense is "not found" (404).
"""

from __future__ import annotations

import csv
from collections.abc import Iterable
from typing import Any

from django import forms
from django.conf import settings
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBase, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils import timezone

from clinic.admin_actions import apply_to_each, form_confirmation, reason_confirmation
from clinic.admin_audit import Clock, PatientDataAuditMixin, staff_actor, write_admin_audit
from clinic.admin_records import NoDeleteAdminMixin, ReadOnlyAdminMixin
from clinic.errors import DomainError, NotFound
from clinic.models import Branch
from clinic.staff import staff_reader
from pharmacy import selectors, services
from pharmacy.admin_forms import DispensePage, ReceiveStockForm, ReturnPage
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


# The permissions of the pharmacist's pages (clinic.roles gives them to the pharmacist).
RECEIVE = "pharmacy.add_batch"
DISPENSE = "pharmacy.add_dispense"
RETURN = "pharmacy.add_dispensereturn"


def _require(request: HttpRequest, permission: str) -> None:
    if not request.user.has_perm(permission):
        raise PermissionDenied


class ExpiryStatusFilter(admin.SimpleListFilter):
    """Forward-looking, as a pharmacist asks: what has expired, what expires within
    PHARMACY_EXPIRY_WARNING_DAYS, what is in date (Django's date filter only looked backwards). Today is each
    batch's branch's, as in the column (pharmacy.selectors.batches_by_expiry, which the dashboard counts with)."""

    title = "expiry status"
    parameter_name = "expiry"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [
            ("expired", "Expired"),
            ("expiring", f"Expires within {settings.PHARMACY_EXPIRY_WARNING_DAYS} days"),
            ("in_date", "In date"),
        ]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Batch]) -> QuerySet[Batch] | None:
        value = self.value()
        return selectors.batches_by_expiry(queryset, value) if value else queryset


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
        return False  # Django's add form would make a batch out of the ledger: "Receive stock" instead

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return obj is None and super().has_change_permission(request, obj)

    def get_urls(self) -> list[URLPattern]:
        receive = self.admin_site.admin_view(self.receive_view)
        return [path("receive/", receive, name="pharmacy_batch_receive"), *super().get_urls()]

    def changelist_view(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> HttpResponse:
        tools = {"receive_url": reverse("admin:pharmacy_batch_receive")} if request.user.has_perm(RECEIVE) else {}
        return super().changelist_view(request, {**tools, **(extra_context or {})})

    def receive_view(self, request: HttpRequest) -> HttpResponseBase:
        """Receive stock (GET the form, POST it): stock_receive, as POST /api/v1/pharmacy/stock/receipts; a
        refusal is shown on the field it names and nothing is written."""
        _require(request, RECEIVE)
        branches = selectors.receiving_branches(client=staff_reader(request.user))
        form = ReceiveStockForm(request.POST if request.method == "POST" else None, branches=branches)
        if request.method == "POST" and form.is_valid():
            data = form.cleaned_data
            try:
                movement = services.stock_receive(
                    branch=data["branch"],
                    drug=data["drug"],
                    batch_number=data["batch_number"],
                    expiry_date=data["expiry_date"],
                    quantity=data["quantity"],
                    unit_cost=data["unit_cost"],
                    mrp=data["mrp"],
                    actor=staff_actor(request),
                )
            except DomainError as exc:
                form.add_service_error(exc)
            else:
                batch = movement.batch
                self.message_user(
                    request,
                    f"Received {movement.quantity} units of {data['drug'].code} batch {batch.batch_number} at "
                    f"{data['branch'].code}: {batch.quantity_on_hand} on hand.",
                    messages.SUCCESS,
                )
                return HttpResponseRedirect(reverse("admin:pharmacy_batch_change", args=[batch.pk]))
        context = {
            **self.admin_site.each_context(request),
            "title": "Receive stock",
            "opts": self.opts,
            "form": form,
            "back_url": reverse("admin:pharmacy_batch_changelist"),
        }
        return TemplateResponse(request, "admin/pharmacy/batch/receive.html", context)

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
    ordering = ["-at", "-id"]  # the latest first (index stockmovement_at_order)

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

    def get_urls(self) -> list[URLPattern]:
        dispense = self.admin_site.admin_view(self.dispense_view)
        return [
            path("<path:object_id>/dispense/", dispense, name="pharmacy_prescription_dispense"),
            *super().get_urls(),
        ]

    def change_view(
        self, request: HttpRequest, object_id: str, form_url: str = "", extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        tools = {}
        if request.user.has_perm(DISPENSE):
            tools["dispense_url"] = reverse("admin:pharmacy_prescription_dispense", args=[object_id])
        return super().change_view(request, object_id, form_url, {**tools, **(extra_context or {})})

    def dispense_view(self, request: HttpRequest, object_id: str) -> HttpResponseBase:
        """Dispense against the prescription: each item with the batches first expiry first out would take
        (pharmacy.selectors.dispense_suggestions) and its quantity to accept or change; POST dispenses through
        dispense_record, which draws from the batches in the same order. A refusal (stock gone meanwhile, more
        than remains) is shown on the page and nothing is written. Audited: the page shows the patient."""
        clock = Clock()
        _require(request, DISPENSE)
        prescription = _found(selectors.prescription_get, request, object_id)
        page = DispensePage(
            selectors.dispense_suggestions(prescription=prescription),
            request.POST if request.method == "POST" else None,
        )
        if request.method == "POST" and page.is_valid():
            try:
                dispense = services.dispense_record(
                    branch=prescription.branch,
                    items=page.items(),
                    prescription=prescription,
                    bill=page.bill,
                    dispensed_by=staff_actor(request),
                )
            except DomainError as exc:
                page.add_service_error(exc)
            else:
                handed = ", ".join(
                    f"{line.quantity} {line.drug.code} from batch {line.batch.batch_number}"
                    for line in dispense.lines.all()
                )
                self.message_user(request, f"Dispensed {dispense.dispense_number}: {handed}.", messages.SUCCESS)
                redirect = HttpResponseRedirect(reverse("admin:pharmacy_dispense_change", args=[dispense.pk]))
                write_admin_audit(request, redirect, [prescription.patient_id], clock)
                return redirect
        context = {
            **self.admin_site.each_context(request),
            "title": f"Dispense {prescription.prescription_number}",
            "opts": self.opts,
            "original": prescription,
            "prescription": prescription,
            "page": page,
            "back_url": reverse("admin:pharmacy_prescription_change", args=[prescription.pk]),
        }
        response = TemplateResponse(request, "admin/pharmacy/prescription/dispense.html", context)
        write_admin_audit(request, response, [prescription.patient_id], clock)
        return response

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

    def get_urls(self) -> list[URLPattern]:
        take_back = self.admin_site.admin_view(self.return_view)
        return [path("<path:object_id>/return/", take_back, name="pharmacy_dispense_return"), *super().get_urls()]

    def change_view(
        self, request: HttpRequest, object_id: str, form_url: str = "", extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        tools = {}
        if request.user.has_perm(RETURN):
            tools["return_url"] = reverse("admin:pharmacy_dispense_return", args=[object_id])
        return super().change_view(request, object_id, form_url, {**tools, **(extra_context or {})})

    def return_view(self, request: HttpRequest, object_id: str) -> HttpResponseBase:
        """Take dispensed units back: a quantity per line and a reason, through dispense_return (each unit
        into the batch its line came from; a prescription's remaining quantity grows again). A refusal is
        shown beside the line it names and nothing is written. Audited when the dispense has a patient."""
        clock = Clock()
        _require(request, RETURN)
        dispense = _found(selectors.dispense_get, request, object_id)
        lines = list(dispense.lines.all())
        page = ReturnPage(lines, request.POST if request.method == "POST" else None)
        patients = [dispense.patient_id] if dispense.patient_id else []
        if request.method == "POST" and page.is_valid():
            items = page.items()
            try:
                services.dispense_return(
                    dispense=dispense,
                    items=items,
                    reason=page.reason.cleaned_data["reason"],
                    returned_by=staff_actor(request),
                )
            except DomainError as exc:
                page.add_service_error(exc)
            else:
                units = sum(item.quantity for item in items)
                self.message_user(
                    request, f"{units} unit{'' if units == 1 else 's'} returned to stock.", messages.SUCCESS
                )
                redirect = HttpResponseRedirect(reverse("admin:pharmacy_dispense_change", args=[dispense.pk]))
                write_admin_audit(request, redirect, patients, clock)
                return redirect
        context = {
            **self.admin_site.each_context(request),
            "title": f"Return drugs of {dispense.dispense_number}",
            "opts": self.opts,
            "original": dispense,
            "dispense": dispense,
            "page": page,
            "back_url": reverse("admin:pharmacy_dispense_change", args=[dispense.pk]),
        }
        response = TemplateResponse(request, "admin/pharmacy/dispense/return.html", context)
        write_admin_audit(request, response, patients, clock)
        return response


def _found(selector: Any, request: HttpRequest, object_id: str) -> Any:
    """The row through the API's selector with the staff member's reader: another branch's is not found."""
    try:
        return selector(client=staff_reader(request.user), ref=object_id)
    except NotFound as exc:
        raise Http404(exc.detail) from None


class StockStatusFilter(admin.SimpleListFilter):
    """Below the reorder level or not, counting non-expired stock at the level's branch (as the stock list's
    below_reorder filter and the stock.below_reorder event do)."""

    title = "stock"
    parameter_name = "stock"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("below", "Below the reorder level"), ("enough", "At or above the reorder level")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[ReorderLevel]) -> QuerySet[ReorderLevel] | None:
        if self.value() == "below":
            return selectors.levels_below_reorder(queryset)
        if self.value() == "enough":
            return queryset.exclude(pk__in=selectors.levels_below_reorder(queryset).values("pk"))
        return queryset


@admin.register(ReorderLevel)
class ReorderLevelAdmin(admin.ModelAdmin):
    """Reorder levels per drug and branch with the stock on hand beside each: the low-stock list a pharmacist
    reorders from (the dashboard links to it filtered: pharmacy.selectors.below_reorder_url)."""

    list_display = ["drug", "branch", "level", "on_hand", "stock_status"]
    list_filter = [StockStatusFilter, "branch"]
    list_select_related = ["drug", "branch"]
    search_fields = ["drug__code", "drug__generic_name", "drug__brand_name"]
    ordering = ["drug__code", "branch__code", "id"]
    fields = ["drug", "branch", "level"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[ReorderLevel]:
        return selectors.reorder_levels_with_stock(super().get_queryset(request))

    @admin.display(description="on hand (in date)", ordering="on_hand")
    def on_hand(self, level: Any) -> int:
        return int(level.on_hand)

    @admin.display(description="stock")
    def stock_status(self, level: Any) -> str:
        return "BELOW reorder level" if level.on_hand < level.level else "enough"


REGISTER_COLUMNS = (
    ("date", "Date"),
    ("time", "Time"),
    ("dispense_number", "Dispense"),
    ("patient", "Patient"),
    ("prescriber", "Prescriber"),
    ("prescription_number", "Prescription"),
    ("drug", "Drug"),
    ("schedule", "Schedule"),
    ("batch", "Batch"),
    ("quantity", "Quantity"),
    ("balance", "Balance"),
)


def _local_time(entry: ControlledDrugEntry) -> str:
    return f"{timezone.localtime(entry.dispense.created_at, entry.branch.zone):%H:%M}"


def register_csv(entries: Iterable[Any]) -> HttpResponse:
    """The register rows as CSV: date and time at the branch, dispense and prescription numbers, patient
    (business id and name), prescriber, drug, schedule, batch (number and expiry), quantity, and the balance
    of the drug at the branch after the line (pharmacy.selectors.register_with_balance)."""
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
                _local_time(entry),
                entry.dispense_number,
                f"{entry.patient.patient_id} {entry.patient.name}",
                entry.prescriber.name,
                entry.prescription_number,
                f"{entry.drug.code} {entry.drug.display_name}",
                entry.schedule,
                f"{entry.batch.batch_number} (exp. {entry.batch.expiry_date:%Y-%m-%d})",
                entry.quantity,
                entry.balance,
            ]
        )
    return response


@admin.register(ControlledDrugEntry)
class ControlledDrugEntryAdmin(PatientDataAuditMixin, ReadOnlyAdminMixin, admin.ModelAdmin):
    """The Schedule H1 and X register, written by the dispense service; exported as CSV by the action. Date
    and time are the branch's; the balance is the drug's units at the branch after the line."""

    list_display = [
        *("date", "time", "drug", "batch", "patient", "prescriber", "quantity", "balance"),
        *("dispense_number", "branch"),
    ]
    list_filter = ["branch", "schedule", "date"]
    date_hierarchy = "date"
    ordering = ["-date", "-id"]  # the latest first, as the pharmacist checks the day's entries
    list_select_related = ["branch", "patient", "prescriber", "drug", "batch", "dispense"]
    search_fields = ["dispense_number", "prescription_number", "patient__patient_id", "drug__code"]
    actions = ["export_csv"]

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # The list page's export action runs with the view permission; nothing is ever changed here.
        return False

    def get_queryset(self, request: HttpRequest) -> QuerySet[ControlledDrugEntry]:
        return selectors.register_with_balance(super().get_queryset(request))

    @admin.display(description="time")
    def time(self, entry: ControlledDrugEntry) -> str:
        return _local_time(entry)

    @admin.display(description="balance after")
    def balance(self, entry: Any) -> int:
        return int(entry.balance)

    @admin.action(description="Export the selected entries as CSV", permissions=["view"])
    def export_csv(self, request: HttpRequest, queryset: QuerySet[ControlledDrugEntry]) -> HttpResponse:
        entries = queryset.select_related("branch", "patient", "prescriber", "drug", "batch", "dispense").order_by(
            "branch__code", "date", "id"
        )
        return register_csv(entries)
