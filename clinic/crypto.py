"""Field encryption (Fernet) and keyed lookup hashes for sensitive identifiers such as national IDs.

The encryption key is FIELD_ENCRYPTION_KEY (required when DEBUG is off). In development without one, a
key is derived from SECRET_KEY so data stays readable across restarts of the same checkout.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from functools import cache

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured


def _key_material() -> list[bytes]:
    configured = [k.strip() for k in settings.FIELD_ENCRYPTION_KEY.split(",") if k.strip()]
    if configured:
        return [k.encode() for k in configured]
    derived = hashlib.sha256(f"clinic.field-encryption:{settings.SECRET_KEY}".encode()).digest()
    return [base64.urlsafe_b64encode(derived)]


@cache
def _fernet() -> MultiFernet:
    """The first key encrypts; every listed key decrypts (comma-separated keys allow rotation)."""
    try:
        return MultiFernet([Fernet(key) for key in _key_material()])
    except ValueError:
        raise ImproperlyConfigured("FIELD_ENCRYPTION_KEY must be url-safe base64 of 32 bytes (a Fernet key).") from None


@cache
def _lookup_key() -> bytes:
    return hashlib.sha256(b"clinic.lookup-hash:" + _key_material()[0]).digest()


def encrypt(value: str) -> str:
    return _fernet().encrypt(value.encode()).decode()


def decrypt(token: str) -> str:
    try:
        return _fernet().decrypt(token.encode()).decode()
    except InvalidToken:
        raise ImproperlyConfigured("Encrypted value cannot be decrypted with FIELD_ENCRYPTION_KEY.") from None


def lookup_hash(value: str) -> str:
    """A keyed hash for equality lookups of an encrypted value, useless without the key."""
    return hmac.new(_lookup_key(), value.encode(), hashlib.sha256).hexdigest()
