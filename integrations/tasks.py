"""Periodic housekeeping (scheduled by Celery beat)."""

from celery import shared_task
from django.utils import timezone
from oauth2_provider.models import get_access_token_model

from integrations import idempotency


@shared_task
def purge_idempotency_records() -> int:
    return idempotency.purge_expired()


@shared_task
def purge_expired_tokens() -> int:
    deleted, _ = get_access_token_model().objects.filter(expires__lt=timezone.now()).delete()
    return deleted
