"""SMS delivery backends, chosen by SMS_BACKEND: "console" (development) or "http" (a gateway).

The HTTP gateway contract is deliberately plain so most Indian SMS providers (or a small adapter in
front of one) fit it: POST SMS_GATEWAY_URL with JSON {"to": "+9198…", "sender": "CLINIC", "message": "…"}
and "Authorization: Bearer SMS_GATEWAY_TOKEN"; any 2xx is accepted, and an "id" in a JSON answer is
kept as the provider's reference.
"""

from __future__ import annotations

import logging
import sys
from typing import Protocol

import requests
from django.conf import settings

logger = logging.getLogger("integrations.notifications.sms")

CONNECT_TIMEOUT, TOTAL_TIMEOUT = 5, 15


class SmsError(Exception):
    """The message was not accepted. `retryable` is False when trying again cannot help (a 4xx)."""

    def __init__(self, message: str, *, retryable: bool = True) -> None:
        super().__init__(message)
        self.retryable = retryable


class SmsBackend(Protocol):
    def send(self, *, to: str, message: str) -> str:
        """Send `message` to the E.164 number `to`; return the provider's reference (may be empty)."""
        ...


class ConsoleSmsBackend:
    def send(self, *, to: str, message: str) -> str:
        sys.stdout.write(f"SMS from {settings.SMS_SENDER_ID} to {to}: {message}\n")
        sys.stdout.flush()
        return "console"


class HttpSmsBackend:
    def send(self, *, to: str, message: str) -> str:
        headers = {"User-Agent": "clinic-notifications/1"}
        if settings.SMS_GATEWAY_TOKEN:
            headers["Authorization"] = f"Bearer {settings.SMS_GATEWAY_TOKEN}"
        try:
            response = requests.post(
                settings.SMS_GATEWAY_URL,
                json={"to": to, "sender": settings.SMS_SENDER_ID, "message": message},
                headers=headers,
                timeout=(CONNECT_TIMEOUT, TOTAL_TIMEOUT),
                allow_redirects=False,
            )
        except requests.RequestException as exc:
            raise SmsError(f"gateway unreachable: {type(exc).__name__}") from exc
        if not 200 <= response.status_code < 300:
            # 4xx means the gateway refused this message (bad number, no credit...): retrying cannot help.
            retryable = response.status_code >= 500 or response.status_code == 429
            raise SmsError(f"gateway answered {response.status_code}: {response.text[:200]}", retryable=retryable)
        try:
            reference = response.json().get("id", "")
        except (ValueError, AttributeError):
            reference = ""
        return str(reference)[:200]


def sms_backend() -> SmsBackend:
    return HttpSmsBackend() if settings.SMS_BACKEND == "http" else ConsoleSmsBackend()
