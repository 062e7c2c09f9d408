"""Downloading a Bulk Data file needs the scope of its resource type (a token of the same client narrowed to
patients:read gets the Patient file, not the Observation or Condition file), and leaves an audit row naming
the patients in that file, from the list the worker wrote beside it (the download does not read the file)."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from django.test import Client

from integrations.clients.models import AuditLogEntry
from integrations.fhir import services
from integrations.fhir.models import ExportJob
from tests.emr.world import RecordWorld
from tests.helpers import bearer
from tests.integrations.fhir.conftest import ALL_READ
from tests.integrations.fhir.helpers import assert_outcome, fhir_get
from tests.patients.factories import PatientFactory

pytestmark = pytest.mark.django_db
ASYNC = {"HTTP_PREFER": "respond-async", "HTTP_ACCEPT": "application/fhir+json"}
BASE = "http://testserver/fhir/R4/"


@pytest.fixture(autouse=True)
def _export_dir(settings: Any, tmp_path: Any) -> None:
    settings.FHIR_EXPORT_DIR = tmp_path / "exports"


def _completed_export(token: str, query: str = "$export") -> dict[str, str]:
    """Kick off, run the job as the worker does, and return {type: file path} from the manifest."""
    kick_off = fhir_get(token, query, **ASYNC)
    assert kick_off.status_code == 202, kick_off.content
    status = kick_off["Content-Location"].removeprefix(BASE)
    services.export_job_run(job_id=uuid.UUID(status.rpartition("/")[2]))
    manifest = fhir_get(token, status)
    assert manifest.status_code == 200, manifest.content
    return {entry["type"]: entry["url"].removeprefix(BASE) for entry in manifest.json()["output"]}


def _audited(response: Any) -> list[uuid.UUID]:
    return AuditLogEntry.objects.get(request_id=response["X-Request-ID"]).patient_ids


def _ndjson(response: Any) -> list[dict[str, Any]]:
    return [json.loads(line) for line in b"".join(response.streaming_content).decode().splitlines()]


def test_a_token_narrowed_to_patients_read_gets_the_patient_file_only(
    world: RecordWorld, api_client_factory: Any, issue_token: Any
) -> None:
    client = api_client_factory(scopes=ALL_READ, branches=[world.blr])
    files = _completed_export(issue_token(client))
    narrowed = issue_token(client, scope="patients:read")

    patient = fhir_get(narrowed, files["Patient"])
    observation = fhir_get(narrowed, files["Observation"])
    condition = fhir_get(narrowed, files["Condition"])

    assert patient.status_code == 200
    assert [resource["id"] for resource in _ndjson(patient)] == [str(world.patient.id)]
    assert _audited(patient) == [world.patient.id]
    assert assert_outcome(observation, 403, "forbidden") == "This operation requires the scope lab:read."
    assert observation["WWW-Authenticate"].endswith('error="insufficient_scope", scope="lab:read"')
    assert assert_outcome(condition, 403, "forbidden") == "This operation requires the scope emr:read."
    assert (_audited(observation), _audited(condition)) == ([], [])  # a refused download showed nobody


def test_every_file_download_names_the_patients_in_it(world: RecordWorld, token_for: Any) -> None:
    token = token_for(ALL_READ)  # every branch: MUM's visit and order are the same patient's
    files = _completed_export(token)

    audited = {name: _audited(fhir_get(token, path)) for name, path in files.items()}

    patient_types = {"Patient", "Encounter", "Condition", "AllergyIntolerance", "MedicationRequest"} | {
        "MedicationDispense",
        "ServiceRequest",
        "Observation",
        "DiagnosticReport",
    }
    assert audited == {
        **{name: [world.patient.id] for name in patient_types},
        "Practitioner": [],
        "Organization": [],
        "Location": [],
    }
    job = ExportJob.objects.get()
    assert {entry["type"]: entry["patients"] for entry in job.output} == {name: f"{name}.patients" for name in files}


def test_the_audit_names_each_patient_of_the_file_once_in_the_order_written(world: RecordWorld, token_for: Any) -> None:
    others = [PatientFactory(registration_branch=world.blr) for _ in range(3)]
    token = token_for(["patients:read"])
    files = _completed_export(token, "$export?_type=Patient")

    response = fhir_get(token, files["Patient"])

    written = [uuid.UUID(resource["id"]) for resource in _ndjson(response)]
    assert sorted(written) == sorted([world.patient.id, *(other.id for other in others)])
    assert _audited(response) == written


def test_the_download_reads_the_workers_patient_list_not_the_file(world: RecordWorld, token_for: Any) -> None:
    token = token_for(ALL_READ)
    files = _completed_export(token, "$export?_type=Patient,Observation")
    job = ExportJob.objects.get()
    someone = uuid.uuid4()
    (services.export_dir(job.id) / "Observation.patients").write_text(f"{someone}\n{someone}\n")

    response = fhir_get(token, files["Observation"])

    assert response.status_code == 200
    assert _audited(response) == [someone]


def test_a_file_without_a_patient_list_is_410_and_is_not_handed_out(world: RecordWorld, token_for: Any) -> None:
    """A job written before the lists existed: its file cannot be audited, so it is not served."""
    token = token_for(ALL_READ)
    files = _completed_export(token, "$export?_type=Patient")
    job = ExportJob.objects.get()
    ExportJob.objects.filter(pk=job.pk).update(output=[{"type": "Patient", "file": "Patient.ndjson", "count": 1}])

    response = fhir_get(token, files["Patient"])

    assert_outcome(response, 410, "deleted")
    assert _audited(response) == []


def test_an_emr_read_token_downloads_the_lab_and_medication_files(
    world: RecordWorld, api_client_factory: Any, issue_token: Any
) -> None:
    client = api_client_factory(scopes=ALL_READ)
    record_reader = issue_token(client, scope="patients:read emr:read")
    files = _completed_export(record_reader, "$export?_type=Patient,Observation,MedicationRequest")

    statuses = {name: fhir_get(record_reader, path).status_code for name, path in files.items()}

    assert statuses == {"Patient": 200, "Observation": 200, "MedicationRequest": 200}


def test_another_clients_token_gets_404_and_no_audit_of_patients(world: RecordWorld, token_for: Any) -> None:
    files = _completed_export(token_for(ALL_READ))

    response = Client().get(f"/fhir/R4/{files['Observation']}", **bearer(token_for(ALL_READ)))

    assert_outcome(response, 404, "not-found")
    assert _audited(response) == []
