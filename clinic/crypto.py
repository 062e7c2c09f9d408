"""Field encryption (Fernet) and keyed lookup hashes for sensitive identifiers such as national IDs.

The encryption key is FIELD_ENCRYPTION_KEY (required when DEBUG is off). In development without one, a
key is derived from SECRET_KEY so data stays readable across restarts of the same checkout.

FIELD_ENCRYPTION_KEY may list several keys, comma-separated: the first encrypts and hashes, every one
decrypts and is searched by lookups. That is the rotation (docs/backup-and-recovery.md section 6): put the
new key first, roll the pods, run `manage.py rotate_field_encryption` (which re-encrypts and re-hashes every
stored value with the first key, `rotate` and `lookup_hash` below), then drop the old key.

The lookup hash's HMAC key is derived from each encryption key rather than being a separate, stable
secret: a key rotated because it leaked must take its hashes with it (a 12-digit national ID hashed under
a leaked key is found by brute force in minutes), and a deployment with one key hashes exactly as before,
so nothing stored needs migrating. Lookups therefore match the hashes under every configured key
(`lookup_hashes`) until the rotation command has re-hashed the rows.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from functools import cache

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.core.signals import setting_changed
from django.dispatch import receiver


class DecryptionError(ImproperlyConfigured):
    """A stored value that no configured key decrypts: the service runs with the wrong FIELD_ENCRYPTION_KEY
    (a restore started with another deployment's key, the old key dropped before the rotation finished).
    A configuration fault, never a client's: the API answers it 503, and /readyz fails on the canary
    (clinic.field_encryption). The message names no key."""


def _key_material() -> list[bytes]:
    configured = [k.strip() for k in settings.FIELD_ENCRYPTION_KEY.split(",") if k.strip()]
    if configured:
        return [k.encode() for k in configured]
    derived = hashlib.sha256(f"clinic.field-encryption:{settings.SECRET_KEY}".encode()).digest()
    return [base64.urlsafe_b64encode(derived)]


@cache
def _fernets() -> tuple[Fernet, ...]:
    try:
        return tuple(Fernet(key) for key in _key_material())
    except ValueError:
        raise ImproperlyConfigured("FIELD_ENCRYPTION_KEY must be url-safe base64 of 32 bytes (a Fernet key).") from None


@cache
def _fernet() -> MultiFernet:
    """The first key encrypts; every listed key decrypts (comma-separated keys allow rotation)."""
    return MultiFernet(list(_fernets()))


@cache
def _lookup_keys() -> tuple[bytes, ...]:
    # dict.fromkeys: a key listed twice is searched once, the first stays first.
    return tuple(dict.fromkeys(hashlib.sha256(b"clinic.lookup-hash:" + key).digest() for key in _key_material()))


@receiver(setting_changed)
def _forget_keys(*, setting: str, **kwargs: object) -> None:
    # Tests (and the rotation tests above all) change FIELD_ENCRYPTION_KEY with override_settings.
    if setting in ("FIELD_ENCRYPTION_KEY", "SECRET_KEY"):
        for cached in (_fernets, _fernet, _lookup_keys):
            cached.cache_clear()


def encrypt(value: str) -> str:
    return _fernet().encrypt(value.encode()).decode()


def decrypt(token: str) -> str:
    """The plaintext; DecryptionError when no configured key decrypts `token`."""
    try:
        return _fernet().decrypt(token.encode()).decode()
    except InvalidToken:
        raise DecryptionError("Encrypted value cannot be decrypted with FIELD_ENCRYPTION_KEY.") from None


def is_current(token: str) -> bool:
    """Whether `token` is encrypted with the first key (what a rotation leaves every value in)."""
    try:
        _fernets()[0].decrypt(token.encode())
    except InvalidToken:
        return False
    return True


def rotate(token: str) -> str | None:
    """`token` re-encrypted with the first key, or None when it already is (so re-running a rotation
    rewrites nothing). DecryptionError when no configured key decrypts it."""
    if is_current(token):
        return None
    try:
        return _fernet().rotate(token.encode()).decode()
    except InvalidToken:
        raise DecryptionError("Encrypted value cannot be decrypted with FIELD_ENCRYPTION_KEY.") from None


def _hash(key: bytes, value: str) -> str:
    return hmac.new(key, value.encode(), hashlib.sha256).hexdigest()


def lookup_hash(value: str) -> str:
    """A keyed hash for equality lookups of an encrypted value, useless without the key: the one to store
    (under the first key)."""
    return _hash(_lookup_keys()[0], value)


def lookup_hashes(value: str) -> tuple[str, ...]:
    """The hash of `value` under every configured key, the stored one's first: what a lookup matches
    (`column__in=lookup_hashes(value)`), so rows not yet re-hashed by a rotation are still found."""
    return tuple(_hash(key, value) for key in _lookup_keys())
