"""Bulk Data $export (FHIR Bulk Data Access IG): the jobs' writes. Kick-off records a job and queues it
after commit; the worker writes one NDJSON file per type, streaming rows from the database in chunks (flat
memory whatever the size), each resource checked against its R4 model; the client may cancel; completed
jobs expire with their files FHIR_EXPORT_RETENTION_HOURS later.

The worker reads through the registry's rows(client), so the client's branch restriction at the time of
the run applies to the export as to every search. A client has at most FHIR_EXPORT_MAX_ACTIVE_PER_CLIENT
jobs queued or running; beside each NDJSON file the worker writes the ids of the patients in it, which the
download names in its audit row (docs/fhir.md section 5).

A run survives the loss of its worker as webhook deliveries do (integrations.webhooks.delivery): the claim
leases the job to one run (`claim_token`, `claimed_until`), renewed with every chunk written. A run writes
into a directory of its own, `{job}.attempt-{n}`, renamed to `{job}` in the transaction that completes the
job, so the files served are always one whole run's. A worker that dies lets the lease run out; the broker
redelivers its message (acks late) and the relay (beat) queues the job again, and the next claim deletes
what the dead run wrote and starts from scratch. A job claimed FHIR_EXPORT_MAX_ATTEMPTS times without
finishing fails, with the error its status answers."""

from __future__ import annotations

import logging
import shutil
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta
from functools import partial
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
CHUNK = 2000  # rows fetched per round trip by the server-side cursor; also how often the lease is renewed
# A job holds the worker for as long as its export runs: a client over its limit is told to come back later
# rather than queue more (seconds; a guess, since nothing knows when a running job will end).
LIMIT_RETRY_AFTER_SECONDS = 60
# Beside each type's NDJSON file, the ids of the patients in it: {Type}.patients.
PATIENTS_SUFFIX = ".patients"
ACTIVE = (ExportJob.Status.QUEUED, ExportJob.Status.RUNNING)
# Statuses a DELETE still acts on; a cancelled (or expired) job is gone, and a second DELETE is a 404.
CANCELLABLE = (*ACTIVE, ExportJob.Status.COMPLETED, ExportJob.Status.FAILED)
_CLAIM_FIELDS = ["status", "claim_token", "claimed_until", "progress"]


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


# A run's own directory beside the job's: {job}.attempt-{n}, renamed to {job} when the run completes the job.
ATTEMPT_INFIX = ".attempt-"


def export_dir(job_id: uuid.UUID) -> Path:
    return Path(settings.FHIR_EXPORT_DIR) / str(job_id)


def _attempt_dir(job: ExportJob) -> Path:
    return Path(settings.FHIR_EXPORT_DIR) / f"{job.id}{ATTEMPT_INFIX}{job.attempt_count}"


def _files_remove(job_id: uuid.UUID) -> None:
    """The job's files and whatever its runs left half-written."""
    shutil.rmtree(export_dir(job_id), ignore_errors=True)
    for partial_run in Path(settings.FHIR_EXPORT_DIR).glob(f"{job_id}{ATTEMPT_INFIX}*"):
        shutil.rmtree(partial_run, ignore_errors=True)


def _lease() -> timedelta:
    return timedelta(seconds=settings.FHIR_EXPORT_LEASE_SECONDS)


def gave_up_error(attempts: int) -> str:
    """The failed job's error (its status answers it in an OperationOutcome)."""
    return (
        f"The export was started {attempts} times and its worker stopped each time before it finished; start a new one."
    )


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
        # Leased from the start, as the relay leases a job it queues again: a kick-off whose message never
        # reaches a worker (the broker lost it) is queued again by the relay once the lease runs out.
        job = ExportJob.objects.create(
            client=client,
            level=level,
            types=types,
            since=since,
            request_url=request_url[:2000],
            claimed_until=timezone.now() + _lease(),
        )
        transaction.on_commit(lambda: enqueue(job.id))
    return job


