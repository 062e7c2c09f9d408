"""Billing in the admin: the service catalogue (with its tax category and HSN/SAC); invoices edited as
drafts with inline line items, finalized and cancelled by actions, paid and refunded through add-only
inlines, credited through the "Issue credit note" page, printed as the API prints them (Print PDF). Every
change goes through billing.services (totals, numbering, row locks); payments, refunds, credit notes and
finalized invoices are read-only, and a refusal of a service is a form error or a message, never a 500."""

from __future__ import annotations

import logging
import re
from decimal import Decimal
from functools import partial
from typing import Any, cast

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.utils import unquote
from django.core.exceptions import PermissionDenied
from django.db.models import Max, Min, QuerySet
from django.forms.models import BaseInlineFormSet
from django.http import (
    Http404,
    HttpRequest,
    HttpResponse,
    HttpResponseBase,
    HttpResponseRedirect,
)
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils import timezone
from django.utils.html import format_html

from billing import selectors, services
from billing.admin_collections import collections_view, may_see_collections
from billing.admin_credit_notes import CreditNotePage
from billing.document_pdf import pdf_response
from billing.documents import TaxDocument, credit_note_document, credit_note_of, invoice_document
from billing.models import (
    BillableService,
    CreditNote,
    CreditNoteLine,
    CreditNoteNumberCounter,
    Invoice,
    InvoiceNumberCounter,
    LineItem,
    Payment,
    Refund,
)
from clinic.admin_actions import apply_to_each, reason_confirmation
from clinic.admin_audit import Clock, PatientDataAuditMixin, write_admin_audit
from clinic.admin_records import NoDeleteAdminMixin, NoDeleteInlineMixin, ReadOnlyAdminMixin
from clinic.errors import DomainError, FieldError
from clinic.lib import tax
from clinic.lib.pdf import RenderError

logger = logging.getLogger("billing.admin")


def _staff(request: HttpRequest) -> str:
    return f"staff:{request.user.get_username()}"


def _branch_today(invoice: Invoice | None) -> Any:
    zone = invoice.branch.zone if invoice is not None and invoice.branch_id else timezone.get_current_timezone()
    return timezone.localtime(timezone.now(), zone).date()


def _pdf_or_message(
    modeladmin: admin.ModelAdmin[Any], request: HttpRequest, document: TaxDocument, invoice: Invoice, back: str
) -> HttpResponseBase:
    """The document's PDF, audited as a page showing the invoice's patient (actor staff:<user>); when it
    cannot be rendered, a logged error and a message on the page staff came from, never a 500."""
    clock = Clock()
    try:
        response: HttpResponseBase = pdf_response(document)
    except RenderError:
        logger.exception("Could not render %s for %s", document.filename, _staff(request))
        modeladmin.message_user(request, "The PDF could not be rendered; the error has been logged.", messages.ERROR)
        return HttpResponseRedirect(back)
    write_admin_audit(request, response, [invoice.patient_id], clock)
    return response


def _tax_detail_problems(category: str, rate: Decimal | None, hsn_sac: str) -> dict[str, str]:
    """What the database would refuse (or the services, for a rate that is not statutory), as form errors."""
    problems = {}
    if rate is not None and (problem := tax.tax_category_problem(category, rate)):
        problems["tax_rate"] = problem
    if hsn_sac and not re.match(tax.HSN_SAC_PATTERN, hsn_sac):
        problems["hsn_sac"] = "4, 6 or 8 digits: SAC for a service (9993xx for healthcare), HSN for goods."
    return problems


class BillableServiceForm(forms.ModelForm):
    """The rate must go with the category (untaxed: 0; taxable: a statutory rate) and the HSN/SAC be 4, 6
    or 8 digits, so staff get a form error where the database would refuse the row."""

    class Meta:
        model = BillableService
        fields = ["code", "name", "department", "rate", "tax_category", "tax_rate", "hsn_sac", "active"]

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
        data["hsn_sac"] = (data.get("hsn_sac") or "").strip()
        rate = data.get("rate")
        if rate is not None and rate < 0:
            self.add_error("rate", "Cannot be negative.")
        category = data.get("tax_category")
        if category:
            for name, problem in _tax_detail_problems(category, data.get("tax_rate"), data["hsn_sac"]).items():
                self.add_error(name, problem)
        return data


