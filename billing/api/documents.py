"""The printable GST documents (docs/api-rules.md §12): GET /api/v1/billing/invoices/{id}.pdf and
GET /api/v1/billing/invoices/{id}/credit-notes/{credit_note_id}.pdf.

The PDF is built whole in memory (billing.document_pdf) before the response exists: a document that cannot be
rendered is the API's 500 problem (with a log line from the exception handler), never a part of a file.
Branch restriction, scope and the patient-data audit are ClinicViewSet's, as for the invoice detail;
Cache-Control: no-store is set on every API answer (clinic.security_headers) and here again.
"""

from __future__ import annotations

from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import renderers
from rest_framework.request import Request

from billing import selectors
from billing.document_pdf import pdf_response
from billing.documents import credit_note_document, credit_note_of, invoice_document
from billing.models import Invoice
from clinic.api.renderers import as_accepted, pdf_responses, printed_document_renderers
from clinic.api.viewsets import ClinicViewSet
from integrations.models import ApiClient


def invoice_pdf_response(invoice: Invoice) -> HttpResponse:
    """The tax invoice of an invoice loaded with billing.selectors.invoice_get(..., detail=True)."""
    return pdf_response(invoice_document(invoice))


def _invoice_with_detail(*, client: ApiClient, ref: str) -> Invoice:
    return selectors.invoice_get(client=client, invoice_id=ref, detail=True)


_ID = OpenApiParameter("id", str, OpenApiParameter.PATH, description="Invoice UUID.")
_CREDIT_NOTE_ID = OpenApiParameter("credit_note_id", str, OpenApiParameter.PATH, description="Credit note UUID.")
_FILENAME = OpenApiParameter(
    "Content-Disposition",
    OpenApiTypes.STR,
    location=OpenApiParameter.HEADER,
    response=[200],
    required=True,
    description='`inline; filename="BLR-2026-27-00042.pdf"`: the number with `/` as `-` (`draft-<id>.pdf` for a '
    "draft).",
)


class InvoiceDocumentViewSet(ClinicViewSet[Invoice]):
    """Routed by hand in billing.api.urls: a `.pdf` path is no route a router makes."""

    patient_data = True
    selector = staticmethod(_invoice_with_detail)
    required_scopes = {"invoice_pdf": "billing:read", "credit_note_pdf": "billing:read"}

    def get_renderers(self) -> list[renderers.BaseRenderer]:
        return printed_document_renderers(self.request)

    @extend_schema(
        operation_id="billing_invoices_pdf",
        summary="Print an invoice (PDF)",
        parameters=[_ID, _FILENAME],
        responses={
            **pdf_responses("The GST tax invoice, A4."),
            404: OpenApiResponse(
                description="`not_found`: unknown id, or an invoice at a branch the client may not see."
            ),
        },
    )
    def invoice_pdf(self, request: Request, id: str) -> HttpResponse:
        """The GST tax invoice as a PDF: supplier (the branch) with its address, GSTIN and state code, invoice
        number and date, the patient, the place of supply with its state code, each line with its HSN/SAC,
        GST rate and CGST and SGST (or IGST), the totals, the grand total in figures and in words (Indian
        numbering: lakh, crore), the HSN/SAC summary, payments, credit notes and refunds, and the balance
        (with credited, net total and refund due when there are any). A draft is titled "DRAFT - NOT A TAX
        INVOICE"; a cancelled invoice is marked CANCELLED. Also served by the invoice detail for `Accept:
        application/pdf`. Scope: `billing:read`."""
        return as_accepted(request, invoice_pdf_response(self.get_object()))

    @extend_schema(
        operation_id="billing_credit_notes_pdf",
        summary="Print a credit note (PDF)",
        parameters=[_ID, _CREDIT_NOTE_ID, _FILENAME],
        responses={
            **pdf_responses("The GST credit note, A4."),
            404: OpenApiResponse(
                description="`not_found`: unknown invoice, one at a branch the client may not see, or no such credit "
                "note on this invoice."
            ),
        },
    )
    def credit_note_pdf(self, request: Request, id: str, credit_note_id: str) -> HttpResponse:
        """A credit note of the invoice as a PDF, in the tax invoice's layout: its number and date, the
        original invoice's number and date, the reason, the lines credited with their HSN/SAC and the tax
        reversed, the HSN/SAC summary and the total in figures and in words. Scope: `billing:read`."""
        invoice = _invoice_with_detail(client=self.api_client, ref=id)
        credit_note = credit_note_of(invoice, credit_note_id)
        self.audit_patients([invoice.patient_id])
        return as_accepted(request, pdf_response(credit_note_document(credit_note, invoice)))