def _claim(job_id: uuid.UUID) -> ExportJob | None:
    """Take the job for one run, from scratch: a queued job, or a running one whose lease ran out (its worker
    died; this is the broker's redelivery or the relay's message). None when it is not this caller's to run
    (taken by a live run, finished, cancelled, or locked right now by another claim); a job already claimed
    FHIR_EXPORT_MAX_ATTEMPTS times fails instead."""
    now = timezone.now()
    with transaction.atomic():
        job = (
            ExportJob.objects.select_for_update(skip_locked=True, of=("self",))
            .select_related("client")
            .filter(pk=job_id)
            .first()
        )
        if job is None:
            return None
        lapsed = job.status == ExportJob.Status.RUNNING and job.claimed_until is not None and job.claimed_until <= now
        if job.status != ExportJob.Status.QUEUED and not lapsed:
            return None
        if job.attempt_count >= settings.FHIR_EXPORT_MAX_ATTEMPTS:
            _fail(job, now, gave_up_error(job.attempt_count))
            job.save(update_fields=[*_CLAIM_FIELDS, "completed_at", "error"])
            transaction.on_commit(partial(_files_remove, job.id))
            return None
        job.status, job.started_at, job.progress = ExportJob.Status.RUNNING, now, ""
        job.claim_token, job.claimed_until = uuid.uuid4(), now + _lease()
        job.attempt_count += 1
        job.save(update_fields=[*_CLAIM_FIELDS, "started_at", "attempt_count"])
    # What a dead run wrote goes: this run starts from scratch, in a directory of its own.
    _files_remove(job.id)
    return job


def _fail(job: ExportJob, now: datetime, error: str) -> None:
    job.status, job.completed_at, job.error = ExportJob.Status.FAILED, now, error
    job.claim_token, job.claimed_until, job.progress = None, None, ""


def _renew(job: ExportJob, progress: str) -> bool:
    """Extend this run's lease and record its progress; False once the job is no longer this run's
    (cancelled, or its lease ran out and another run took it over): the run then stops."""
    return bool(
        ExportJob.objects.filter(pk=job.pk, status=ExportJob.Status.RUNNING, claim_token=job.claim_token).update(
            claimed_until=timezone.now() + _lease(), progress=progress
        )
    )


def _patient_of(resource: ResourceType, row: Any) -> Any:
    value = row
    for part in (resource.patient_field or "").split("__"):
        value = getattr(value, part)
    return value


def _write(job: ExportJob, resource: ResourceType, directory: Path) -> dict[str, Any] | None:
    """Write one type's NDJSON file and, beside it, the patient of each line (ids, one a line, a repeat of
    the line before left out): its manifest entry, an empty one when the type had no rows, None when the job
    was cancelled (or taken over) meanwhile. The ids are written as the rows stream by, so the list is exactly
    the file's and the worker holds none of them in memory; the download reads the list, never the file."""
    if not _renew(job, f"{resource.name}: 0 resources"):
        return None
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
            if count % CHUNK == 0 and not _renew(job, f"{resource.name}: {count} resources"):
                return None
    if not count:
        path.unlink()
        patients_path.unlink()
        return {}
    return {"type": resource.name, "file": path.name, "count": count, "patients": patients_path.name}


def export_job_run(*, job_id: uuid.UUID) -> ExportJob | None:
    """Run the job if it is this caller's to run (see _claim); the job as the run left it, None if not run."""
    job = _claim(job_id)
    if job is None:
        return None
    directory = _attempt_dir(job)
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
    except Exception:
        logger.exception("Bulk export %s failed", job.id)
        shutil.rmtree(directory, ignore_errors=True)
        # Only this run's job fails: one cancelled meanwhile stays cancelled (a DELETE of it is a 404), and
        # one taken over by another run (this one's lease ran out) is that run's.
        ExportJob.objects.filter(pk=job.pk, status=ExportJob.Status.RUNNING, claim_token=job.claim_token).update(
            status=ExportJob.Status.FAILED,
            completed_at=timezone.now(),
            error="The export failed; start a new one.",
            claim_token=None,
            claimed_until=None,
        )
        return job
    if not _complete(job, directory, output):
        shutil.rmtree(directory, ignore_errors=True)
    job.refresh_from_db()
    return job


