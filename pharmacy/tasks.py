"""Celery tasks of the pharmacy: thin."""

from __future__ import annotations

from celery import shared_task

from pharmacy import services

EXPIRY_TASK = "pharmacy.tasks.stock_expiring_notify"


@shared_task(name=EXPIRY_TASK)
def stock_expiring_notify() -> int:
    """Daily (Celery beat): publish `stock.expiring` for every drug and branch with a batch expiring within
    PHARMACY_EXPIRY_WARNING_DAYS; returns how many events were published."""
    return services.stock_expiring_publish()
