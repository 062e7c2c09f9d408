"""Bulk Data $export (FHIR Bulk Data Access IG): the jobs' writes. Kick-off records a job and queues it
after commit; the worker writes one NDJSON file per type, streaming rows from the database in chunks (flat
memory whatever the size), each resource checked against its R4 model; the client may cancel; completed
jobs expire with their files FHIR_EXPORT_RETENTION_HOURS later.

The worker reads through the registry's rows(client), so the client's branch restriction at the time of
the run applies to the export as to every search."""

from __future__ import annotations

import logging
import shutil
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from clinic.api.renderers import dumps
from integrations.fhir import r4
from integrations.fhir.models import ExportJob
from integrations.fhir.registry import RESOURCE_TYPES
from integrations.models import ApiClient

logger = logging.getLogger(__name__)

# The Celery task that runs a job (integrations.tasks): named here, where the kick-off queues it.
EXPORT_TASK = "integrations.tasks.fhir_export_run"
CHUNK = 2000  # rows fetched per round trip by the server-side cursor; also how often cancellation is checked


def export_dir(job_id: uuid.UUID) -> Path:
    return Path(settings.FHIR_EXPORT_DIR) / str(job_id)


def export_job_create(
    *,
    client: ApiClient,
    level: str,
    types: list[str],
    since: datetime | None,
    request_url: str,
    enqueue: Callable[[uuid.UUID], Any],
) -> ExportJob:
    """Record the job and hand its id to the worker once the row is committed."""
    with transaction.atomic():
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


def export_job_run(*, job_id: uuid.UUID) -> ExportJob | None:
    job = _claim(job_id)
    if job is None:
        return None
    directory = export_dir(job.id)
    directory.mkdir(parents=True, exist_ok=True)
    output: list[dict[str, Any]] = []
    try:
        for name in job.types:
            resource = RESOURCE_TYPES[name]
            rows = resource.rows(job.client).order_by(*resource.order)
            if job.since is not None:
                rows = rows.filter(**{f"{resource.updated_field}__gt": job.since})
            count = 0
            path = directory / f"{name}.ndjson"
            with path.open("wb") as file:
                # A server-side cursor (iterator without prefetches) keeps memory flat; the registry's
                # DiagnosticReport prefetch runs per chunk (Django 4.1+ prefetches with chunk_size).
                for row in rows.iterator(chunk_size=CHUNK):
                    file.write(dumps(r4.check_line(resource.to_fhir(row), count, every=CHUNK)) + b"\n")
                    count += 1
                    if count % CHUNK == 0:
                        if _cancelled(job):
                            shutil.rmtree(directory, ignore_errors=True)
                            return job
                        ExportJob.objects.filter(pk=job.pk).update(progress=f"{name}: {count} resources")
            if count:
                output.append({"type": name, "file": path.name, "count": count})
            else:
                path.unlink()
        if _cancelled(job):
            shutil.rmtree(directory, ignore_errors=True)
            return job
    except Exception:
        logger.exception("Bulk export %s failed", job.id)
        shutil.rmtree(directory, ignore_errors=True)
        ExportJob.objects.filter(pk=job.pk).update(
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


def export_job_cancel(*, job: ExportJob) -> None:
    """DELETE on the status URL: a queued or running job stops (the worker checks between chunks) and a
    completed one loses its files at once. Either way the status URL answers 404 from now on."""
    ExportJob.objects.filter(pk=job.pk).update(status=ExportJob.Status.CANCELLED, completed_at=timezone.now())
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
