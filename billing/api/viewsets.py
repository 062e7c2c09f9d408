"""The billing resources under /api/v1/billing/ (docs/api-rules.md §11): invoices (list, create, detail, draft
edit, and the transitions finalize and cancel), their payments, and the financial summary.

Handlers parse, call one selector or service and answer with billing.representations; a changed invoice
is re-read through the client's branch restriction. Each operation's description is its handler's
docstring (drf-spectacular reads it).
"""

from __future__ import annotations

import builtins

from django.http import HttpResponseBase
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.decorators import action
from rest_framework.renderers import BaseRenderer
from rest_framework.request import Request
from rest_framework.response import Response

from billing import selectors, services
from billing.api import schema
from billing.api.documents import invoice_pdf_response
from billing.api.serializers import (
    CancelSerializer,
    CreditNoteSerializer,
    EmptyBody,
    InvoiceCreateSerializer,
    InvoiceListParams,
    InvoiceUpdateSerializer,
    PaymentSerializer,
    RefundSerializer,
    SummaryParams,
)
from billing.models import Invoice
from billing.representations import (
    CreditNote,
    CreditNoteIssued,
    FinancialSummary,
    InvoiceDetail,
    InvoiceSummary,
    PaymentRecorded,
    RefundRecorded,
    credit_note_representation,
    credit_note_result,
    financial_summary,
    invoice_detail,
    invoice_summary,
    payment_result,
    refund_result,
)
from clinic.api.pagination import HeaderPagination, PageParams
from clinic.api.renderers import PdfRenderer
from clinic.api.schema import error_example, location_header, pagination_parameters
from clinic.api.shapes import shape
from clinic.api.viewsets import ClinicViewSet, created
from clinic.lib.pdf import PDF
from clinic.selectors import branch_only_default
from integrations.models import ApiClient

_ID = OpenApiParameter("id", str, OpenApiParameter.PATH, description="Invoice UUID.")
_CREDIT_NOTE_ID = OpenApiParameter("credit_note_id", str, OpenApiParameter.PATH, description="Credit note UUID.")
_NOT_FOUND = OpenApiResponse(description="`not_found`: unknown id, or an invoice at a branch the client may not see.")
_DETAIL = OpenApiResponse(shape(InvoiceDetail), description="The invoice detail.")
_INVALID = OpenApiResponse(description="`validation_error` (`errors` names every bad field) or `unknown_parameter`.")
_NOT_A_DRAFT = OpenApiResponse(description="`invalid_state` (with `current_status`): not a draft.")


def _invoice_alone(*, client: ApiClient, ref: str) -> Invoice:
    return selectors.invoice_get(client=client, invoice_id=ref, detail=False)


def _invoice_with_detail(*, client: ApiClient, ref: str) -> Invoice:
    return selectors.invoice_get(client=client, invoice_id=ref, detail=True)


