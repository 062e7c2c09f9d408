"""Bulk Data $export jobs (FHIR Bulk Data Access IG): one row per kick-off, run by a Celery worker."""

from __future__ import annotations

import uuid

from django.contrib.postgres.fields import ArrayField
from django.db import models
from django.db.models import Q

from integrations.clients.models import ApiClient


class ExportJob(models.Model):
    """What was asked (level, types, _since), by which client (whose branch restriction and scopes the
    worker applies), where it stands, and the NDJSON files it wrote (`output`: [{type, file, count}]).
    Files are deleted, and the job with them expires, FHIR_EXPORT_RETENTION_HOURS after completion.

    A running job is leased to the worker that claimed it (`claim_token`, `claimed_until`), which renews the
    lease as it writes; a worker that dies (SIGKILL, OOM, eviction) lets it run out, and the job is run again
    from scratch, at most FHIR_EXPORT_MAX_ATTEMPTS times in all (docs/fhir.md section 5)."""

    class Level(models.TextChoices):
        SYSTEM = "system"
        PATIENT = "patient"

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        COMPLETED = "completed"
        FAILED = "failed"
        CANCELLED = "cancelled"
        EXPIRED = "expired"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    client = models.ForeignKey(ApiClient, on_delete=models.PROTECT, related_name="fhir_exports")
    level = models.CharField(max_length=10, choices=Level.choices)
    types = ArrayField(models.CharField(max_length=40))
    since = models.DateTimeField(null=True, blank=True)
    request_url = models.CharField(max_length=2000)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    completed_at = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    # The type being written, and how many resources so far: the status endpoint's X-Progress.
    progress = models.CharField(max_length=200, blank=True)
    output = models.JSONField(default=list, blank=True)
    error = models.CharField(max_length=500, blank=True)
    # Runs started (claims taken); a claim beyond FHIR_EXPORT_MAX_ATTEMPTS fails the job instead.
    attempt_count = models.PositiveSmallIntegerField(default=0, db_default=0)
    # The run that holds the job (running), renewed as it writes; for a job the relay queued again, the time
    # by which a worker should have taken it (queued). Empty otherwise.
    claim_token = models.UUIDField(null=True, blank=True)
    claimed_until = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [
            models.Index(fields=["client", "-created_at"], name="fhirexport_client_created"),
            models.Index(fields=["expires_at"], condition=Q(expires_at__isnull=False), name="fhirexport_expiry"),
            # The relay's question: jobs whose lease ran out (only queued and running jobs hold one).
            models.Index(fields=["claimed_until"], condition=Q(claimed_until__isnull=False), name="fhirexport_lease"),
        ]
        constraints = [
            models.CheckConstraint(condition=Q(level__in=["system", "patient"]), name="fhirexport_level_valid"),
            models.CheckConstraint(
                condition=Q(status__in=["queued", "running", "completed", "failed", "cancelled", "expired"]),
                name="fhirexport_status_valid",
            ),
        ]

    def __str__(self) -> str:
        return f"$export {self.id} ({self.status})"
