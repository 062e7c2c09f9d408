"""Celery tasks of integrations: periodic housekeeping (Celery beat) and webhook delivery.

The webhook tasks are thin: they carry ids only and call integrations.webhooks.delivery, whose claims
make every one of them idempotent (a duplicated or redelivered message does nothing).
"""

import uuid
from datetime import timedelta

from celery import Task, shared_task
from django.conf import settings
from django.db import DatabaseError
from django.db.models import Q
from django.utils import timezone
from oauth2_provider.models import get_access_token_model

from clinic.api import audit_buffer, idempotency
from integrations.clients.services import client_assertions_purge
from integrations.fhir import services as fhir_services
from integrations.hl7 import outbox as hl7_outbox
from integrations.notifications import outbox
from integrations.notifications import services as notification_services
from integrations.webhooks import delivery
from integrations.webhooks.models import WebhookDelivery, WebhookEvent


@shared_task
def purge_idempotency_records() -> int:
    return idempotency.purge_expired()


@shared_task(ignore_result=True)
def flush_deferred_audit_rows() -> int:
    """Write the audit rows of requests answered while PostgreSQL was unreachable."""
    return audit_buffer.flush_shared()


@shared_task
def purge_expired_tokens() -> int:
    """Expired access tokens, and the jtis of expired client assertions (refused for their exp anyway)."""
    deleted, _ = get_access_token_model().objects.filter(expires__lt=timezone.now()).delete()
    return deleted + client_assertions_purge()


@shared_task(acks_late=True, ignore_result=True)
def deliver_webhook(delivery_id: int, claim_token: str | None = None) -> str:
    """One attempt of a webhook delivery, if it is still this message's to make."""
    token = uuid.UUID(claim_token) if claim_token else None
    return delivery.delivery_attempt(delivery_id=delivery_id, token=token)


# Waits between tries of a recording task while PostgreSQL refuses writes: 2, 4, 8 ... then every minute.
_RECORD_BACKOFF_MAX_SECONDS = 60


@shared_task(bind=True, acks_late=True, ignore_result=True, max_retries=None)
def record_webhook_outcome(self: Task, delivery_id: int) -> str:
    """Record an attempt's outcome PostgreSQL refused when it was made (it waits in Redis). Only records,
    never sends; retried with backoff until PostgreSQL accepts it (the relay drains it too)."""
    try:
        return delivery.outcome_record(delivery_id=delivery_id)
    except DatabaseError as exc:
        raise self.retry(exc=exc, countdown=min(2 ** (self.request.retries + 1), _RECORD_BACKOFF_MAX_SECONDS)) from exc


@shared_task(ignore_result=True)
def relay_webhook_deliveries() -> int:
    """Queue every due delivery: retries, deliveries whose message was lost, claims of dead workers."""
    return delivery.deliveries_relay()


@shared_task(ignore_result=True)
def purge_webhook_events() -> int:
    """Delete events older than WEBHOOK_RETENTION_DAYS whose deliveries are all finished."""
    cutoff = timezone.now() - timedelta(days=settings.WEBHOOK_RETENTION_DAYS)
    unfinished = Q(deliveries__status__in=[WebhookDelivery.Status.PENDING, WebhookDelivery.Status.DELIVERING]) | Q(
        hl7_messages__status="pending"
    )
    old = WebhookEvent.objects.filter(created_at__lt=cutoff).exclude(unfinished)
    deleted, _ = WebhookEvent.objects.filter(pk__in=old.values("pk")).delete()
    return deleted


# --- FHIR Bulk Data $export (integrations.fhir.services) -------------------------------------------------


@shared_task(name=fhir_services.EXPORT_TASK, acks_late=True, reject_on_worker_lost=True, ignore_result=True)
def fhir_export_run(job_id: str) -> None:
    """Write one export job's NDJSON files, from scratch. A message redelivered after its worker died takes
    the job over once the dead run's lease ran out; one that finds the job held by a live run does nothing."""
    fhir_services.export_job_run(job_id=uuid.UUID(job_id))


@shared_task(ignore_result=True)
def relay_fhir_exports() -> int:
    """Queue again the exports whose worker died (their lease ran out); fail those that ran out of attempts."""
    return fhir_services.export_jobs_relay(enqueue=lambda job_id: fhir_export_run.delay(str(job_id)))


@shared_task
def fhir_exports_expire() -> int:
    return fhir_services.export_jobs_expire()


# --- Patient notifications' outbox (integrations.notifications.outbox) ------------------------------------


@shared_task(acks_late=True, ignore_result=True)
def notification_outbox_run(message_id: int, claim_token: str) -> str:
    """Send one patient notification of the outbox, if it is still this message's to send."""
    return outbox.notification_outbox_run(message_id=message_id, token=uuid.UUID(claim_token))


@shared_task(ignore_result=True)
def relay_notifications() -> int:
    """Record the sends PostgreSQL refused, then queue every notification whose message was lost (broker
    down at commit, worker killed)."""
    notification_services.pending_attempts_drain()
    return outbox.notification_outbox_relay()


@shared_task(bind=True, acks_late=True, ignore_result=True, max_retries=None)
def record_notification_attempts(self: Task) -> int:
    """Record the notification attempts PostgreSQL refused when they were sent (they wait in Redis). Only
    records, never sends; retried with backoff until PostgreSQL accepts them."""
    try:
        return notification_services.pending_attempts_drain(raise_refused=True)
    except DatabaseError as exc:
        raise self.retry(exc=exc, countdown=min(2 ** (self.request.retries + 1), _RECORD_BACKOFF_MAX_SECONDS)) from exc


@shared_task(ignore_result=True)
def purge_notification_outbox() -> int:
    """Delete outbox messages finished more than WEBHOOK_RETENTION_DAYS ago (the attempt log stays)."""
    return outbox.notification_outbox_purge(older_than=timezone.now() - timedelta(days=settings.WEBHOOK_RETENTION_DAYS))


# --- HL7 v2 outbound (integrations.hl7.outbox) --------------------------------------------------------------


@shared_task(acks_late=True, ignore_result=True)
def hl7_destination_drain(destination_id: str) -> int:
    """Send one destination's due HL7 messages in order; a duplicated message finds the lease held and stops."""
    return hl7_outbox.destination_drain(destination_id=uuid.UUID(destination_id)).acknowledged


@shared_task(ignore_result=True)
def relay_hl7_messages() -> int:
    """Queue a drain for every destination whose first pending message is due and whose lease is free."""
    return hl7_outbox.hl7_relay()