class InvoiceViewSet(ClinicViewSet[Invoice]):
    patient_data = True
    selector = staticmethod(_invoice_alone)
    required_scopes = {
        "list": "billing:read",
        "retrieve": "billing:read",
        "create": "billing:write",
        "partial_update": "billing:write",
        "finalize": "billing:write",
        "cancel": "billing:write",
        "payments": "billing:write",
        "credit_notes": "billing:read",
        "credit_notes_create": "billing:write",
        "credit_note": "billing:read",
        "refunds": "billing:write",
    }
    query_params = {"list": (PageParams, InvoiceListParams), "credit_notes": (PageParams,)}

    def get_view_name(self) -> str:
        # The OPTIONS "name" of the invoices and of one invoice, as the plain views gave it.
        names = {"List": "Invoice List Create", "Instance": "Invoice Detail"}
        return names.get(self.suffix or "") or super().get_view_name()

    def _invoice(self, *, detail: bool = False) -> Invoice:
        """The invoice of the URL through the client's branch restriction (404 otherwise), audited."""
        return self.get_object(_invoice_with_detail if detail else _invoice_alone)

    def _detail(self, invoice: Invoice) -> InvoiceDetail:
        """The invoice as it now stands, re-read with everything the detail shows."""
        return invoice_detail(selectors.invoice_get(client=self.api_client, invoice_id=str(invoice.id)))

    @extend_schema(
        operation_id="billing_invoices_list",
        summary="List invoices",
        parameters=pagination_parameters(),
        responses={200: OpenApiResponse(shape(InvoiceSummary, many=True), description="A bare JSON array.")},
        examples=[schema.LIST_EXAMPLE],
    )
    def list(self, request: Request) -> Response:
        """Invoices at the branches the client may see, newest invoice date first (then most recently created,
        then id). `date_from`/`date_to` are inclusive invoice dates. A `patient_id` or `branch_id` naming nothing
        the client may see (at another branch or nowhere) answers an empty list; an empty or malformed one is
        a 400 naming it. Scope: `billing:read`."""
        params = InvoiceListParams(data=request.query_params, context={"client": self.api_client})
        pagination = HeaderPagination(request, params)
        filters = pagination.filters
        patient = filters.pop("patient_id", None)
        if patient is not None:
            self.audit_patients([patient.id])
        page = pagination.paginate(selectors.invoice_list(client=self.api_client, patient=patient, **filters))
        self.audit_patients(invoice.patient_id for invoice in page)
        return pagination.response([invoice_summary(invoice) for invoice in page])

    @extend_schema(
        operation_id="billing_invoices_create",
        summary="Create an invoice",
        request=InvoiceCreateSerializer,
        parameters=[location_header("/api/v1/billing/invoices/{id}")],
        responses={201: _DETAIL, 400: _INVALID},
        examples=[
            error_example("Discount above the line", schema.BAD_LINE),
            schema.CREATE_REQUEST,
            schema.CREATED_FINALIZED_EXAMPLE,
            schema.DRAFT_EXAMPLE,
            schema.INTERSTATE_EXAMPLE,
        ],
    )
    def create(self, request: Request) -> Response:
        """Creates a draft, or a finalized invoice with `finalize: true`. `branch_id` defaults to the client's
        only branch; `date` to today at the branch (not in the future); its Indian financial year (April-March)
        decides the number series. Each line names a catalogue `service_code` (name, department, rate and
        tax_rate default from the catalogue and may be overridden) or a `service_name` with `department` (name
        or UUID), `rate` and `tax_rate`. `quantity` defaults to 1 and may be fractional; `discount` (rupees) is
        at most quantity x rate.

        GST per line: taxable = quantity x rate - discount; tax = taxable x tax_rate / 100, rounded half-up to
        the paisa; when the patient's address state is the branch's state (or unknown), CGST and SGST halves,
        CGST taking an odd paisa (tax 0.05 -> 0.03 + 0.02); otherwise IGST. The treatment is fixed when the
        invoice is created. Totals are the exact sums of the lines. Honours `Idempotency-Key`. Scope:
        `billing:write`."""
        client = self.api_client
        body = InvoiceCreateSerializer(data=request.data, context={"client": client})
        body.is_valid(raise_exception=True)
        data = body.validated_data
        patient = data["patient_id"]
        self.audit_patients([patient.id])
        invoice = services.invoice_create(
            branch=data.get("branch_id") or branch_only_default(client=client, action="invoice"),
            patient=patient,
            invoice_date=data.get("date"),
            line_items=data["line_items"],
            finalize=data["finalize"],
        )
        return created(self._detail(invoice), f"/api/v1/billing/invoices/{invoice.id}")

    def get_renderers(self) -> builtins.list[BaseRenderer]:  # `list` is the action here
        # The detail is also the printable tax invoice, for `Accept: application/pdf` (JSON stays the default);
        # no other action answers a PDF, so none offers the renderer. DRF's negotiation ignores q-values, so
        # the order follows the client's preference (Django's get_preferred_type honours them).
        renderers = super().get_renderers()
        if self.action != "retrieve":
            return renderers
        if self.request.get_preferred_type(["application/json", PDF]) == PDF:
            return [PdfRenderer(), *renderers]
        return [*renderers, PdfRenderer()]

    @extend_schema(
        operation_id="billing_invoices_retrieve",
        summary="Get an invoice",
        parameters=[_ID],
        responses={
            (200, "application/json"): _DETAIL,
            (200, PDF): OpenApiResponse(OpenApiTypes.BINARY, description="With `Accept: application/pdf`."),
            404: _NOT_FOUND,
        },
        examples=[schema.FINALIZED_EXAMPLE, schema.PARTIALLY_PAID_EXAMPLE, schema.INTERSTATE_EXAMPLE],
    )
    def retrieve(self, request: Request, id: str) -> HttpResponseBase:
        """Header (number, date, status, branch, patient), line items with their GST breakdown, totals,
        payments, paid and balance. Money is a JSON number with two decimals. With `Accept: application/pdf`,
        the GST tax invoice as a PDF, exactly as GET /api/v1/billing/invoices/{id}.pdf. Scope: `billing:read`."""
        invoice = self._invoice(detail=True)
        if request.accepted_renderer.format == PdfRenderer.format:
            return invoice_pdf_response(invoice)
        return Response(invoice_detail(invoice))

    @extend_schema(
        operation_id="billing_invoices_partial_update",
        summary="Edit a draft invoice",
        parameters=[_ID],
        request=InvoiceUpdateSerializer,
        responses={200: _DETAIL, 404: _NOT_FOUND, 409: _NOT_A_DRAFT},
        examples=[
            schema.UPDATE_REQUEST,
            schema.EDITED_EXAMPLE,
            error_example("Not a draft", schema.INVALID_STATE_EDIT),
        ],
    )
    def partial_update(self, request: Request, id: str) -> Response:
        """Only drafts are editable: `date` and/or `line_items` (which, when sent, replace every line; the same
        rules as creation). Totals are recomputed. 409 `invalid_state` once finalized or cancelled. Honours
        `Idempotency-Key`. Scope: `billing:write`."""
        invoice = self._invoice()
        body = InvoiceUpdateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        services.invoice_update(invoice=invoice, invoice_date=data.get("date"), line_items=data.get("line_items"))
        return Response(self._detail(invoice))

    @extend_schema(
        operation_id="billing_invoices_finalize",
        summary="Finalize an invoice",
        parameters=[_ID],
        request=None,
        responses={200: _DETAIL, 404: _NOT_FOUND, 409: _NOT_A_DRAFT},
        examples=[schema.FINALIZED_EXAMPLE, error_example("Not a draft", schema.INVALID_STATE_FINALIZE)],
    )
    @action(detail=True, methods=["post"])
    def finalize(self, request: Request, id: str) -> Response:
        """`draft` -> `finalized`: the invoice is locked and takes the next number of its branch in the
        financial year of its date, e.g. `BLR/2026-27/00042`. Numbers are consecutive per branch and year,
        without gaps or repeats, also under concurrency. Takes no body. 409 `invalid_state` when not a draft.
        Honours `Idempotency-Key`. Scope: `billing:write`."""
        invoice = self._invoice()
        EmptyBody(data=request.data or {}).is_valid(raise_exception=True)
        return Response(self._detail(services.invoice_finalize(invoice=invoice)))

    @extend_schema(
        operation_id="billing_invoices_cancel",
        summary="Cancel an invoice",
        parameters=[_ID],
        request=CancelSerializer,
        responses={
            200: _DETAIL,
            404: _NOT_FOUND,
            409: OpenApiResponse(
                description="`invalid_state` (with `current_status`): partially paid, paid or already cancelled."
            ),
        },
        examples=[
            schema.CANCEL_REQUEST,
            schema.CANCELLED_EXAMPLE,
            error_example("Already paid in part", schema.INVALID_STATE_CANCEL),
        ],
    )
    @action(detail=True, methods=["post"])
    def cancel(self, request: Request, id: str) -> Response:
        """A draft, or a finalized invoice with nothing paid, becomes `cancelled`; `reason` is required. A
        cancelled finalized invoice keeps its number (the series has no gaps). 409 `invalid_state` once anything
        is paid, or when already cancelled. Honours `Idempotency-Key`. Scope: `billing:write`."""
        invoice = self._invoice()
        body = CancelSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        return Response(self._detail(services.invoice_cancel(invoice=invoice, reason=body.validated_data["reason"])))

    @extend_schema(
        operation_id="billing_invoices_payments_create",
        summary="Record a payment",
        parameters=[_ID],
        request=PaymentSerializer,
        responses={
            201: OpenApiResponse(shape(PaymentRecorded), description="The payment and the invoice's new state."),
            400: _INVALID,
            404: _NOT_FOUND,
            409: OpenApiResponse(
                description="`invalid_state` (draft, cancelled or paid; with `current_status`) or `duplicate_payment` "
                "(with `payment_mode` and `reference`)."
            ),
        },
        examples=[
            schema.PAYMENT_REQUEST,
            schema.PAYMENT_EXAMPLE,
            error_example("More than the balance", schema.OVERPAYMENT),
            error_example("Draft invoice", schema.INVALID_STATE_PAYMENT),
            error_example("Duplicate payment", schema.DUPLICATE_PAYMENT),
        ],
    )
    @action(detail=True, methods=["post"])
    def payments(self, request: Request, id: str) -> Response:
        """Records money received against a `finalized` or `partially_paid` invoice. `amount` > 0 and at most
        the balance; `payment_mode` one of cash, card, upi, neft, cheque, online, insurance; `reference`
        required for every mode but cash; `payment_date` defaults to today at the invoice's branch and may not
        be in the future. The invoice becomes `partially_paid`, or `paid` when the balance reaches zero.
        Concurrent payments are applied one at a time against the remaining balance, so they can never exceed
        the total. 409 `invalid_state` for draft, cancelled and paid invoices; 409 `duplicate_payment` for a
        second payment with the same mode and reference on the invoice. Payments cannot be changed or
        reversed. Honours `Idempotency-Key` (a retry with the same key replays the 201 without paying twice).
        Scope: `billing:write`."""
        invoice = self._invoice()
        today = timezone.localtime(timezone.now(), invoice.branch.zone).date()
        body = PaymentSerializer(data=request.data, context={"today": today})
        body.is_valid(raise_exception=True)
        data = body.validated_data
        payment = services.payment_record(
            invoice=invoice,
            amount=data["amount"],
            payment_mode=data["payment_mode"],
            reference=data["reference"],
            payment_date=data.get("payment_date"),
            recorded_by=f"api:{self.api_client.name}",
        )
        return Response(payment_result(payment, payment.invoice), status=201)

    @extend_schema(
        operation_id="billing_credit_notes_list",
        summary="List an invoice's credit notes",
        parameters=[_ID, *pagination_parameters()],
        responses={
            200: OpenApiResponse(shape(CreditNote, many=True), description="A bare JSON array."),
            404: _NOT_FOUND,
        },
        examples=[schema.CREDIT_NOTE_LIST_EXAMPLE],
    )
    @action(detail=True, methods=["get"], url_path="credit-notes")
    def credit_notes(self, request: Request, id: str) -> Response:
        """The invoice's credit notes, oldest first, each with its lines and totals (they also appear in the
        invoice detail). Scope: `billing:read`."""
        invoice = self._invoice()
        pagination = HeaderPagination(request)
        page = pagination.paginate(selectors.credit_note_list(invoice=invoice))
        return pagination.response([credit_note_representation(note, invoice) for note in page])

    @extend_schema(
        operation_id="billing_credit_notes_create",
        summary="Issue a credit note",
        parameters=[_ID, location_header("/api/v1/billing/invoices/{id}/credit-notes/{credit_note_id}")],
        request=CreditNoteSerializer,
        responses={
            201: OpenApiResponse(shape(CreditNoteIssued), description="The credit note and the invoice's new state."),
            400: _INVALID,
            404: _NOT_FOUND,
            409: OpenApiResponse(description="`invalid_state` (with `current_status`): a draft or cancelled invoice."),
        },
        examples=[
            schema.CREDIT_NOTE_REQUEST,
            schema.CREDIT_NOTE_ISSUED_EXAMPLE,
            error_example("More than is left on the line", schema.OVERCREDIT),
            error_example("Draft invoice", schema.INVALID_STATE_CREDIT),
        ],
    )
    @credit_notes.mapping.post
    def credit_notes_create(self, request: Request, id: str) -> Response:
        """Issues a GST credit note against a `finalized`, `partially_paid` or `paid` invoice: `reason` and the
        `lines` to credit, each by `line_id` (a line of this invoice) with `quantity` units, or an `amount` of
        taxable value in rupees, or neither to credit all that is left of the line. Each line's GST is reversed
        at its own rate and split (CGST+SGST or IGST as on the invoice); a line credited in parts never reverses
        more tax than it carried. Numbered per branch per financial year of its date (today at the branch) in
        its own gap-free series: `BLR/CN/2026-27/00001`. The invoice's lines never change; its `credited` and
        `net_total` do, and its status follows the balance (`paid` once nothing is left to collect). A paid
        invoice then credited shows `refund_due` until a refund is recorded. Concurrent credit notes on one
        invoice are applied one at a time and can never credit more than it holds. Credit notes are never
        changed or deleted. 400 names every bad field (`lines.0.amount`); 409 `invalid_state` on drafts and
        cancelled invoices. Honours `Idempotency-Key`. Scope: `billing:write`."""
        invoice = self._invoice()
        body = CreditNoteSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        note = services.credit_note_issue(
            invoice=invoice,
            reason=body.validated_data["reason"],
            lines=body.validated_data["lines"],
            issued_by=f"api:{self.api_client.name}",
        )
        location = f"/api/v1/billing/invoices/{note.invoice_id}/credit-notes/{note.id}"
        return created(credit_note_result(note, note.invoice), location)

    @extend_schema(
        operation_id="billing_credit_notes_retrieve",
        summary="Get a credit note",
        parameters=[_ID, _CREDIT_NOTE_ID],
        responses={
            200: OpenApiResponse(shape(CreditNote), description="The credit note."),
            404: OpenApiResponse(description="`not_found`: unknown invoice or credit note, or not of this invoice."),
        },
        examples=[schema.CREDIT_NOTE_EXAMPLE],
    )
    @action(detail=True, methods=["get"], url_path="credit-notes/<str:credit_note_id>")
    def credit_note(self, request: Request, id: str, credit_note_id: str) -> Response:
        """One credit note of the invoice, with its lines and totals. Scope: `billing:read`."""
        invoice = self._invoice()
        note = selectors.credit_note_get(invoice=invoice, credit_note_id=credit_note_id)
        return Response(credit_note_representation(note, invoice))

    @extend_schema(
        operation_id="billing_invoices_refunds_create",
        summary="Record a refund",
        parameters=[_ID],
        request=RefundSerializer,
        responses={
            201: OpenApiResponse(shape(RefundRecorded), description="The refund and the invoice's new state."),
            400: _INVALID,
            404: _NOT_FOUND,
            409: OpenApiResponse(
                description="`invalid_state` (draft or cancelled; with `current_status`) or `duplicate_refund` "
                "(with `payment_mode` and `reference`)."
            ),
        },
        examples=[
            schema.REFUND_REQUEST,
            schema.REFUND_EXAMPLE,
            error_example("More than was paid", schema.OVERREFUND),
            error_example("Duplicate refund", schema.DUPLICATE_REFUND),
        ],
    )
    @action(detail=True, methods=["post"])
    def refunds(self, request: Request, id: str) -> Response:
        """Records money paid back to the patient: `amount` > 0 and at most what was paid and not yet refunded;
        `payment_mode` and `reference` as for payments (reference required for every mode but cash);
        `refund_date` defaults to today at the branch and may be neither in the future nor before the invoice
        date. Usually it settles the `refund_due` a credit note left on a paid invoice; a refund beyond that
        reopens the balance (the status follows it). Concurrent refunds are applied one at a time and can
        never exceed what was paid. Refunds cannot be changed or reversed. 409 `invalid_state` on drafts and
        cancelled invoices; 409 `duplicate_refund` for a second refund with the same mode and reference.
        Honours `Idempotency-Key`. Scope: `billing:write`."""
        invoice = self._invoice()
        today = timezone.localtime(timezone.now(), invoice.branch.zone).date()
        body = RefundSerializer(data=request.data, context={"today": today})
        body.is_valid(raise_exception=True)
        data = body.validated_data
        refund = services.refund_record(
            invoice=invoice,
            amount=data["amount"],
            payment_mode=data["payment_mode"],
            reference=data["reference"],
            refund_date=data.get("refund_date"),
            recorded_by=f"api:{self.api_client.name}",
        )
        return Response(refund_result(refund, refund.invoice), status=201)


