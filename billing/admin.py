"""Billing in the admin: the service catalogue; invoices edited as drafts with inline line items, finalized
and cancelled by actions, paid through an add-only payment inline. Every change goes through
billing.services (totals, numbering, row locks); payments and finalized invoices are read-only."""

from __future__ import annotations

from typing import Any, cast

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.forms.models import BaseInlineFormSet
from django.http import HttpRequest, HttpResponse
from django.utils import timezone

from billing import services, tax
from billing.models import BillableService, Invoice, InvoiceNumberCounter, LineItem, Payment
from clinic.admin_actions import apply_to_each, reason_confirmation
from clinic.admin_audit import PatientDataAuditMixin
from clinic.admin_records import NoDeleteAdminMixin, NoDeleteInlineMixin
from clinic.errors import DomainError, FieldError


def _staff(request: HttpRequest) -> str:
    return f"staff:{request.user.get_username()}"


def _branch_today(invoice: Invoice | None) -> Any:
    zone = invoice.branch.zone if invoice is not None and invoice.branch_id else timezone.get_current_timezone()
    return timezone.localtime(timezone.now(), zone).date()


@admin.register(BillableService)
class BillableServiceAdmin(admin.ModelAdmin):
    list_display = ["code", "name", "department", "rate", "tax_rate", "active"]
    list_filter = ["active", "department", "tax_rate"]
    list_select_related = ["department"]
    search_fields = ["code", "name"]
    ordering = ["code"]


class LineItemForm(forms.ModelForm):
    """A line as staff enter it: choosing a catalogue service fills name, department, rate and tax rate
    left empty; without one they are required. The computed figures come from billing.services."""

    class Meta:
        model = LineItem
        fields = ["service", "service_name", "department", "quantity", "rate", "discount", "tax_rate"]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for name in ("service_name", "department", "rate", "tax_rate"):
            if name in self.fields:  # absent when the inline is read-only
                self.fields[name].required = False
        if self.instance._state.adding:
            # A new row must not show the model's default tax rate (0): a filled-in 0 would win over the
            # catalogue service's rate, billing a taxable service without tax. Left empty, it is taken from
            # the service, or required when there is none.
            self.initial.pop("tax_rate", None)
            if "tax_rate" in self.fields:
                self.fields["tax_rate"].initial = None

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
        service: BillableService | None = data.get("service")
        for name in ("service_name", "department", "rate", "tax_rate"):
            if data.get(name) not in (None, ""):
                continue
            if service is not None:
                data[name] = getattr(service, name if name != "service_name" else "name")
            elif name not in self.errors:
                self.add_error(name, "Required without a catalogue service.")
        if service is not None and not service.active and "service" in self.changed_data:
            self.add_error("service", "This catalogue service is no longer active.")
        quantity, rate, discount = data.get("quantity"), data.get("rate"), data.get("discount")
        if quantity is not None and rate is not None and discount is not None:
            gross = tax.round_money(quantity * rate)
            if discount > gross:
                self.add_error("discount", f"The discount exceeds quantity x rate ({gross}).")
        return data

    def line_input(self) -> services.LineInput:
        data = self.cleaned_data
        return services.LineInput(
            service=data.get("service"),
            service_name=data["service_name"],
            department=data["department"],
            quantity=data["quantity"],
            rate=data["rate"],
            discount=data["discount"],
            tax_rate=data["tax_rate"],
        )


LINE_FIELDS = [
    "service",
    "service_name",
    "department",
    "quantity",
    "rate",
    "discount",
    "tax_rate",
    "taxable_amount",
    "cgst",
    "sgst",
    "igst",
    "amount",
]


class LineItemInline(admin.TabularInline):
    model = LineItem
    form = LineItemForm
    extra = 1
    fields = tuple(LINE_FIELDS)
    autocomplete_fields = ["service"]
    ordering = ["position", "id"]

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        if obj is not None and not obj.is_editable:
            return list(LINE_FIELDS)
        return ["taxable_amount", "cgst", "sgst", "igst", "amount"]

    def get_extra(self, request: HttpRequest, obj: Any = None, **kwargs: Any) -> int:
        return 1 if obj is None or obj.is_editable else 0

    def _draft(self, obj: Any) -> bool:
        return obj is None or obj.is_editable

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self._draft(obj) and super().has_add_permission(request, obj)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self._draft(obj) and super().has_change_permission(request, obj)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self._draft(obj) and super().has_delete_permission(request, obj)


