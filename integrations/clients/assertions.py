"""Client authentication by a signed JWT (RFC 7523 `private_key_jwt`), as SMART Backend Services clients
send it to the token endpoint (docs/fhir.md section 7).

The signature is checked by joserfc against a key of the client's registered JWKS; nothing here does
cryptography itself. The rules: `alg` RS384 or ES384 (never `none`, never an HMAC keyed by anything a
client could choose), a `kid` naming a key of the set whose type fits the algorithm, `iss` and `sub` both
the client id, `aud` the token endpoint's URL, `exp` present, not past and at most five minutes ahead, and a
`jti`. Whether the `jti` was seen before is the database's to say (`ClientAssertion`), once every other check
passed, so that a refused request records nothing.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from joserfc import jws, jwt
from joserfc.errors import ClaimError, ExpiredTokenError, JoseError, MissingClaimError
from joserfc.jwk import ECKey, RSAKey

from integrations.clients.jwks import ALGORITHM_KEY_TYPES, EC_CURVE, JwksRefused, client_jwks
from integrations.clients.models import ApiClient

ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
ALGORITHMS = tuple(ALGORITHM_KEY_TYPES)
MAX_LIFETIME_SECONDS = 300  # SMART: exp no more than five minutes in the future
# Clocks differ: an assertion is still accepted this long after its exp, and its exp (or iat, nbf) may be
# this much further ahead than our clock says.
CLOCK_SKEW_SECONDS = 60
MAX_ASSERTION_BYTES = 8192
MAX_JTI_LENGTH = 255


class AssertionRefused(Exception):
    """The assertion does not authenticate the client; the message is the OAuth error description."""


@dataclass(frozen=True)
class VerifiedAssertion:
    client: ApiClient
    jti: str
    expires_at: datetime  # when its jti may be forgotten: exp plus the skew


def _unverified_parts(assertion: str) -> tuple[dict[str, Any], dict[str, Any]]:
    if len(assertion) > MAX_ASSERTION_BYTES:
        raise AssertionRefused(f"The client assertion is longer than {MAX_ASSERTION_BYTES} characters.")
    try:
        compact = jws.extract_compact(assertion.encode("ascii"))
        claims = json.loads(compact.payload)
    except (JoseError, ValueError, UnicodeError):
        raise AssertionRefused("The client assertion is not a signed JWT (JWS compact serialization).") from None
    if not isinstance(claims, dict):
        raise AssertionRefused("The client assertion's payload is not a JSON object.")
    return dict(compact.headers()), claims


def assertion_client_id(assertion: str) -> str:
    """The client id the assertion claims to come from (its `sub`, or `iss`), unverified: which client's keys
    to verify it with, and who tried in the audit log. Empty when it names none."""
    try:
        _, claims = _unverified_parts(assertion)
    except AssertionRefused:
        return ""
    claimed = claims.get("sub") or claims.get("iss")
    return claimed if isinstance(claimed, str) else ""


def assertion_verify(*, client: ApiClient, assertion: str, audience: str) -> VerifiedAssertion:
    """Check the assertion's header, signature and claims for `client`; raises AssertionRefused."""
    header, _ = _unverified_parts(assertion)
    alg = header.get("alg")
    if alg not in ALGORITHMS:
        raise AssertionRefused(f"The client assertion is signed with {alg!r}; only RS384 and ES384 are accepted.")
    kid = header.get("kid")
    if not isinstance(kid, str) or not kid:
        raise AssertionRefused('The client assertion\'s header has no "kid" naming the signing key.')
    key = _signing_key(client, kid, alg)
    try:
        token = jwt.decode(assertion, key, algorithms=[alg])
    except JoseError:
        raise AssertionRefused("The client assertion's signature does not verify with the key it names.") from None
    now = int(time.time())
    registry = jwt.JWTClaimsRegistry(
        now=now,
        leeway=CLOCK_SKEW_SECONDS,
        iss={"essential": True, "value": client.client_id},
        sub={"essential": True, "value": client.client_id},
        aud={"essential": True, "value": audience},
        exp={"essential": True},
        jti={"essential": True},
    )
    try:
        registry.validate(token.claims)
    except ExpiredTokenError:
        raise AssertionRefused("The client assertion has expired.") from None
    except MissingClaimError as exc:
        raise AssertionRefused(f"The client assertion lacks the claim(s) {exc.claim}.") from None
    except ClaimError as exc:
        expected = {"aud": f"; it must be {audience}", "iss": "; it must be the client id"}
        expected["sub"] = expected["iss"]
        raise AssertionRefused(
            f"The client assertion's {exc.claim} is not valid{expected.get(exc.claim, '')}."
        ) from None
    exp = token.claims["exp"]
    if exp > now + MAX_LIFETIME_SECONDS + CLOCK_SKEW_SECONDS:
        raise AssertionRefused(
            f"The client assertion's exp is more than {MAX_LIFETIME_SECONDS} seconds ahead; "
            "sign a fresh, short-lived assertion for each token request."
        )
    jti = token.claims["jti"]
    if not jti or len(jti) > MAX_JTI_LENGTH:
        raise AssertionRefused(f"The client assertion's jti must be 1 to {MAX_JTI_LENGTH} characters.")
    return VerifiedAssertion(
        client=client, jti=jti, expires_at=datetime.fromtimestamp(exp + CLOCK_SKEW_SECONDS, tz=UTC)
    )


def _signing_key(client: ApiClient, kid: str, alg: str) -> RSAKey | ECKey:
    """The key `kid` of the client's set; a set served at a URL is refetched once when it lacks that kid."""
    if not client.has_jwks:
        raise AssertionRefused("This client has no registered JWKS, so it cannot authenticate by assertion.")
    found = None
    for refresh in (False, True):
        if refresh and not client.jwks_uri:
            break
        try:
            key_set = client_jwks(client_pk=client.pk, inline=client.jwks, url=client.jwks_uri, refresh=refresh)
        except JwksRefused as exc:
            raise AssertionRefused(f"The client's JWKS cannot be used: {exc}") from None
        found = next((key for key in key_set["keys"] if key.get("kid") == kid), None)
        if found is not None:
            break
    if found is None:
        raise AssertionRefused(f"The client's JWKS has no key with kid {kid!r}.")
    if found.get("kty") != ALGORITHM_KEY_TYPES[alg] or (alg == "ES384" and found.get("crv") != EC_CURVE):
        raise AssertionRefused(f"The key {kid!r} is a {found.get('kty')} key, which cannot verify {alg}.")
    if found.get("alg") not in (None, alg):
        raise AssertionRefused(f"The key {kid!r} is registered for {found['alg']}, not {alg}.")
    return RSAKey.import_key(found) if alg == "RS384" else ECKey.import_key(found)
