from clinic.api.viewsets import ClinicRouter
from patients.api.viewsets import PatientViewSet

router = ClinicRouter()
router.register("patients", PatientViewSet, basename="patient")  # patient-list, patient-detail

urlpatterns = router.urls
