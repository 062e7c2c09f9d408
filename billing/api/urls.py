from rest_framework.routers import SimpleRouter

from billing.api.viewsets import InvoiceViewSet, SummaryViewSet
from clinic.api.viewsets import ClinicRouter


class _Router(ClinicRouter):
    # Django path() routes (billing/invoices/<str:id>), not regexes: the audit log's `route` column names
    # each operation as before the ViewSets. Every app needs this, so it belongs in ClinicRouter.
    def __init__(self) -> None:
        SimpleRouter.__init__(self, trailing_slash=False, use_regex_path=False)


router = _Router()
# invoice-list, invoice-detail, invoice-finalize, invoice-cancel, invoice-payments
router.register("billing/invoices", InvoiceViewSet, basename="invoice")
# billing-summary (the list-level action `summary`)
router.register("billing", SummaryViewSet, basename="billing")

urlpatterns = router.urls
