"""Bulk Data $export (FHIR Bulk Data Access IG): the jobs' writes. Kick-off records a job and queues it
after commit; the worker writes one NDJSON file per type, streaming rows from the database in chunks (flat
memory whatever the size), each resource checked against its R4 model; the client may cancel; completed
jobs expire with their files FHIR_EXPORT_RETENTION_HOURS later.

The worker reads through the registry's rows(client), so the client's branch restriction at the time of
the run applies to the export as to every search. A client has at most FHIR_EXPORT_MAX_ACTIVE_PER_CLIENT
jobs queued or running; beside each NDJSON file the worker writes the ids of the patients in it, which the
download names in its audit row (docs/fhir.md section 5)."""

from __future__ import annotations

import logging
import shutil
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from clinic.api.renderers import dumps
from integrations.fhir import r4
from integrations.fhir.models import ExportJob
from integrations.fhir.registry import RESOURCE_TYPES, ResourceType
from integrations.models import ApiClient

logger = logging.getLogger(__name__)

# The Celery task that runs a job (integrations.tasks): named here, where the kick-off queues it.
EXPORT_TASK = "integrations.tasks.fhir_export_run"
CHUNK = 2000  # rows fetched per round trip by the server-side cursor; also how often cancellation is checked
# A job holds the worker for as long as its export runs: a client over its limit is told to come back later
# rather than queue more (seconds; a guess, since nothing knows when a running job will end).
LIMIT_RETRY_AFTER_SECONDS = 60
# Beside each type's NDJSON file, the ids of the patients in it: {Type}.patients.
PATIENTS_SUFFIX = ".patients"
ACTIVE = (ExportJob.Status.QUEUED, ExportJob.Status.RUNNING)
# Statuses a DELETE still acts on; a cancelled (or expired) job is gone, and a second DELETE is a 404.
CANCELLABLE = (*ACTIVE, ExportJob.Status.COMPLETED, ExportJob.Status.FAILED)


class ExportLimitReached(Exception):
    """The client already has FHIR_EXPORT_MAX_ACTIVE_PER_CLIENT exports queued or running."""

    def __init__(self, *, limit: int) -> None:
        super().__init__(f"At most {limit} bulk exports may be in progress at once; wait for one to finish.")
        self.limit = limit
        self.retry_after = LIMIT_RETRY_AFTER_SECONDS


class ExportFileUnaudited(Exception):
    """A file whose patients are not known cannot be handed out (its audit row could not name them)."""


class ExportJobGone(Exception):
    """The job was cancelled (or expired) meanwhile: nothing is left to act on."""


def export_dir(job_id: uuid.UUID) -> Path:
    return Path(settings.FHIR_EXPORT_DIR) / str(job_id)


