"""`manage.py check --deploy` (registered in IntegrationsConfig.ready): warn when the development-only webhook setting is on in production."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Warning


def private_targets_check(app_configs: Any, **kwargs: Any) -> list[CheckMessage]:
    if settings.WEBHOOK_ALLOW_PRIVATE_TARGETS and not settings.DEBUG:
        return [
            Warning(
                "WEBHOOK_ALLOW_PRIVATE_TARGETS is on while DEBUG is off: webhook subscriptions may target http "
                "and internal addresses (SSRF).",
                hint="Turn it off outside development and tests.",
                id="integrations.W001",
            )
        ]
    return []
