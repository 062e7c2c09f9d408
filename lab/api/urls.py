from django.urls import path

from clinic.api.viewsets import ClinicRouter
from lab.api.catalogue import LabTestViewSet
from lab.api.documents import LabReportViewSet
from lab.api.viewsets import LabOrderViewSet

router = ClinicRouter()
router.register("lab/tests", LabTestViewSet, basename="labtest")  # labtest-list
# laborder-list, laborder-detail, laborder-collect, laborder-cancel
router.register("lab/orders", LabOrderViewSet, basename="laborder")

urlpatterns = [
    # The printable report, before the router's routes: `lab/orders/<str:id>` would take `{id}.pdf` too.
    path(
        "lab/orders/<str:id>.pdf",
        LabReportViewSet.as_view({"get": "report_pdf"}, name="Lab Report PDF"),
        name="laborder-pdf",
    ),
    *router.urls,
]
