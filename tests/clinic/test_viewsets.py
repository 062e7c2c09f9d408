"""The base ViewSet: a detail action reads its object through the resource's client-taking selector (404 for
another branch's), the object's patients are audited there, a patient-data answer that named no patient
fails loudly, and OPTIONS, the route names and the per-method declarations are those of the plain views
before it. The URLconf below registers test-only ViewSets next to the project's URLs."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from clinic.api.viewsets import ClinicRouter, ClinicViewSet
from clinic.urls import urlpatterns as project_urlpatterns
from integrations.models import AuditLogEntry
from patients.models import Patient
from patients.selectors import patient_get
from tests.factories import BranchFactory
from tests.helpers import bearer
from tests.patients.factories import PatientFactory

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.clinic.test_viewsets")]


class RecordViewSet(ClinicViewSet[Patient]):
    required_scopes = {"list": "patients:read", "retrieve": "patients:read", "forget": "patients:read"}
    patient_data = True
    selector = staticmethod(patient_get)

    def patients_of(self, found: Patient) -> list[Any]:
        return [found.id]

    def list(self, request: Request) -> Response:
        self.audit_patients([])
        return Response([])

    def retrieve(self, request: Request, id: str) -> Response:
        return Response({"patient_id": self.get_object().patient_id})

    @action(detail=True, methods=["post"], url_path="forget")
    def forget(self, request: Request, id: str) -> Response:
        return Response({"id": id})  # answers patient data without naming the patient


class UnselectableViewSet(ClinicViewSet[Patient]):
    required_scopes = {"retrieve": "patients:read"}

    def retrieve(self, request: Request, id: str) -> Response:
        return Response(self.get_object())


router = ClinicRouter()
router.register("api/v1/test/records", RecordViewSet, basename="record")
router.register("api/v1/test/unselectable", UnselectableViewSet, basename="unselectable")
urlpatterns = [*router.urls, *project_urlpatterns]


@pytest.fixture
def home() -> Any:
    return BranchFactory(code="BLR")


@pytest.fixture
def token(home: Any, token_for: Any) -> str:
    return token_for(["patients:read"], branches=[home])


def audit_row(response: Any) -> AuditLogEntry:
    return AuditLogEntry.objects.get(request_id=response["X-Request-ID"])


def test_a_detail_action_reads_through_the_selector_and_audits_the_patient(client, home, token):
    patient = PatientFactory(registration_branch=home)

    response = client.get(f"/api/v1/test/records/{patient.patient_id.lower()}", **bearer(token))

    assert (response.status_code, response.json()) == (200, {"patient_id": patient.patient_id})
    assert audit_row(response).patient_ids == [patient.id]
    assert audit_row(response).route == "api/v1/test/records/<str:id>"


@pytest.mark.parametrize("ref", ["other", "PAT-999999", "not-a-ref"])
def test_another_branchs_object_is_the_same_404_as_an_unknown_one_and_audits_nothing(client, token, ref):
    other = PatientFactory(registration_branch=BranchFactory(code="MUM"))
    ref = other.patient_id if ref == "other" else ref

    response = client.get(f"/api/v1/test/records/{ref}", **bearer(token))

    assert response.status_code == 404
    assert response.json()["code"] == "not_found"
    assert audit_row(response).patient_ids == []


def test_an_answer_of_patient_data_that_named_no_patient_fails_loudly(client, home, token, caplog):
    patient = PatientFactory(registration_branch=home)

    response = client.post(f"/api/v1/test/records/{patient.id}/forget", "{}", "application/json", **bearer(token))

    assert (response.status_code, response.json()["code"]) == (500, "internal_error")
    assert "RecordViewSet.forget answered patient data without audit_patients()." in caplog.text


def test_get_object_without_a_selector_fails_loudly(client, home, token, caplog):
    response = client.get("/api/v1/test/unselectable/x", **bearer(token))

    assert (response.status_code, response.json()["code"]) == (500, "internal_error")
    assert "UnselectableViewSet declares no selector for get_object()." in caplog.text


def test_options_takes_the_scope_of_the_paths_get_and_answers_as_the_plain_views_did(client, token, token_for):
    list_options = client.options("/api/v1/test/records", **bearer(token))
    detail_options = client.options("/api/v1/test/records/x", **bearer(token))
    action_options = client.options("/api/v1/test/records/x/forget", **bearer(token))
    without_scope = client.options("/api/v1/test/records", **bearer(token_for(["billing:read"])))

    assert (list_options.status_code, list_options["Allow"]) == (200, "GET, HEAD, OPTIONS")
    assert list_options.json() == {
        "name": "Record List",
        "description": "",
        "renders": ["application/json"],
        "parses": ["application/json"],
    }
    assert (detail_options.status_code, detail_options.json()["name"]) == (200, "Record Detail")
    assert (action_options.status_code, action_options["Allow"]) == (405, "POST, OPTIONS")
    assert (without_scope.status_code, without_scope.json()["code"]) == (403, "insufficient_scope")


def test_each_route_declares_its_query_parameters_by_method_as_well():
    from clinic.api.pagination import PageParams
    from patients.api.serializers import PatientListParams
    from patients.api.urls import urlpatterns

    by_name = {pattern.name: pattern.callback.cls for pattern in urlpatterns}

    assert by_name["patient-list"].query_params["GET"] == (PageParams, PatientListParams)
    assert "GET" not in by_name["patient-detail"].query_params
    assert by_name["patient-detail"].__name__ == "PatientViewSet"