def _complete(job: ExportJob, directory: Path, output: list[dict[str, Any]]) -> bool:
    """Publish this run's files and the manifest together, if the job is still this run's: the files move
    to the job's directory under the job's row lock (a DELETE meanwhile waits, then removes them)."""
    now = timezone.now()
    with transaction.atomic():
        ours = (
            ExportJob.objects.select_for_update(of=("self",))
            .filter(pk=job.pk, status=ExportJob.Status.RUNNING, claim_token=job.claim_token)
            .exists()
        )
        if not ours:
            return False
        final = export_dir(job.id)
        shutil.rmtree(final, ignore_errors=True)
        directory.rename(final)
        ExportJob.objects.filter(pk=job.pk).update(
            status=ExportJob.Status.COMPLETED,
            completed_at=now,
            expires_at=now + timedelta(hours=settings.FHIR_EXPORT_RETENTION_HOURS),
            output=output,
            progress="",
            claim_token=None,
            claimed_until=None,
        )
    return True


def export_jobs_relay(*, enqueue: Callable[[uuid.UUID], Any], limit: int = 100) -> int:
    """Celery beat: jobs whose lease ran out. A running job's worker died: the job is queued again (to run
    from scratch), or fails once it was claimed FHIR_EXPORT_MAX_ATTEMPTS times, and then no longer counts
    against the client's limit. A job this relay queued that no worker took within a lease (the message was
    lost, or waits behind other exports) is queued again; the claim runs it once whatever the messages.

    The relay runs on the default queue, whose workers do not mount FHIR_EXPORT_DIR: a dead run's files are
    deleted by the next claim, or, for a job that failed here, by the hourly expiry (export_jobs_expire)."""
    now = timezone.now()
    with transaction.atomic():
        lapsed = list(
            ExportJob.objects.select_for_update(skip_locked=True, of=("self",))
            .filter(status__in=ACTIVE, claimed_until__lte=now)
            .order_by("claimed_until")[:limit]
        )
        for job in lapsed:
            if job.status == ExportJob.Status.RUNNING and job.attempt_count >= settings.FHIR_EXPORT_MAX_ATTEMPTS:
                logger.warning("Bulk export %s: its worker stopped %d times; the job fails", job.id, job.attempt_count)
                _fail(job, now, gave_up_error(job.attempt_count))
                continue
            if job.status == ExportJob.Status.RUNNING:
                logger.warning("Bulk export %s: its worker stopped (lease ran out); queued again", job.id)
            job.status, job.progress = ExportJob.Status.QUEUED, ""
            job.claim_token, job.claimed_until = None, now + _lease()
            # robust: a broker down now leaves the job queued with its lease, and a later run queues it again.
            transaction.on_commit(partial(enqueue, job.id), robust=True)
        ExportJob.objects.bulk_update(lapsed, [*_CLAIM_FIELDS, "completed_at", "error"])
    return len(lapsed)


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
    _files_remove(job.id)


def export_jobs_expire(*, now: datetime | None = None) -> int:
    """Delete the files of completed jobs past their retention (Celery beat, hourly, on the export queue,
    whose workers mount FHIR_EXPORT_DIR), and the partial files of runs that will never finish."""
    now = now or timezone.now()
    expired = list(
        ExportJob.objects.filter(status=ExportJob.Status.COMPLETED, expires_at__lte=now).values_list("id", flat=True)
    )
    for job_id in expired:
        shutil.rmtree(export_dir(job_id), ignore_errors=True)
    ExportJob.objects.filter(id__in=expired).update(status=ExportJob.Status.EXPIRED)
    _abandoned_runs_remove()
    return len(expired)


def _abandoned_runs_remove() -> None:
    """A run's directory whose job is no longer running that run: its worker died and the relay failed the
    job, or another run took the job over. (A directory made after the listing is not looked at; one whose
    run completes meanwhile has been renamed away.)"""
    runs: dict[uuid.UUID, set[int]] = {}
    for path in Path(settings.FHIR_EXPORT_DIR).glob(f"*{ATTEMPT_INFIX}*"):
        job_part, _, attempt_part = path.name.partition(ATTEMPT_INFIX)
        try:
            runs.setdefault(uuid.UUID(job_part), set()).add(int(attempt_part))
        except ValueError:
            continue
    running = set(
        ExportJob.objects.filter(pk__in=runs, status=ExportJob.Status.RUNNING).values_list("id", "attempt_count")
    )
    for job_id, attempts in runs.items():
        for attempt in attempts:
            if (job_id, attempt) not in running:
                shutil.rmtree(Path(settings.FHIR_EXPORT_DIR) / f"{job_id}{ATTEMPT_INFIX}{attempt}", ignore_errors=True)
