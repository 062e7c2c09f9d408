"""A fast keyed hash for API client secrets.

Client secrets are 48 random URL-safe characters (about 286 bits), so brute force is hopeless whatever
the hash; a password KDF would only add hundreds of milliseconds to every token exchange. HMAC-SHA256
keyed with the SECRET_KEY (and a random per-secret salt) also means a leaked database alone does not
allow offline checking of guesses. Rotating SECRET_KEY keeps old secrets valid through
SECRET_KEY_FALLBACKS.
"""

from __future__ import annotations

import hashlib
import hmac
from typing import Any, cast

from django.conf import settings
from django.contrib.auth.hashers import BasePasswordHasher, mask_hash
from django.utils.crypto import constant_time_compare, get_random_string


class ClientSecretHasher(BasePasswordHasher):
    algorithm = "client_secret_hmac"

    def salt(self) -> str:
        return get_random_string(16)

    @staticmethod
    def _digest(password: str, salt: str, key: str) -> str:
        keyed = hashlib.sha256(f"clinic.client-secret:{key}".encode()).digest()
        return hmac.new(keyed, f"{salt}${password}".encode(), hashlib.sha256).hexdigest()

    def encode(self, password: str, salt: str) -> str:
        cast(Any, self)._check_encode_args(password, salt)  # Django's, missing from the stubs
        return f"{self.algorithm}${salt}${self._digest(password, salt, settings.SECRET_KEY)}"

    def decode(self, encoded: str) -> dict[str, Any]:
        algorithm, salt, digest = encoded.split("$", 2)
        assert algorithm == self.algorithm
        return {"algorithm": algorithm, "hash": digest, "salt": salt}

    def verify(self, password: str, encoded: str) -> bool:
        decoded = self.decode(encoded)
        for key in [settings.SECRET_KEY, *settings.SECRET_KEY_FALLBACKS]:
            if constant_time_compare(self._digest(password, decoded["salt"], key), decoded["hash"]):
                return True
        return False

    def safe_summary(self, encoded: str) -> dict[Any, Any]:
        decoded = self.decode(encoded)
        return {
            "algorithm": decoded["algorithm"],
            "salt": mask_hash(decoded["salt"]),
            "hash": mask_hash(decoded["hash"]),
        }

    def must_update(self, encoded: str) -> bool:
        return False

    def harden_runtime(self, password: str, encoded: str) -> None:
        return None