class HsnSacFilter(admin.SimpleListFilter):
    """Catalogue entries that still lack the code a GST tax invoice prints."""

    title = "HSN/SAC"
    parameter_name = "hsn_sac"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("missing", "Without HSN/SAC"), ("present", "With HSN/SAC")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        if self.value() == "missing":
            return queryset.filter(hsn_sac="")
        if self.value() == "present":
            return queryset.exclude(hsn_sac="")
        return queryset


class FinancialYearFilter(admin.SimpleListFilter):
    """Indian financial years (April to March) from the first document's date to the last, read from the date
    index: Django's own filter would read every distinct value of a million rows."""

    title = "financial year"
    parameter_name = "financial_year"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        span = model_admin.model._default_manager.aggregate(first=Min("date"), last=Max("date"))
        if span["first"] is None:
            return []
        years = range(_fy_start(span["last"]), _fy_start(span["first"]) - 1, -1)
        return [(f"{year}-{(year + 1) % 100:02d}",) * 2 for year in years]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        return queryset.filter(financial_year=self.value()) if self.value() else queryset


def _fy_start(day: Any) -> int:
    return int(day.year if day.month >= 4 else day.year - 1)


@admin.register(BillableService)
class BillableServiceAdmin(admin.ModelAdmin):
    form = BillableServiceForm
    list_display = ["code", "name", "department", "rate", "tax_category", "tax_rate", "hsn_sac", "active"]
    list_filter = ["active", "tax_category", HsnSacFilter, "department", "tax_rate"]
    list_select_related = ["department"]
    search_fields = ["code", "name", "hsn_sac"]
    ordering = ["code"]


class LineItemForm(forms.ModelForm):
    """A line as staff enter it: choosing a catalogue service fills name, department, rate, tax rate, tax
    category and HSN/SAC left empty; without one they are required (the category then follows the rate,
    the HSN/SAC may stay blank). The computed figures come from billing.services."""

    class Meta:
        model = LineItem
        fields = [
            "service",
            "service_name",
            "department",
            "quantity",
            "rate",
            "discount",
            "tax_category",
            "tax_rate",
            "hsn_sac",
        ]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for name in ("service_name", "department", "rate", "tax_rate", "tax_category", "hsn_sac"):
            if name in self.fields:  # absent when the inline is read-only
                self.fields[name].required = False
        if "tax_category" in self.fields:
            category = cast(forms.ChoiceField, self.fields["tax_category"])
            category.choices = [("", "From the service or rate"), *tax.TaxCategory.choices]
        if self.instance._state.adding:
            # A new row must not show the model's defaults (tax rate 0, exempt): a filled-in 0 would win
            # over the catalogue service's rate, billing a taxable service without tax. Left empty, they
            # are taken from the service, or the rate is required when there is none.
            for name in ("tax_rate", "tax_category"):
                self.initial.pop(name, None)
                if name in self.fields:
                    self.fields[name].initial = None

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
        # As the API resolves a line (billing.services.line_inputs_resolve): the category as chosen; else the
        # catalogue's, unless the rate was typed in (then it follows the rate); the HSN/SAC likewise.
        rate_typed = "tax_rate" in self.changed_data or service is None
        if not data.get("tax_category"):
            data["tax_category"] = service.tax_category if service is not None and not rate_typed else ""
        data["hsn_sac"] = (data.get("hsn_sac") or "").strip() or (service.hsn_sac if service is not None else "")
        chosen, rate = data["tax_category"], data.get("tax_rate")
        if rate is not None:
            category = chosen or tax.default_tax_category(rate)
            for name, problem in _tax_detail_problems(category, rate, data["hsn_sac"]).items():
                if name not in self.errors:  # (add_error drops the field from cleaned_data)
                    self.add_error("tax_category" if chosen and name == "tax_rate" else name, problem)
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
            tax_category=data.get("tax_category") or "",
            hsn_sac=data.get("hsn_sac") or "",
        )


