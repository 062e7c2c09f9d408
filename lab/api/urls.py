from clinic.api.viewsets import ClinicRouter
from lab.api.catalogue import LabTestViewSet

router = ClinicRouter()
router.register("lab/tests", LabTestViewSet, basename="labtest")  # labtest-list

urlpatterns = [*router.urls]
