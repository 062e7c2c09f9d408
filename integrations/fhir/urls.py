"""/fhir/R4/...: the CapabilityStatement and the SMART discovery document, read and search per resource type,
Patient $everything, and Bulk Data $export with its status and file paths. Any other path under /fhir/ is a
404 OperationOutcome."""

from django.urls import path, re_path

from integrations.fhir import export_views, smart, views

urlpatterns = [
    path("metadata", views.MetadataView.as_view(), name="fhir-metadata"),
    path(".well-known/smart-configuration", smart.smart_configuration_view, name="fhir-smart-configuration"),
    path("$export", export_views.ExportKickoffView.as_view(), name="fhir-export"),
    path("Patient/$export", export_views.PatientExportKickoffView.as_view(), name="fhir-patient-export"),
    path("$export-status/<str:id>", export_views.ExportStatusView.as_view(), name="fhir-export-status"),
    path("$export-file/<str:id>/<str:name>", export_views.ExportFileView.as_view(), name="fhir-export-file"),
    path("Patient/<str:id>/$everything", views.EverythingView.as_view(), name="fhir-everything"),
    path("Slot", views.SlotSearchView.as_view(), name="fhir-Slot-search"),
    path("Slot/<str:id>", views.SlotReadView.as_view(), name="fhir-Slot-read"),
]
for _name in views.RESOURCE_TYPES:
    urlpatterns += [
        path(_name, views.SEARCH_VIEWS[_name], name=f"fhir-{_name}-search"),
        path(f"{_name}/<str:id>", views.READ_VIEWS[_name], name=f"fhir-{_name}-read"),
    ]
urlpatterns.append(re_path(r"^.*$", views.fhir_not_found))