class PaymentForm(forms.ModelForm):
    """A new payment. The checks here give staff a form error; the service repeats them under the lock."""

    class Meta:
        model = Payment
        fields = ["amount", "payment_mode", "reference", "payment_date"]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if "payment_date" in self.fields:
            self.fields["payment_date"].required = False
            self.fields["payment_date"].help_text = "Default: today at the branch."

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
        invoice: Invoice | None = getattr(self.instance, "invoice", None)
        amount = data.get("amount")
        if amount is not None and amount <= 0:
            self.add_error("amount", "Must be greater than 0.")
        elif amount is not None and invoice is not None and amount > invoice.balance:
            self.add_error("amount", f"Cannot exceed the balance of {invoice.balance}.")
        if data.get("payment_mode") not in (None, Payment.Mode.CASH) and not (data.get("reference") or "").strip():
            self.add_error("reference", "Required for every mode but cash.")
        payment_date = data.get("payment_date")
        if payment_date is not None and payment_date > _branch_today(invoice):
            self.add_error("payment_date", "Cannot be in the future.")
        return data


class PaymentInline(NoDeleteInlineMixin, admin.TabularInline):
    """Add-only: recorded payments are shown read-only (the database refuses changes anyway)."""

    model = Payment
    form = PaymentForm
    extra = 0
    fields = ["amount", "payment_mode", "reference", "payment_date", "recorded_at", "recorded_by"]
    readonly_fields = ["recorded_at", "recorded_by"]
    ordering = ["recorded_at", "id"]

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        payable = obj is not None and obj.status in services.PAYABLE
        return payable and super().has_add_permission(request, obj)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class InvoiceAdminForm(forms.ModelForm):
    class Meta:
        model = Invoice
        fields = ["branch", "patient", "date"]

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
        branch, day = data.get("branch") or getattr(self.instance, "branch", None), data.get("date")
        if branch is not None and day is not None and (problem := services.invoice_date_problem(branch, day)):
            self.add_error("date", problem)
        return data


