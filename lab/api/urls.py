from clinic.api.viewsets import ClinicRouter
from lab.api.viewsets import LabOrderViewSet

router = ClinicRouter()
# laborder-list, laborder-detail, laborder-collect, laborder-cancel
router.register("lab/orders", LabOrderViewSet, basename="laborder")

urlpatterns = router.urls
