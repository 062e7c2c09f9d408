"""Bulk Data $export endpoints (FHIR Bulk Data Access IG 2.0): kick-off (system level and Patient level),
status polling, cancellation, and the NDJSON files.

- Kick-off: GET /fhir/R4/$export or /fhir/R4/Patient/$export with `Prefer: respond-async`; parameters
  `_type`, `_since`, `_outputFormat` (ndjson). 202 with Content-Location, the status URL, and an empty
  body without Content-Type. The client must hold every scope the exported types need (403 naming the
  missing ones), and have fewer than FHIR_EXPORT_MAX_ACTIVE_PER_CLIENT jobs queued or running (429 with
  Retry-After otherwise).
- Status: GET the status URL: 202 with X-Progress and Retry-After while it runs; 200 with the manifest
  once complete (Expires: when the files go); 500 OperationOutcome if it failed. DELETE cancels: 202.
  Only the client that started a job sees it (404 otherwise); cancelled and expired jobs are 404, so a
  second DELETE is one too.
- Files: GET with the same token (requiresAccessToken), application/fhir+ndjson; the token needs the
  file's type's scope too, and the audit row names the patients in the file (docs/fhir.md section 5).
"""

from __future__ import annotations

import re
import uuid
from datetime import datetime
from email.utils import format_datetime
from typing import Any

from django.http import FileResponse, HttpResponse
from django.utils import timezone
from rest_framework.request import Request

from clinic.api.permissions import InsufficientScope
from clinic.api.renderers import dumps
from clinic.celery import task_get
from integrations.fhir import services
from integrations.fhir.models import ExportJob
from integrations.fhir.outcome import FhirError
from integrations.fhir.registry import COMPARTMENT, PATIENT, RESOURCE_TYPES, ResourceType
from integrations.fhir.views import FhirView, base_url

NDJSON_FORMATS = frozenset({"application/fhir+ndjson", "application/ndjson", "ndjson"})
_INSTANT = re.compile(
    r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,6})?(Z|[+-][0-9]{2}:[0-9]{2})$"
)


def _enqueue(job_id: uuid.UUID) -> None:
    task_get(services.EXPORT_TASK).delay(str(job_id))


def _accepted() -> HttpResponse:
    """202 with an empty body, as the Bulk Data IG has it: no Content-Type (Django would label the nothing
    text/html; the IG allows an OperationOutcome instead, which would say nothing the status does not)."""
    response = HttpResponse(status=202)
    del response["Content-Type"]
    return response


class ExportKickoffView(FhirView):
    required_scopes = {"GET": PATIENT.scope}
    level = ExportJob.Level.SYSTEM

    def get(self, request: Request) -> HttpResponse:
        if "respond-async" not in request.headers.get("Prefer", ""):
            raise FhirError(400, "A bulk export runs asynchronously: send Prefer: respond-async.")
        self.refuse_parameters(frozenset({"_type", "_since", "_outputFormat"}))
        params = dict(self.params())
        output_format = params.get("_outputFormat", "application/fhir+ndjson")
        if output_format not in NDJSON_FORMATS:
            raise FhirError(400, f"_outputFormat {output_format!r}: only NDJSON.", expression=["_outputFormat"])
        exportable = [
            resource.name
            for resource in (COMPARTMENT if self.level == ExportJob.Level.PATIENT else RESOURCE_TYPES.values())
        ]
        types = exportable
        if "_type" in params:
            types = list(dict.fromkeys(name.strip() for name in params["_type"].split(",")))
            unknown = [name for name in types if name not in exportable]
            if unknown:
                raise FhirError(400, f"_type: cannot export {', '.join(unknown)} here.", expression=["_type"])
        since = _since(params.get("_since"))
        missing = sorted({RESOURCE_TYPES[name].scope for name in types if not self.token_reads(RESOURCE_TYPES[name])})
        if missing:
            raise InsufficientScope(" ".join(missing))
        try:
            job = services.export_job_create(
                client=self.api_client,
                level=self.level,
                types=types,
                since=since,
                request_url=request.build_absolute_uri(),
                enqueue=_enqueue,
            )
        except services.ExportLimitReached as exc:
            raise FhirError(429, str(exc), headers={"Retry-After": str(exc.retry_after)}) from None
        response = _accepted()
        response["Content-Location"] = f"{base_url(request)}$export-status/{job.id}"
        return response


