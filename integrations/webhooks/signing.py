"""Standard Webhooks signing (https://www.standardwebhooks.com/).

The signed content is "<webhook-id>.<webhook-timestamp>.<body>" with HMAC-SHA256 under the secret's 32
random bytes; the header is "v1,<base64>" and, while a rotated-out secret is still in its grace period,
"v1,<new> v1,<old>", so receivers can switch secrets without losing a message.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from collections.abc import Iterable

SECRET_PREFIX = "whsec_"  # noqa: S105 - the format prefix, not a secret
SECRET_BYTES = 32


def secret_generate() -> str:
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode()


def _key(secret: str) -> bytes:
    if not secret.startswith(SECRET_PREFIX):
        raise ValueError("A signing secret starts with whsec_.")
    return base64.b64decode(secret.removeprefix(SECRET_PREFIX))


def signature(*, secret: str, msg_id: str, timestamp: int, body: bytes) -> str:
    """One "v1,<base64>" signature of the message."""
    content = f"{msg_id}.{timestamp}.".encode() + body
    digest = hmac.new(_key(secret), content, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode()


def signature_header(*, secrets: Iterable[str], msg_id: str, timestamp: int, body: bytes) -> str:
    """The webhook-signature header: one signature per secret, space-separated, current secret first."""
    return " ".join(signature(secret=s, msg_id=msg_id, timestamp=timestamp, body=body) for s in secrets)


def mask_secret(secret: str) -> str:
    """What the admin shows after the secret's one display: the prefix and the last four characters."""
    return f"{SECRET_PREFIX}{'•' * 8}{secret[-4:]}" if secret else ""
