"""The one clock of webhook delivery, so tests can move time instead of waiting hours for retries."""

from __future__ import annotations

from datetime import datetime

from django.utils import timezone


def now() -> datetime:
    return timezone.now()
