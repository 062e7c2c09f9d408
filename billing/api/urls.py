from billing.api.viewsets import InvoiceViewSet, SummaryViewSet
from clinic.api.viewsets import ClinicRouter

router = ClinicRouter()
# invoice-list, invoice-detail, invoice-finalize, invoice-cancel, invoice-payments
router.register("billing/invoices", InvoiceViewSet, basename="invoice")
# billing-summary (the list-level action `summary`)
router.register("billing", SummaryViewSet, basename="billing")

urlpatterns = router.urls
