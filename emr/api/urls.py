from django.urls import path

from emr.api.viewsets import ClinicalRecordViewSet

urlpatterns = [
    path(
        "patients/<str:id>/record",
        ClinicalRecordViewSet.as_view({"get": "record"}, name="Clinical Record"),
        name="patient-record",
    ),
]
