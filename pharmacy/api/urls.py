from clinic.api.viewsets import ClinicRouter
from pharmacy.api.viewsets import DispenseViewSet, DrugViewSet, PrescriptionViewSet, StockViewSet

router = ClinicRouter()
router.register("pharmacy/drugs", DrugViewSet, basename="drug")  # drug-list
router.register("pharmacy/stock", StockViewSet, basename="stock")  # stock-list, stock-receipts, stock-adjustments
# prescription-list, prescription-detail, prescription-cancel
router.register("pharmacy/prescriptions", PrescriptionViewSet, basename="prescription")
# dispense-list, dispense-detail, dispense-returns
router.register("pharmacy/dispenses", DispenseViewSet, basename="dispense")

urlpatterns = router.urls
