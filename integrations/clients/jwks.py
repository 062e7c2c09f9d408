"""The public keys an API client signs its SMART Backend Services assertions with (docs/fhir.md section 7).

A client registers a JSON Web Key Set inline or the https URL where it publishes one. Either way the set
must hold public signing keys only, each named by a `kid`: RSA of at least 2048 bits (for RS384) or EC on
P-384 (for ES384). A key with private members is refused outright, so a mistaken upload of the private
half is never stored. A URL is checked by the webhooks' SSRF rules (integrations/webhooks/targets.py) and
fetched from the very address that was checked; the set it serves is cached a few minutes and refetched
once when an assertion names a key it does not hold (the client rotated its keys), at most once every
JWKS_REFETCH_INTERVAL_SECONDS per client: assertions naming made-up keys, from any number of addresses,
cannot make us fetch a client's URL faster than that (docs/fhir.md section 7).
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import warnings
from typing import Any

import requests
from django.conf import settings
from django.core.cache import cache
from joserfc.errors import JoseError, SecurityWarning
from joserfc.jwk import ECKey, RSAKey
from requests.adapters import HTTPAdapter

from integrations.webhooks import targets

ALGORITHM_KEY_TYPES = {"RS384": "RSA", "ES384": "EC"}
MIN_RSA_BITS = 2048
EC_CURVE = "P-384"
MAX_KEYS = 20
# Members that only a private (or symmetric) key has: RFC 7518 sections 6.2.2, 6.3.2 and 6.4.1.
PRIVATE_MEMBERS = ("d", "p", "q", "dp", "dq", "qi", "oth", "k")

JWKS_CACHE_SECONDS = 300
JWKS_REFETCH_INTERVAL_SECONDS = 10
FETCH_CONNECT_TIMEOUT = 3.0
FETCH_READ_TIMEOUT = 5.0
MAX_JWKS_BYTES = 64 * 1024


class JwksRefused(ValueError):
    """The key set (or the URL serving it) is not acceptable; the message says why."""


def jwks_validate(value: Any) -> dict[str, Any]:
    """The set, checked: public RSA (>= 2048 bits) or EC P-384 signing keys with distinct `kid`s."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            raise JwksRefused("The JWKS is not JSON.") from None
    if not isinstance(value, dict) or not isinstance(value.get("keys"), list):
        raise JwksRefused('A JWKS is a JSON object with a "keys" array.')
    keys = value["keys"]
    if not keys:
        raise JwksRefused("The JWKS holds no key.")
    if len(keys) > MAX_KEYS:
        raise JwksRefused(f"The JWKS holds {len(keys)} keys; at most {MAX_KEYS} are accepted.")
    kids: set[str] = set()
    for position, key in enumerate(keys, start=1):
        kid = _key_check(key, position)
        if kid in kids:
            raise JwksRefused(f"Two keys have the kid {kid!r}; each key needs its own.")
        kids.add(kid)
    return {"keys": keys}


def _key_check(key: Any, position: int) -> str:
    if not isinstance(key, dict):
        raise JwksRefused(f"Key {position} is not a JSON object.")
    private = [member for member in PRIVATE_MEMBERS if member in key]
    if private:
        raise JwksRefused(
            f"Key {position} holds private key material ({', '.join(private)}): register the public key only, "
            "and keep the private key with the client."
        )
    kid = key.get("kid")
    if not isinstance(kid, str) or not kid:
        raise JwksRefused(f'Key {position} has no "kid"; assertions name their key by it.')
    name = f"Key {kid!r}"
    if key.get("use", "sig") != "sig":
        raise JwksRefused(f'{name} is not a signing key ("use" must be "sig").')
    alg = key.get("alg")
    if alg is not None and alg not in ALGORITHM_KEY_TYPES:
        raise JwksRefused(f"{name} is for {alg}; only RS384 and ES384 are accepted.")
    kty = key.get("kty")
    if alg is not None and ALGORITHM_KEY_TYPES[alg] != kty:
        raise JwksRefused(f"{name} is a {kty} key but names the algorithm {alg}.")
    try:
        if kty == "RSA":
            with warnings.catch_warnings():  # a short key is refused just below, with a message that says so
                warnings.simplefilter("ignore", SecurityWarning)
                bits = RSAKey.import_key(key).raw_value.key_size
            if bits < MIN_RSA_BITS:
                raise JwksRefused(f"{name} is an RSA key of {bits} bits; at least {MIN_RSA_BITS} are required.")
        elif kty == "EC":
            if key.get("crv") != EC_CURVE:
                raise JwksRefused(f"{name} is on the curve {key.get('crv')!r}; only {EC_CURVE} (ES384) is accepted.")
            ECKey.import_key(key)
        else:
            raise JwksRefused(f"{name} has the key type {kty!r}; only RSA and EC public keys are accepted.")
    except (JoseError, ValueError, TypeError) as exc:
        if isinstance(exc, JwksRefused):
            raise
        raise JwksRefused(f"{name} is not a valid {kty} public key: {exc}") from None
    return kid


