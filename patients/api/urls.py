from django.urls import path

from patients.api.views import PatientDetailView, PatientListCreateView

urlpatterns = [
    path("patients", PatientListCreateView.as_view(), name="patient-list"),
    path("patients/<str:id>", PatientDetailView.as_view(), name="patient-detail"),
]
