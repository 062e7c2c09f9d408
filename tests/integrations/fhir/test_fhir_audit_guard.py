"""The FHIR views stand under the REST API's audit guard (clinic.api.views.AuditGuardedView): a FHIR view of
patient data whose 2xx named no patient fails loudly, a view of no patient data needs no audit, and the
project's own FHIR views name the patients they showed. The URLconf below adds test-only views next to
the project's URLs."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.urls import path
from rest_framework.request import Request

from clinic.urls import urlpatterns as project_urlpatterns
from integrations.clients.models import AuditLogEntry
from integrations.fhir.export_views import ExportFileView
from integrations.fhir.registry import OBSERVATION, PRACTITIONER
from integrations.fhir.views import FhirView, ReadView, SearchView, fhir_response
from tests.emr.world import RecordWorld
from tests.integrations.fhir.conftest import ALL_READ
from tests.integrations.fhir.helpers import fhir_get

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.integrations.fhir.test_fhir_audit_guard")]


class ForgetfulObservationRead(ReadView):
    """Reads an Observation and forgets to name its patient."""

    resource = OBSERVATION
    required_scopes = {"GET": OBSERVATION.scope}

    def get(self, request: Request, id: str) -> Any:
        row = self.resource.rows(self.api_client).get(pk=id)
        return fhir_response(self.resource.to_fhir(row))


class PractitionerCount(SearchView):
    """A view of no patient data answers without an audit of patients."""

    resource = PRACTITIONER
    required_scopes = {"GET": PRACTITIONER.scope}

    def get(self, request: Request) -> Any:
        return fhir_response({"resourceType": "Bundle", "type": "searchset", "total": 0})


class ForgetfulDownload(FhirView):
    """A plain FHIR view that declares patient data (as the export files do) and names nobody."""

    required_scopes = {"GET": "patients:read"}
    patient_data = True

    def get(self, request: Request) -> Any:
        return fhir_response({"resourceType": "Bundle", "type": "collection"})


urlpatterns = [
    path("fhir/R4/test/forgetful/<str:id>", ForgetfulObservationRead.as_view()),
    path("fhir/R4/test/practitioners", PractitionerCount.as_view()),
    path("fhir/R4/test/download", ForgetfulDownload.as_view()),
    *project_urlpatterns,
]


def _audited(response: Any) -> list[Any]:
    return AuditLogEntry.objects.get(request_id=response["X-Request-ID"]).patient_ids


def test_a_fhir_read_of_patient_data_that_named_no_patient_fails_loudly(world: RecordWorld, token_for: Any) -> None:
    token = token_for(ALL_READ)
    observation = fhir_get(token, "Observation").json()["entry"][0]["resource"]["id"]

    with pytest.raises(ImproperlyConfigured, match=r"^ForgetfulObservationRead.get answered patient data without"):
        fhir_get(token, f"test/forgetful/{observation}")


def test_any_fhir_view_declaring_patient_data_is_guarded(world: RecordWorld, token_for: Any) -> None:
    with pytest.raises(ImproperlyConfigured, match=r"^ForgetfulDownload.get answered patient data without"):
        fhir_get(token_for(ALL_READ), "test/download")


def test_a_fhir_view_of_no_patient_data_needs_no_audit(world: RecordWorld, token_for: Any) -> None:
    response = fhir_get(token_for(ALL_READ), "test/practitioners")

    assert response.status_code == 200
    assert _audited(response) == []


def test_the_export_file_view_declares_patient_data() -> None:
    assert ExportFileView.patient_data is True


@pytest.mark.parametrize(
    "name",
    [
        *("Patient", "Encounter", "Condition", "AllergyIntolerance", "MedicationRequest", "MedicationDispense"),
        *("ServiceRequest", "Observation", "DiagnosticReport", "Appointment"),
    ],
)
def test_the_projects_fhir_searches_and_reads_name_the_patients_they_showed(
    world: RecordWorld, token_for: Any, name: str
) -> None:
    token = token_for(ALL_READ, branches=[world.blr])
    search = fhir_get(token, name)
    empty = fhir_get(token, f"{name}?_id=00000000-0000-0000-0000-000000000000")
    found = [entry["resource"] for entry in search.json().get("entry", [])]

    assert (search.status_code, empty.status_code) == (200, 200)
    assert _audited(search) == ([world.patient.id] if found else [])
    assert _audited(empty) == []
    if found:
        read = fhir_get(token, f"{name}/{found[0]['id']}")
        assert (read.status_code, _audited(read)) == (200, [world.patient.id])
