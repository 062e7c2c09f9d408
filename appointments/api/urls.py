from appointments.api.viewsets import AppointmentViewSet
from clinic.api.viewsets import ClinicRouter

router = ClinicRouter()
router.register("appointments", AppointmentViewSet, basename="appointment")

urlpatterns = router.urls
