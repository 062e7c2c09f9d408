"""Bulk Data $export (FHIR Bulk Data Access IG): kick-off 202 with Content-Location, status polling 202 then
the manifest, NDJSON files per type that validate as R4, cancellation, expiry, scopes and branches."""

from __future__ import annotations

import json
import uuid
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from integrations.fhir import r4, services
from integrations.fhir.models import ExportJob
from tests.emr.world import RecordWorld
from tests.helpers import bearer
from tests.integrations.fhir.conftest import ALL_READ
from tests.integrations.fhir.helpers import assert_outcome, fhir_get

pytestmark = pytest.mark.django_db
ASYNC = {"HTTP_PREFER": "respond-async", "HTTP_ACCEPT": "application/fhir+json"}


@pytest.fixture(autouse=True)
def _export_dir(settings: Any, tmp_path: Any) -> None:
    settings.FHIR_EXPORT_DIR = tmp_path / "exports"


def _kick_off(token: str, path: str, capture: Any) -> tuple[Any, list[Any]]:
    with capture(execute=False) as callbacks:
        response = fhir_get(token, path, **ASYNC)
    return response, callbacks


def _status_path(response: Any) -> str:
    assert response.status_code == 202, response.content
    url = response["Content-Location"]
    assert url.startswith("http://testserver/fhir/R4/$export-status/")
    return url.removeprefix("http://testserver/fhir/R4/")


def _run(status_path: str) -> None:
    services.export_job_run(job_id=uuid.UUID(status_path.rpartition("/")[2]))


def _lines(token: str, url: str) -> list[dict[str, Any]]:
    response = fhir_get(token, url.removeprefix("http://testserver/fhir/R4/"))
    assert response.status_code == 200
    assert response["Content-Type"] == "application/fhir+ndjson"
    return [json.loads(line) for line in b"".join(response.streaming_content).decode().splitlines()]


def test_system_export_runs_to_a_manifest_of_valid_ndjson_files(
    world: RecordWorld, token_for: Any, django_capture_on_commit_callbacks: Any
) -> None:
    token = token_for(ALL_READ, branches=[world.blr])

    response, callbacks = _kick_off(token, "$export", django_capture_on_commit_callbacks)
    status = _status_path(response)
    assert len(callbacks) == 1  # the job goes to the worker after commit
    queued = fhir_get(token, status)
    _run(status)
    done = fhir_get(token, status)

    assert (queued.status_code, queued["X-Progress"], queued["Retry-After"]) == (202, "queued", "5")
    assert done.status_code == 200, done.content
    manifest = done.json()
    job = ExportJob.objects.get()
    assert manifest["requiresAccessToken"] is True
    assert manifest["request"] == "http://testserver/fhir/R4/$export"
    assert manifest["error"] == []
    assert done["Expires"]
    counts = {entry["type"]: entry["count"] for entry in manifest["output"]}
    assert counts == {
        "Patient": 1,
        "Practitioner": 1,
        "Organization": 1,
        "Location": 1,
        "Encounter": 2,
        "Condition": 2,
        "AllergyIntolerance": 1,
        "MedicationRequest": 1,
        "MedicationDispense": 1,
        "ServiceRequest": 2,
        "Observation": 1,
        "DiagnosticReport": 2,
    }
    for entry in manifest["output"]:
        resources = _lines(token, entry["url"])
        assert len(resources) == entry["count"]
        for resource in resources:
            assert resource["resourceType"] == entry["type"]
            r4.validate(resource)
    # Branch restriction: nothing of MUM (its visit, its order) is in any file.
    assert str(world.mum_visit.id) not in json.dumps([_lines(token, entry["url"]) for entry in manifest["output"]])
    assert job.status == ExportJob.Status.COMPLETED


def test_patient_export_with_type_and_since(
    world: RecordWorld, token_for: Any, django_capture_on_commit_callbacks: Any
) -> None:
    token = token_for(ALL_READ)
    since = (timezone.now() + timedelta(days=1)).isoformat().replace("+00:00", "Z")

    typed, _ = _kick_off(token, "Patient/$export?_type=Patient,Condition", django_capture_on_commit_callbacks)
    later, _ = _kick_off(token, f"Patient/$export?_since={since}", django_capture_on_commit_callbacks)
    _run(_status_path(typed))
    _run(_status_path(later))

    assert [entry["type"] for entry in fhir_get(token, _status_path(typed)).json()["output"]] == [
        "Patient",
        "Condition",
    ]
    assert fhir_get(token, _status_path(later)).json()["output"] == []


