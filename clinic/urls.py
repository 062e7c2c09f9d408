from django.contrib import admin
from django.urls import include, path, re_path
from drf_spectacular.views import SpectacularSwaggerSplitView

from clinic.api import meta_views
from clinic.api.errors import api_not_found
from clinic.api.organisation import BranchViewSet, DoctorViewSet
from clinic.api.schema_views import RedocView, SchemaView
from clinic.api.viewsets import ClinicRouter
from integrations.clients.oauth import RevokeTokenView, TokenView
from integrations.fhir.views import fhir_not_found

organisation = ClinicRouter()
organisation.register("branches", BranchViewSet, basename="branch")  # branch-list
organisation.register("doctors", DoctorViewSet, basename="doctor")  # doctor-list, doctor-detail

api_v1 = [
    path("auth/token", TokenView.as_view(), name="auth-token"),
    path("auth/revoke", RevokeTokenView.as_view(), name="auth-revoke"),
    *organisation.urls,
    path("schema", SchemaView.as_view(), name="schema"),
    path("docs", SpectacularSwaggerSplitView.as_view(url_name="schema"), name="docs"),
    path("redoc", RedocView.as_view(url_name="schema"), name="redoc"),
    path("problems/<str:code>", meta_views.problem_kind, name="problem-kind"),
    path("", include("patients.api.urls")),
    path("", include("appointments.api.urls")),
    path("", include("billing.api.urls")),
    path("", include("lab.api.urls")),
    path("", include("pharmacy.api.urls")),
    path("", include("emr.api.urls")),
    path("", include("integrations.webhooks.api.urls")),
]

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/v1/", include(api_v1)),
    path("fhir/R4/", include("integrations.fhir.urls")),
    re_path(r"^fhir/", fhir_not_found),
    path("healthz", meta_views.healthz, name="healthz"),
    path("readyz", meta_views.readyz, name="readyz"),
    # Anything else under /api/ is a problem+json 404, whatever DEBUG says.
    re_path(r"^api/", api_not_found),
]

handler404 = "clinic.api.errors.handler404"
handler500 = "clinic.api.errors.handler500"
