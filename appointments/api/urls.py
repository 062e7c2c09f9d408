from rest_framework.routers import SimpleRouter

from appointments.api.viewsets import AppointmentViewSet
from clinic.api.viewsets import ClinicRouter


class _PathRouter(ClinicRouter):
    """ClinicRouter with Django path() routes instead of regexes: the audit rows record the matched route and
    keep today's (`api/v1/appointments/<str:id>`, not `api/v1/appointments/(?P<id>[^/]+)$`). Belongs in
    ClinicRouter itself (with `lookup_value_converter = "str"` on ClinicViewSet) once every app is on it."""

    def __init__(self) -> None:
        SimpleRouter.__init__(self, trailing_slash=False, use_regex_path=False)


router = _PathRouter()
router.register("appointments", AppointmentViewSet, basename="appointment")

urlpatterns = router.urls