def test_kick_off_needs_every_scope_the_types_need(
    world: RecordWorld, token_for: Any, django_capture_on_commit_callbacks: Any
) -> None:
    partial = token_for(["patients:read", "emr:read"])

    everything, _ = _kick_off(partial, "$export", django_capture_on_commit_callbacks)
    narrowed, _ = _kick_off(partial, "$export?_type=Patient,Encounter", django_capture_on_commit_callbacks)

    assert_outcome(everything, 403, "forbidden")
    # emr:read reads the lab and medication types too (docs/fhir.md section 1): only appointments:read is missing.
    assert everything["WWW-Authenticate"].endswith('scope="appointments:read"')
    assert narrowed.status_code == 202
    assert ExportJob.objects.count() == 1


@pytest.mark.parametrize(
    ("query", "headers", "expression"),
    [
        ("$export", {"HTTP_ACCEPT": "application/fhir+json"}, None),
        ("$export?_type=Nope", ASYNC, ["_type"]),
        ("Patient/$export?_type=Practitioner", ASYNC, ["_type"]),
        ("$export?_since=2026-01-01", ASYNC, ["_since"]),
        ("$export?_since=2026-02-30T00:00:00Z", ASYNC, ["_since"]),
        ("$export?_outputFormat=application/json", ASYNC, ["_outputFormat"]),
        ("$export?patient=x", ASYNC, ["patient"]),
    ],
)
def test_bad_kick_offs_are_400_and_start_nothing(
    world: RecordWorld, token_for: Any, query: str, headers: dict[str, str], expression: list[str] | None
) -> None:
    response = fhir_get(token_for(ALL_READ), query, **headers)

    assert_outcome(response, 400, "not-supported" if query.endswith("patient=x") else "invalid", expression)
    assert ExportJob.objects.count() == 0


def test_delete_cancels_and_removes_files_and_other_clients_see_nothing(
    world: RecordWorld, token_for: Any, django_capture_on_commit_callbacks: Any
) -> None:
    token, other = token_for(ALL_READ), token_for(ALL_READ)
    response, _ = _kick_off(token, "$export?_type=Patient", django_capture_on_commit_callbacks)
    status = _status_path(response)
    _run(status)
    file_url = fhir_get(token, status).json()["output"][0]["url"].removeprefix("http://testserver/fhir/R4/")

    assert_outcome(fhir_get(other, status), 404, "not-found")
    assert_outcome(fhir_get(other, file_url), 404, "not-found")
    assert fhir_get(None, file_url).status_code == 401
    deleted = Client().delete(f"/fhir/R4/{status}", **bearer(token))

    assert deleted.status_code == 202
    assert_outcome(fhir_get(token, status), 404, "not-found")
    assert_outcome(fhir_get(token, file_url), 404, "not-found")
    assert not services.export_dir(ExportJob.objects.get().id).exists()


def test_completed_exports_expire_with_their_files(
    world: RecordWorld, token_for: Any, django_capture_on_commit_callbacks: Any, settings: Any
) -> None:
    settings.FHIR_EXPORT_RETENTION_HOURS = 2
    token = token_for(ALL_READ)
    response, _ = _kick_off(token, "$export?_type=Patient", django_capture_on_commit_callbacks)
    status = _status_path(response)
    _run(status)
    job = ExportJob.objects.get()
    assert job.expires_at is not None
    assert timedelta(hours=2) - (job.expires_at - job.completed_at) == timedelta(0)  # type: ignore[operator]

    assert services.export_jobs_expire(now=job.expires_at - timedelta(seconds=1)) == 0
    assert services.export_jobs_expire(now=job.expires_at) == 1

    assert not services.export_dir(job.id).exists()
    assert_outcome(fhir_get(token, status), 404, "not-found")


def test_a_job_runs_once_and_a_cancelled_one_not_at_all(
    world: RecordWorld, token_for: Any, django_capture_on_commit_callbacks: Any
) -> None:
    token = token_for(ALL_READ)
    first, _ = _kick_off(token, "$export?_type=Patient", django_capture_on_commit_callbacks)
    second, _ = _kick_off(token, "$export?_type=Patient", django_capture_on_commit_callbacks)
    _run(_status_path(first))
    Client().delete(f"/fhir/R4/{_status_path(second)}", **bearer(token))

    assert services.export_job_run(job_id=uuid.UUID(_status_path(first).rpartition("/")[2])) is None
    assert services.export_job_run(job_id=uuid.UUID(_status_path(second).rpartition("/")[2])) is None
    assert sorted(ExportJob.objects.values_list("status", flat=True)) == ["cancelled", "completed"]