class _PinnedAdapter(HTTPAdapter):
    """Connects to the address the SSRF check approved, while TLS verifies the certificate against the host
    name: no second DNS lookup between the check and the connection (DNS rebinding)."""

    def __init__(self, host: str) -> None:
        self.pinned_host = host
        super().__init__(max_retries=0)

    def build_connection_pool_key_attributes(self, request: Any, verify: Any, cert: Any = None) -> Any:
        host_params, pool_kwargs = super().build_connection_pool_key_attributes(request, verify, cert)
        if host_params["scheme"] == "https":
            pool_kwargs["server_hostname"] = self.pinned_host
            pool_kwargs["assert_hostname"] = self.pinned_host
        return host_params, pool_kwargs


def ca_bundle() -> str | bool:
    """What verifies a JWKS server's certificate: requests' CA bundle (certifi). Tests point it at their own CA."""
    return True


def jwks_fetch(url: str) -> dict[str, Any]:
    """GET the set at `url` (the webhooks' SSRF rules; no redirects, no proxies) and validate it."""
    allow_private = settings.WEBHOOK_ALLOW_PRIVATE_TARGETS
    try:
        target = targets.target_parse(url, allow_private=allow_private)
        addresses = targets.target_addresses(target, allow_private=allow_private)
    except targets.TargetRefused as exc:
        raise JwksRefused(f"The JWKS URL is refused: {exc}") from None
    address = addresses[0]
    host = f"[{address}]" if isinstance(address, ipaddress.IPv6Address) else str(address)
    pinned_url = f"{target.scheme}://{host}:{target.port}{target.path}"
    with requests.Session() as session:
        session.trust_env = False  # no proxy from the environment
        session.mount(f"{target.scheme}://", _PinnedAdapter(target.host))
        try:
            response = session.get(
                pinned_url,
                headers={"Host": target.host_header, "Accept": "application/json"},
                timeout=(FETCH_CONNECT_TIMEOUT, FETCH_READ_TIMEOUT),
                allow_redirects=False,
                stream=True,
                verify=ca_bundle(),
            )
            with response:
                body = response.raw.read(MAX_JWKS_BYTES + 1, decode_content=True)
        except (requests.RequestException, OSError) as exc:
            raise JwksRefused(f"The JWKS URL could not be fetched: {type(exc).__name__}.") from None
    if response.status_code != 200:
        raise JwksRefused(f"The JWKS URL answered {response.status_code}, not 200.")
    if len(body) > MAX_JWKS_BYTES:
        raise JwksRefused(f"The JWKS at the URL is larger than {MAX_JWKS_BYTES} bytes.")
    return jwks_validate(body.decode("utf-8", errors="replace"))


def _cache_key(client_pk: int, url: str) -> str:
    # The URL is part of the key: a client moved to another URL never reads the old one's keys.
    return f"smart-jwks:{client_pk}:{hashlib.sha256(url.encode()).hexdigest()[:32]}"


def _refetch_key(client_pk: int, url: str) -> str:
    return f"{_cache_key(client_pk, url)}:refetched"


def _failure_key(client_pk: int, url: str) -> str:
    return f"{_cache_key(client_pk, url)}:failed"


def client_jwks(*, client_pk: int, inline: dict[str, Any] | None, url: str, refresh: bool = False) -> dict[str, Any]:
    """The client's current key set: the inline one, or the URL's from the cache (fetched when missing, or
    when `refresh` asks for it and no refetch happened in the last JWKS_REFETCH_INTERVAL_SECONDS). A fetch
    that failed is not tried again for that long either: its refusal is repeated."""
    if inline is not None:
        return inline
    if not url:
        raise JwksRefused("This client has no registered JWKS.")
    key = _cache_key(client_pk, url)
    cached = cache.get(key)
    # cache.add is atomic (Redis SET NX): concurrent requests naming unknown keys share one refetch.
    if cached is not None and not (
        refresh and cache.add(_refetch_key(client_pk, url), 1, JWKS_REFETCH_INTERVAL_SECONDS)
    ):
        return dict(cached)
    failed = cache.get(_failure_key(client_pk, url))
    if failed is not None and cached is None:
        raise JwksRefused(failed)
    try:
        fetched = jwks_fetch(url)
    except JwksRefused as exc:
        cache.set(_failure_key(client_pk, url), str(exc), JWKS_REFETCH_INTERVAL_SECONDS)
        raise
    cache.set(key, fetched, JWKS_CACHE_SECONDS)
    cache.delete(_failure_key(client_pk, url))
    return fetched