class PatientExportKickoffView(ExportKickoffView):
    level = ExportJob.Level.PATIENT


def _since(raw: str | None) -> datetime | None:
    if raw is None:
        return None
    if not _INSTANT.match(raw):
        raise FhirError(
            400, "_since is a FHIR instant with its offset (2026-01-01T00:00:00+05:30).", expression=["_since"]
        )
    try:
        return datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError:
        raise FhirError(400, f"_since {raw!r} is not a valid instant.", expression=["_since"]) from None


def _job(request: Request, view: FhirView, key: str) -> ExportJob:
    """The caller's own job, still to be seen: anything else is 404 (no oracle for other clients' jobs)."""
    try:
        job_id = uuid.UUID(key) if key.isascii() else None
    except ValueError:
        job_id = None
    job = ExportJob.objects.filter(pk=job_id, client=view.api_client).first() if job_id else None
    gone = (ExportJob.Status.CANCELLED, ExportJob.Status.EXPIRED)
    if job is None or job.status in gone or (job.expires_at is not None and job.expires_at <= timezone.now()):
        raise FhirError(404, f"No bulk export {key}.")
    return job


class ExportStatusView(FhirView):
    methods = ("GET", "DELETE")
    required_scopes = {"GET": PATIENT.scope, "DELETE": PATIENT.scope}

    def get(self, request: Request, id: str) -> HttpResponse:
        self.refuse_parameters(frozenset())
        job = _job(request, self, id)
        if job.status in services.ACTIVE:
            response = _accepted()
            response["X-Progress"] = job.progress or job.status
            response["Retry-After"] = "5"
            return response
        if job.status == ExportJob.Status.FAILED:
            raise FhirError(500, job.error or "The export failed.", code="exception")
        files = f"{base_url(request)}$export-file/{job.id}/"
        manifest: dict[str, Any] = {
            "transactionTime": (job.started_at or job.created_at).isoformat(),
            "request": job.request_url,
            "requiresAccessToken": True,
            "output": [
                {"type": entry["type"], "url": files + entry["file"], "count": entry["count"]} for entry in job.output
            ],
            "error": [],
        }
        response = HttpResponse(dumps(manifest), status=200, content_type="application/json")
        if job.expires_at:
            response["Expires"] = format_datetime(job.expires_at, usegmt=True)
        return response

    def delete(self, request: Request, id: str) -> HttpResponse:
        try:
            services.export_job_cancel(job=_job(request, self, id))
        except services.ExportJobGone:
            raise FhirError(404, f"No bulk export {id}.") from None
        return _accepted()


class ExportFileView(FhirView):
    """One type's NDJSON file: the job's scope (patients:read) and the type's own, as a search of the type
    would need; the audit row names every patient in the file."""

    required_scopes = {"GET": PATIENT.scope}
    patient_data = True

    def get(self, request: Request, id: str, name: str) -> FileResponse:
        self.refuse_parameters(frozenset())
        job = _job(request, self, id)
        entry = next((entry for entry in job.output if entry["file"] == name), None)
        path = services.export_dir(job.id) / name
        if job.status != ExportJob.Status.COMPLETED or entry is None or not path.is_file():
            raise FhirError(404, f"No file {name} in bulk export {id}.")
        resource: ResourceType = RESOURCE_TYPES[entry["type"]]
        if not self.token_reads(resource):
            raise InsufficientScope(resource.scope)
        try:
            self.audit_patients(services.export_file_patients(job=job, entry=entry))
        except services.ExportFileUnaudited:
            raise FhirError(410, f"{name} was written before downloads named their patients; export again.") from None
        return FileResponse(path.open("rb"), content_type="application/fhir+ndjson")
