from clinic.api.viewsets import ClinicRouter
from lab.api.catalogue import LabTestViewSet
from lab.api.viewsets import LabOrderViewSet

router = ClinicRouter()
router.register("lab/tests", LabTestViewSet, basename="labtest")  # labtest-list
# laborder-list, laborder-detail, laborder-collect, laborder-cancel
router.register("lab/orders", LabOrderViewSet, basename="laborder")

urlpatterns = [*router.urls]