@admin.register(Invoice)
class InvoiceAdmin(PatientDataAuditMixin, NoDeleteAdminMixin, admin.ModelAdmin):
    form = InvoiceAdminForm
    list_display = ["__str__", "date", "branch", "patient", "status", "grand_total", "paid", "balance"]
    list_filter = ["status", "branch", "interstate", "financial_year"]
    list_select_related = ["branch", "patient"]
    search_fields = ["invoice_number", "=id", "patient__patient_id", "patient__first_name", "patient__last_name"]
    autocomplete_fields = ["patient"]
    date_hierarchy = "date"
    inlines = [LineItemInline, PaymentInline]
    actions = ["finalize", "cancel"]
    show_full_result_count = False
    _computed = [
        "status",
        "invoice_number",
        "financial_year",
        "place_of_supply",
        "interstate",
        "sub_total",
        "discount",
        "taxable",
        "cgst",
        "sgst",
        "igst",
        "tax",
        "grand_total",
        "paid",
        "balance",
        "finalized_at",
        "cancelled_at",
        "cancellation_reason",
    ]

    def get_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return ["branch", "patient", "date"] + (self._computed if obj is not None else [])

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        if obj is None:
            return []
        return ["branch", "patient", *([] if obj.is_editable else ["date"]), *self._computed]

    def get_changeform_initial_data(self, request: HttpRequest) -> dict[str, Any]:
        return {"date": timezone.localdate(), **super().get_changeform_initial_data(request)}

    @admin.display(description="balance")
    def balance(self, obj: Invoice) -> Any:
        return obj.balance

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # invoices are cancelled, never deleted

    def save_model(self, request: HttpRequest, obj: Invoice, form: Any, change: bool) -> None:
        if not change:
            # Created by the service (place of supply fixed there); the form's object then becomes that row.
            # (Its primary key is None here: Django clears a defaulted pk of a parent with inlines.)
            created = services.invoice_create(
                branch=obj.branch, patient=obj.patient, invoice_date=obj.date, line_items=[]
            )
            obj.pk = created.pk
            obj._state.adding = False
            obj.refresh_from_db()
        elif "date" in form.changed_data:
            self._call(request, services.invoice_update, invoice=obj, invoice_date=obj.date)

    def save_formset(self, request: HttpRequest, form: Any, formset: BaseInlineFormSet, change: bool) -> None:
        """Inline rows become service calls, so totals and locks are the services' business."""
        formset.new_objects, formset.changed_objects, formset.deleted_objects = [], [], []
        invoice: Invoice = form.instance
        for row in formset.forms:
            if not row.has_changed() and row not in formset.deleted_forms:
                continue
            existing = row.instance.pk is not None and not row.instance._state.adding
            if formset.model is LineItem:
                if row in formset.deleted_forms:
                    if existing and self._call(request, services.line_item_remove, line_item=row.instance):
                        formset.deleted_objects.append(row.instance)
                elif existing:
                    line = self._call(
                        request,
                        services.line_item_update,
                        line_item=row.instance,
                        item=cast(LineItemForm, row).line_input(),
                    )
                    if line:
                        formset.changed_objects.append((line, row.changed_data))
                else:
                    line = self._call(
                        request, services.line_item_add, invoice=invoice, item=cast(LineItemForm, row).line_input()
                    )
                    if line:
                        formset.new_objects.append(line)
            elif formset.model is Payment and not existing and row not in formset.deleted_forms:
                payment = self._call(
                    request,
                    services.payment_record,
                    invoice=invoice,
                    amount=row.cleaned_data["amount"],
                    payment_mode=row.cleaned_data["payment_mode"],
                    reference=row.cleaned_data.get("reference") or "",
                    payment_date=row.cleaned_data.get("payment_date"),
                    recorded_by=_staff(request),
                )
                if payment:
                    formset.new_objects.append(payment)

    def _call(self, request: HttpRequest, service: Any, **kwargs: Any) -> Any:
        """Run a service; a refusal (a race the form could not see) becomes an error message, not a 500."""
        try:
            return service(**kwargs)
        except DomainError as exc:
            details = "; ".join(f"{k}: {v}" for k, v in exc.errors.items()) if isinstance(exc, FieldError) else ""
            self.message_user(request, f"{exc.detail} {details}".strip(), messages.ERROR)
            return None

    def _apply(self, request: HttpRequest, queryset: QuerySet[Invoice], service: Any, **kwargs: Any) -> None:
        apply_to_each(
            self, request, queryset.select_related("branch"), lambda invoice: service(invoice=invoice, **kwargs)
        )

    @admin.action(description="Finalize the selected draft invoices (assigns numbers)", permissions=["change"])
    def finalize(self, request: HttpRequest, queryset: QuerySet[Invoice]) -> None:
        # In date and creation order, so numbers follow the order the invoices were raised in.
        self._apply(request, queryset.order_by("date", "created_at", "id"), services.invoice_finalize)

    @admin.action(description="Cancel the selected invoices (only while nothing is paid)", permissions=["change"])
    def cancel(self, request: HttpRequest, queryset: QuerySet[Invoice]) -> HttpResponse | None:
        reason = reason_confirmation(
            self,
            request,
            queryset.select_related("patient"),
            action="cancel",
            title="Cancel invoices",
            intro="Cancel these invoices? Only drafts and finalized invoices without payments can be cancelled; a "
            "finalized invoice keeps its number, which is never reused.",
            submit_label="Cancel invoices",
            describe=lambda i: f"{i} — {i.patient} ({i.get_status_display()}, {i.grand_total})",
        )
        if not isinstance(reason, str):
            return reason
        self._apply(request, queryset, services.invoice_cancel, reason=reason)
        return None


@admin.register(Payment)
class PaymentAdmin(PatientDataAuditMixin, NoDeleteAdminMixin, admin.ModelAdmin):
    """Read-only: payments are recorded on their invoice and never changed or deleted."""

    list_display = ["payment_date", "invoice", "amount", "payment_mode", "reference", "recorded_at", "recorded_by"]
    list_filter = ["payment_mode", "invoice__branch"]
    list_select_related = ["invoice"]
    search_fields = ["reference", "invoice__invoice_number", "invoice__patient__patient_id"]
    date_hierarchy = "payment_date"
    show_full_result_count = False

    def patient_ids_of(self, obj: Payment) -> list[Any]:
        return [obj.invoice.patient_id]  # the invoice is joined (list_select_related)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(InvoiceNumberCounter)
class InvoiceNumberCounterAdmin(admin.ModelAdmin):
    """Read-only: the last number each branch issued per financial year."""

    list_display = ["branch", "financial_year", "last_number"]
    list_filter = ["financial_year"]
    list_select_related = ["branch"]
    search_fields = ["branch__code", "branch__name"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