class SummaryViewSet(ClinicViewSet[None]):
    # Registered at `billing` with the one list-level action `summary`: the path billing/summary and the
    # URL name billing-summary, which a `list` (billing-summary-list) would not give.
    required_scopes = {"summary": "billing:read"}
    query_params = {"summary": (SummaryParams,)}

    @extend_schema(
        operation_id="billing_summary",
        summary="Financial summary",
        responses={200: shape(FinancialSummary)},
        examples=[schema.SUMMARY_EXAMPLE],
    )
    @action(detail=False, methods=["get"])
    def summary(self, request: Request) -> Response:
        """Over invoices dated in [`date_from`, `date_to`] (both required, inclusive) at the branches the client
        may see, or at `branch_id`. Drafts and cancelled invoices are not billed. `total_billed`: sum of grand
        totals; `total_outstanding`: sum of their balances as they stand now; `total_collected` and
        `collection_by_mode`: payments dated in the range (cash received in the period, whatever the date of
        the invoice they settle), every mode listed; `revenue_by_department`: taxable amounts of the billed
        lines by department name. Computed by SQL aggregation, exact to the paisa. Scope: `billing:read`."""
        params = SummaryParams(data=request.query_params, context={"client": self.api_client})
        params.is_valid(raise_exception=True)
        figures = selectors.billing_summary(client=self.api_client, **params.validated_data)
        return Response(financial_summary(figures))