LINE_FIELDS = [
    "service",
    "service_name",
    "department",
    "quantity",
    "rate",
    "discount",
    "tax_category",
    "tax_rate",
    "hsn_sac",
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


class RefundForm(forms.ModelForm):
    """A new refund. The checks here give staff a form error; the service repeats them under the lock."""

    class Meta:
        model = Refund
        fields = ["amount", "payment_mode", "reference", "refund_date"]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if "refund_date" in self.fields:
            self.fields["refund_date"].required = False
            self.fields["refund_date"].help_text = "Default: today at the branch."

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
        invoice: Invoice | None = getattr(self.instance, "invoice", None)
        amount = data.get("amount")
        if amount is not None and amount <= 0:
            self.add_error("amount", "Must be greater than 0.")
        elif amount is not None and invoice is not None and amount > invoice.net_paid:
            self.add_error("amount", f"Cannot exceed what was paid and not yet refunded ({invoice.net_paid}).")
        if data.get("payment_mode") not in (None, Payment.Mode.CASH) and not (data.get("reference") or "").strip():
            self.add_error("reference", "Required for every mode but cash.")
        refund_date = data.get("refund_date")
        if refund_date is not None and refund_date > _branch_today(invoice):
            self.add_error("refund_date", "Cannot be in the future.")
        elif refund_date is not None and invoice is not None and refund_date < invoice.date:
            self.add_error("refund_date", f"Cannot be before the invoice date ({invoice.date}).")
        return data


class RefundInline(NoDeleteInlineMixin, admin.TabularInline):
    """Add-only, as payments: money paid back on an issued invoice, at most what was paid and not refunded."""

    model = Refund
    form = RefundForm
    extra = 0
    fields = ["amount", "payment_mode", "reference", "refund_date", "recorded_at", "recorded_by"]
    readonly_fields = ["recorded_at", "recorded_by"]
    ordering = ["recorded_at", "id"]
    verbose_name = "refund"

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        refundable = obj is not None and obj.status in services.TRANSITIONS["refund"] and obj.net_paid > 0
        return refundable and super().has_add_permission(request, obj)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


def _credit_note_pdf_link(credit_note: CreditNote) -> str:
    url = reverse("admin:billing_creditnote_pdf", args=[credit_note.pk])
    return format_html('<a href="{}" target="_blank" rel="noopener">Print PDF</a>', url)


class CreditNoteInline(admin.TabularInline):
    """The invoice's credit notes, read-only (issued with "Issue credit note"), each with its PDF."""

    model = CreditNote
    extra = 0
    fields = readonly_fields = ("credit_note_number", "date", "reason", "taxable", "tax", "total", "created_by", "pdf")
    ordering = ["created_at", "id"]
    show_change_link = True

    @admin.display(description="PDF")
    def pdf(self, obj: CreditNote) -> str:
        return _credit_note_pdf_link(obj) if obj.pk else ""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

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
    list_display = [
        "__str__",
        "date",
        "branch",
        "patient",
        "status",
        "grand_total",
        "credited",
        "paid",
        "refunded",
        "balance",
        "refund_due",
    ]
    list_filter = ["status", "branch", "interstate", FinancialYearFilter]
    list_select_related = ["branch", "patient"]
    search_fields = ["invoice_number", "=id", "patient__patient_id", "patient__first_name", "patient__last_name"]
    autocomplete_fields = ["patient"]
    date_hierarchy = "date"
    inlines = [LineItemInline, PaymentInline, CreditNoteInline, RefundInline]
    actions = ["finalize", "cancel"]
    show_full_result_count = False

    def get_search_results(self, request: HttpRequest, queryset: QuerySet[Invoice], search_term: str) -> Any:
        """A whole invoice number or patient ID, as accountants type them, is read from its unique index; other
        text is matched as Django's lists match it (a substring of the number or the patient's names, which
        reads every invoice of the branch)."""
        term = search_term.strip().upper()
        if term:
            # Two reads, not one OR across the join: each is then one index lookup.
            for exact in (queryset.filter(invoice_number=term), queryset.filter(patient__patient_id=term)):
                if exact.exists():
                    return exact, False
        return super().get_search_results(request, queryset, search_term)

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
        "credited",
        "net_total",
        "paid",
        "refunded",
        "balance",
        "refund_due",
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

    @admin.display(description="net total")
    def net_total(self, obj: Invoice) -> Any:
        return obj.net_total

    @admin.display(description="refund due")
    def refund_due(self, obj: Invoice) -> Any:
        return obj.refund_due

    # --- Print PDF and Issue credit note ---------------------------------------------------------------

    def get_urls(self) -> list[URLPattern]:
        view = self.admin_site.admin_view
        return [
            path("<path:object_id>/pdf/", view(self.pdf_view), name="billing_invoice_pdf"),
            path("<path:object_id>/credit-note/", view(self.credit_note_view), name="billing_invoice_credit_note"),
            path("<path:object_id>/finalize/", view(self.finalize_view), name="billing_invoice_finalize"),
            *super().get_urls(),
        ]

    def change_view(
        self, request: HttpRequest, object_id: str, form_url: str = "", extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        invoice = self.get_object(request, unquote(object_id))
        tools: dict[str, Any] = {}
        if invoice is not None:
            tools["pdf_url"] = reverse("admin:billing_invoice_pdf", args=[invoice.pk])
            if invoice.status in services.TRANSITIONS["credit"] and self.has_change_permission(request, invoice):
                tools["credit_note_url"] = reverse("admin:billing_invoice_credit_note", args=[invoice.pk])
            if invoice.status in services.TRANSITIONS["finalize"] and self.has_change_permission(request, invoice):
                tools["finalize_url"] = reverse("admin:billing_invoice_finalize", args=[invoice.pk])
        return super().change_view(request, object_id, form_url, {**tools, **(extra_context or {})})

    def _invoice_or_denied(self, request: HttpRequest, object_id: str, *, change: bool) -> Invoice | None:
        invoice = self.get_object(request, unquote(object_id))
        if invoice is None:
            return None
        allowed = self.has_change_permission(request, invoice) if change else self.has_view_permission(request, invoice)
        if not allowed:
            raise PermissionDenied
        return invoice

    def pdf_view(self, request: HttpRequest, object_id: str) -> HttpResponseBase:
        """The tax invoice as the API prints it; audited as a page showing the invoice's patient."""
        invoice = self._invoice_or_denied(request, object_id, change=False)
        if invoice is None:
            raise Http404(f"No {self.opts.verbose_name} {object_id!r}.")
        loaded = selectors.invoice_detail_load(invoice.pk)
        back = reverse("admin:billing_invoice_change", args=[invoice.pk])
        return _pdf_or_message(self, request, invoice_document(loaded), loaded, back)

    def finalize_view(self, request: HttpRequest, object_id: str) -> HttpResponseBase:
        """The invoice page's Finalize: a confirmation page (GET), then the service (POST); the message names
        the number assigned, so the accountant sees it without going back to the list."""
        invoice = self._invoice_or_denied(request, object_id, change=True)
        if invoice is None:
            raise Http404(f"No {self.opts.verbose_name} {object_id!r}.")
        back = reverse("admin:billing_invoice_change", args=[invoice.pk])
        if request.method == "POST":
            finalized = self._call(request, services.invoice_finalize, invoice=invoice)
            if finalized is not None:
                self.message_user(
                    request, f"Invoice finalized: number {finalized.invoice_number} assigned.", messages.SUCCESS
                )
            return HttpResponseRedirect(back)
        context = {
            **self.admin_site.each_context(request),
            "title": f"Finalize {invoice}?",
            "opts": self.opts,
            "invoice": invoice,
            "back": back,
        }
        return TemplateResponse(request, "admin/billing/invoice/finalize.html", context)

    def credit_note_view(self, request: HttpRequest, object_id: str) -> HttpResponseBase:
        """Issue a credit note: a reason, and per line the whole of what is left, a quantity or an amount."""
        clock = Clock()
        invoice = self._invoice_or_denied(request, object_id, change=True)
        if invoice is None:
            raise Http404(f"No {self.opts.verbose_name} {object_id!r}.")
        back = reverse("admin:billing_invoice_change", args=[invoice.pk])
        if invoice.status not in services.TRANSITIONS["credit"]:
            self.message_user(
                request,
                f"{invoice} is {invoice.get_status_display().lower()}: credit notes are issued on finalized, "
                "partially paid or paid invoices.",
                messages.ERROR,
            )
            return HttpResponseRedirect(back)
        loaded = selectors.invoice_detail_load(invoice.pk)
        page = CreditNotePage(loaded, request.POST if request.method == "POST" else None)
        if request.method == "POST" and page.is_valid():
            try:
                credit_note = services.credit_note_issue(
                    invoice=loaded, reason=page.reason, lines=page.credits(), issued_by=_staff(request)
                )
            except DomainError as exc:
                page.add_service_error(exc)
            else:
                self.message_user(
                    request, f"Credit note {credit_note} issued for {credit_note.total}.", messages.SUCCESS
                )
                response: HttpResponseBase = HttpResponseRedirect(back)
                write_admin_audit(request, response, [invoice.patient_id], clock)
                return response
        response = TemplateResponse(
            request,
            "admin/billing/invoice/credit_note.html",
            {
                **self.admin_site.each_context(request),
                "title": f"Issue a credit note against {invoice}",
                "opts": self.opts,
                "original": invoice,
                "invoice": loaded,
                "page": page,
                "back_url": back,
            },
        )
        write_admin_audit(request, response, [invoice.patient_id], clock)
        return response

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
            elif formset.model is Refund and not existing and row not in formset.deleted_forms:
                refund = self._call(
                    request,
                    services.refund_record,
                    invoice=invoice,
                    amount=row.cleaned_data["amount"],
                    payment_mode=row.cleaned_data["payment_mode"],
                    reference=row.cleaned_data.get("reference") or "",
                    refund_date=row.cleaned_data.get("refund_date"),
                    recorded_by=_staff(request),
                )
                if refund:
                    formset.new_objects.append(refund)

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
        # In date and creation order, so numbers follow the order the invoices were raised in; the numbers
        # assigned are named in the message.
        numbers: list[str] = []

        def finalize(invoice: Invoice) -> Invoice:
            finalized = services.invoice_finalize(invoice=invoice)
            numbers.append(str(finalized.invoice_number))
            return finalized

        apply_to_each(self, request, queryset.select_related("branch").order_by("date", "created_at", "id"), finalize)
        if numbers:
            self.message_user(request, f"Numbers assigned: {', '.join(numbers)}.", messages.SUCCESS)

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
class PaymentAdmin(PatientDataAuditMixin, ReadOnlyAdminMixin, NoDeleteAdminMixin, admin.ModelAdmin):
    """Read-only: payments are recorded on their invoice and never changed or deleted."""

    list_display = ["payment_date", "invoice", "amount", "payment_mode", "reference", "recorded_at", "recorded_by"]
    list_filter = ["payment_mode", "invoice__branch"]
    list_select_related = ["invoice"]
    search_fields = ["reference", "invoice__invoice_number", "invoice__patient__patient_id"]
    date_hierarchy = "payment_date"
    show_full_result_count = False
    ordering = ["-recorded_at", "-id"]  # the latest first (index payment_recorded_order)

    def patient_ids_of(self, obj: Payment) -> list[Any]:
        return [obj.invoice.patient_id]  # the invoice is joined (list_select_related)

    def get_urls(self) -> list[URLPattern]:
        view = self.admin_site.admin_view(partial(collections_view, self.admin_site))
        return [path("collections/", view, name="billing_payment_collections"), *super().get_urls()]

    def changelist_view(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> HttpResponse:
        allowed = may_see_collections(request.user)
        link = {"collections_url": reverse("admin:billing_payment_collections")} if allowed else {}
        return super().changelist_view(request, {**link, **(extra_context or {})})


class NumberCounterAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    """Read-only: the last number each branch issued per financial year, in one series."""

    list_display = ["branch", "financial_year", "last_number"]
    list_filter = ["financial_year"]
    list_select_related = ["branch"]
    search_fields = ["branch__code", "branch__name"]


admin.site.register(InvoiceNumberCounter, NumberCounterAdmin)
admin.site.register(CreditNoteNumberCounter, NumberCounterAdmin)


class CreditNoteLineInline(admin.TabularInline):
    model = CreditNoteLine
    extra = 0
    fields = readonly_fields = (
        *("service_name", "hsn_sac", "tax_category", "tax_rate", "quantity"),
        *("taxable_amount", "cgst", "sgst", "igst", "amount"),
    )
    ordering = ["position", "id"]

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(CreditNote)
class CreditNoteAdmin(PatientDataAuditMixin, ReadOnlyAdminMixin, NoDeleteAdminMixin, admin.ModelAdmin):
    """Read-only: credit notes are issued on their invoice ("Issue credit note") and never changed."""

    list_display = ["credit_note_number", "date", "invoice", "patient", "total", "reason", "created_by", "pdf"]
    list_filter = ["branch", FinancialYearFilter]
    list_select_related = ["invoice", "invoice__patient"]
    search_fields = ["credit_note_number", "invoice__invoice_number", "invoice__patient__patient_id"]
    date_hierarchy = "date"
    show_full_result_count = False
    ordering = ["-created_at", "-id"]  # the latest first (index creditnote_created_order)
    fields = readonly_fields = (
        *("credit_note_number", "date", "invoice", "reason", "taxable", "cgst", "sgst", "igst", "tax", "total"),
        *("created_at", "created_by"),
    )
    inlines = [CreditNoteLineInline]

    def patient_ids_of(self, obj: CreditNote) -> list[Any]:
        return [obj.invoice.patient_id]  # the invoice is joined (list_select_related)

    @admin.display(description="patient")
    def patient(self, obj: CreditNote) -> Any:
        return obj.invoice.patient

    @admin.display(description="PDF")
    def pdf(self, obj: CreditNote) -> str:
        return _credit_note_pdf_link(obj)

    def get_urls(self) -> list[URLPattern]:
        return [
            path("<path:object_id>/pdf/", self.admin_site.admin_view(self.pdf_view), name="billing_creditnote_pdf"),
            *super().get_urls(),
        ]

    def change_view(
        self, request: HttpRequest, object_id: str, form_url: str = "", extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        tools = {"pdf_url": reverse("admin:billing_creditnote_pdf", args=[unquote(object_id)])}
        return super().change_view(request, object_id, form_url, {**tools, **(extra_context or {})})

    def pdf_view(self, request: HttpRequest, object_id: str) -> HttpResponseBase:
        """The credit note as the API prints it; audited as a page showing the invoice's patient."""
        credit_note = self.get_object(request, unquote(object_id))
        if credit_note is None:
            raise Http404(f"No {self.opts.verbose_name} {object_id!r}.")
        if not self.has_view_permission(request, credit_note):
            raise PermissionDenied
        invoice = selectors.invoice_detail_load(credit_note.invoice_id)
        document = credit_note_document(credit_note_of(invoice, str(credit_note.pk)), invoice)
        back = reverse("admin:billing_creditnote_change", args=[credit_note.pk])
        return _pdf_or_message(self, request, document, invoice, back)


@admin.register(Refund)
class RefundAdmin(PatientDataAuditMixin, ReadOnlyAdminMixin, NoDeleteAdminMixin, admin.ModelAdmin):
    """Read-only: refunds are recorded on their invoice and never changed or deleted."""

    list_display = ["refund_date", "invoice", "amount", "payment_mode", "reference", "recorded_at", "recorded_by"]
    list_filter = ["payment_mode", "branch"]
    list_select_related = ["invoice"]
    search_fields = ["reference", "invoice__invoice_number", "invoice__patient__patient_id"]
    date_hierarchy = "refund_date"
    show_full_result_count = False
    ordering = ["-recorded_at", "-id"]  # the latest first (index refund_recorded_order)

    def patient_ids_of(self, obj: Refund) -> list[Any]:
        return [obj.invoice.patient_id]  # the invoice is joined (list_select_related)