def _client_exports_lock(client: ApiClient) -> None:
    """Serialise one client's kick-offs until commit, so two at once cannot both count the same free place
    (a transaction-scoped advisory lock: it works through PgBouncer's transaction mode and leaves the
    client's row, which token exchanges and the admin write, unlocked)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", [f"fhir-export:{client.pk}"])


def export_job_create(
    *,
    client: ApiClient,
    level: str,
    types: list[str],
    since: datetime | None,
    request_url: str,
    enqueue: Callable[[uuid.UUID], Any],
) -> ExportJob:
    """Record the job and hand its id to the worker once the row is committed; ExportLimitReached when the
    client already has its quota of jobs queued or running."""
    limit = settings.FHIR_EXPORT_MAX_ACTIVE_PER_CLIENT
    with transaction.atomic():
        _client_exports_lock(client)
        if ExportJob.objects.filter(client=client, status__in=ACTIVE).count() >= limit:
            raise ExportLimitReached(limit=limit)
        job = ExportJob.objects.create(
            client=client, level=level, types=types, since=since, request_url=request_url[:2000]
        )
        transaction.on_commit(lambda: enqueue(job.id))
    return job


def _claim(job_id: uuid.UUID) -> ExportJob | None:
    """queued -> running, once: a redelivered message finds the job taken and does nothing."""
    with transaction.atomic():
        job = ExportJob.objects.select_for_update().select_related("client").filter(pk=job_id).first()
        if job is None or job.status != ExportJob.Status.QUEUED:
            return None
        job.status, job.started_at = ExportJob.Status.RUNNING, timezone.now()
        job.save(update_fields=["status", "started_at"])
        return job


def _cancelled(job: ExportJob) -> bool:
    return ExportJob.objects.filter(pk=job.pk, status=ExportJob.Status.CANCELLED).exists()


def _patient_of(resource: ResourceType, row: Any) -> Any:
    value = row
    for part in (resource.patient_field or "").split("__"):
        value = getattr(value, part)
    return value


def _write(job: ExportJob, resource: ResourceType, directory: Path) -> dict[str, Any] | None:
    """Write one type's NDJSON file and, beside it, the patient of each line (ids, one a line, a repeat of
    the line before left out): its manifest entry, an empty one when the type had no rows, None when the job
    was cancelled meanwhile. The ids are written as the rows stream by, so the list is exactly the file's and
    the worker holds none of them in memory; the download reads the list, never the file."""
    rows = resource.rows(job.client).order_by(*resource.order)
    if job.since is not None:
        rows = rows.filter(**{f"{resource.updated_field}__gt": job.since})
    count, previous = 0, None
    path = directory / f"{resource.name}.ndjson"
    patients_path = directory / f"{resource.name}{PATIENTS_SUFFIX}"
    with path.open("wb") as file, patients_path.open("w") as patients:
        # A server-side cursor (iterator without prefetches) keeps memory flat; the registry's
        # DiagnosticReport prefetch runs per chunk (Django 4.1+ prefetches with chunk_size).
        for row in rows.iterator(chunk_size=CHUNK):
            file.write(dumps(r4.check_line(resource.to_fhir(row), count, every=CHUNK)) + b"\n")
            patient_id = _patient_of(resource, row) if resource.patient_field else None
            if patient_id is not None and patient_id != previous:
                patients.write(f"{patient_id}\n")
                previous = patient_id
            count += 1
            if count % CHUNK == 0:
                if _cancelled(job):
                    return None
                ExportJob.objects.filter(pk=job.pk).update(progress=f"{resource.name}: {count} resources")
    if not count:
        path.unlink()
        patients_path.unlink()
        return {}
    return {"type": resource.name, "file": path.name, "count": count, "patients": patients_path.name}


def export_job_run(*, job_id: uuid.UUID) -> ExportJob | None:
    job = _claim(job_id)
    if job is None:
        return None
    directory = export_dir(job.id)
    directory.mkdir(parents=True, exist_ok=True)
    output: list[dict[str, Any]] = []
    try:
        for name in job.types:
            entry = _write(job, RESOURCE_TYPES[name], directory)
            if entry is None:
                shutil.rmtree(directory, ignore_errors=True)
                return job
            if entry:
                output.append(entry)
        if _cancelled(job):
            shutil.rmtree(directory, ignore_errors=True)
            return job
    except Exception:
        logger.exception("Bulk export %s failed", job.id)
        shutil.rmtree(directory, ignore_errors=True)
        # Only a job still running fails: one cancelled meanwhile stays cancelled (a DELETE of it is a 404).
        ExportJob.objects.filter(pk=job.pk, status=ExportJob.Status.RUNNING).update(
            status=ExportJob.Status.FAILED, completed_at=timezone.now(), error="The export failed; start a new one."
        )
        return job
    now = timezone.now()
    ExportJob.objects.filter(pk=job.pk, status=ExportJob.Status.RUNNING).update(
        status=ExportJob.Status.COMPLETED,
        completed_at=now,
        expires_at=now + timedelta(hours=settings.FHIR_EXPORT_RETENTION_HOURS),
        output=output,
        progress="",
    )
    job.refresh_from_db()
    return job


def export_file_patients(*, job: ExportJob, entry: dict[str, Any]) -> list[uuid.UUID]:
    """The patients in one of a completed job's files, as the worker recorded them when it wrote the file.
    A file without its list (written before the lists existed) raises: its download could not be audited."""
    if "patients" not in entry:
        raise ExportFileUnaudited(f"Bulk export {job.id}: no patient list for {entry['file']}.")
    with (export_dir(job.id) / entry["patients"]).open() as lines:
        return list(dict.fromkeys(uuid.UUID(line.rstrip("\n")) for line in lines))


def export_job_cancel(*, job: ExportJob) -> None:
    """DELETE on the status URL: a queued or running job stops (the worker checks between chunks) and a
    completed one loses its files at once. Either way the status URL answers 404 from now on; a job already
    cancelled (two DELETEs at once) raises ExportJobGone."""
    cancelled = ExportJob.objects.filter(pk=job.pk, status__in=CANCELLABLE).update(
        status=ExportJob.Status.CANCELLED, completed_at=timezone.now()
    )
    if not cancelled:
        raise ExportJobGone(f"No bulk export {job.id}.")
    shutil.rmtree(export_dir(job.id), ignore_errors=True)


def export_jobs_expire(*, now: datetime | None = None) -> int:
    """Delete the files of completed jobs past their retention (Celery beat, hourly)."""
    now = now or timezone.now()
    expired = list(
        ExportJob.objects.filter(status=ExportJob.Status.COMPLETED, expires_at__lte=now).values_list("id", flat=True)
    )
    for job_id in expired:
        shutil.rmtree(export_dir(job_id), ignore_errors=True)
    ExportJob.objects.filter(id__in=expired).update(status=ExportJob.Status.EXPIRED)
    return len(expired)
