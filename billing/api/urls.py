from django.urls import path

from billing.api.documents import InvoiceDocumentViewSet
from billing.api.viewsets import InvoiceViewSet, SummaryViewSet
from clinic.api.viewsets import ClinicRouter

router = ClinicRouter()
# invoice-list, invoice-detail, invoice-finalize, invoice-cancel, invoice-payments
router.register("billing/invoices", InvoiceViewSet, basename="invoice")
# billing-summary (the list-level action `summary`)
router.register("billing", SummaryViewSet, basename="billing")

# The printable documents, before the router's routes: `billing/invoices/<str:id>` would take `{id}.pdf` too.
documents = [
    path(
        "billing/invoices/<str:id>.pdf",
        InvoiceDocumentViewSet.as_view({"get": "invoice_pdf"}, name="Invoice PDF"),
        name="invoice-pdf",
    ),
    path(
        "billing/invoices/<str:id>/credit-notes/<str:credit_note_id>.pdf",
        InvoiceDocumentViewSet.as_view({"get": "credit_note_pdf"}, name="Credit Note PDF"),
        name="invoice-credit-note-pdf",
    ),
]

urlpatterns = [*documents, *router.urls]
