"""SMART Backend Services (docs/fhir.md section 7): discovery, the private_key_jwt client assertion at the
token endpoint, SMART scopes mapped onto ours, and JWKS registered inline or by URL.

The client side is independent of the server's JOSE library: assertions are built and signed with PyJWT
(the server verifies with joserfc), keys made with `cryptography`."""

from __future__ import annotations

import base64
import json
import threading
import time
import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import jwt
import pytest
import requests
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from django.core.cache import cache
from django.core.exceptions import ValidationError
from django.db import connection
from django.test import Client
from django.utils import timezone
from jwt.algorithms import ECAlgorithm, RSAAlgorithm
from oauth2_provider.models import AccessToken

from integrations.clients import jwks
from integrations.clients.assertions import ASSERTION_TYPE
from integrations.clients.models import ClientAssertion
from integrations.clients.services import api_client_create
from integrations.models import ApiClient, AuditLogEntry
from integrations.tasks import purge_expired_tokens
from tests.factories import ApiClientFactory
from tests.helpers import TOKEN_URL, assert_token_error, bearer, exchange
from tests.integrations.webhook_receiver import (  # noqa: F401 - fixtures
    Receiver,
    Reply,
    fake_dns,
    receiver,
    tls_certificate,
)
from tests.patients.factories import PatientFactory

pytestmark = pytest.mark.django_db

AUDIENCE = "http://testserver" + TOKEN_URL
SMART_CONFIGURATION_URL = "/fhir/R4/.well-known/smart-configuration"
REVOKE_URL = "/api/v1/auth/revoke"


# --- Keys and assertions, as a client builds them ------------------------------------------------------


def rsa_key(bits: int = 2048) -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=bits)


def ec_key(curve: ec.EllipticCurve | None = None) -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(curve or ec.SECP384R1())


def public_jwk(private_key: Any, kid: str, *, private: bool = False) -> dict[str, Any]:
    key = private_key if private else private_key.public_key()
    algorithm = RSAAlgorithm if isinstance(private_key, rsa.RSAPrivateKey) else ECAlgorithm
    return {**algorithm.to_jwk(key, as_dict=True), "kid": kid, "use": "sig"}


def sign(
    private_key: Any,
    client_id: str,
    *,
    alg: str = "RS384",
    kid: str = "key-1",
    lifetime: int = 240,
    **claims: Any,
) -> str:
    now = int(time.time())
    payload = {"iss": client_id, "sub": client_id, "aud": AUDIENCE, "exp": now + lifetime, "jti": str(uuid.uuid4())}
    payload.update(claims)
    return jwt.encode(payload, private_key, algorithm=alg, headers={"kid": kid, "typ": "JWT"})


def unsigned(client_id: str, **header: Any) -> str:
    """A JWT with `alg: none` and an empty signature, which no verifier may accept."""

    def part(value: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()

    now = int(time.time())
    claims = {"iss": client_id, "sub": client_id, "aud": AUDIENCE, "exp": now + 240, "jti": str(uuid.uuid4())}
    return f"{part({'alg': 'none', 'kid': 'key-1', **header})}.{part(claims)}."


def assertion_form(assertion: str, scope: str | None = None, **extra: str) -> dict[str, str]:
    form = {"grant_type": "client_credentials", "client_assertion_type": ASSERTION_TYPE, "client_assertion": assertion}
    if scope is not None:
        form["scope"] = scope
    return {**form, **extra}


def post_assertion(client: Client, assertion: str, scope: str | None = None, **extra: str) -> Any:
    return client.post(TOKEN_URL, assertion_form(assertion, scope, **extra))


@pytest.fixture
def rsa_private() -> rsa.RSAPrivateKey:
    return rsa_key()


@pytest.fixture
def smart_client(rsa_private: rsa.RSAPrivateKey) -> Callable[..., ApiClient]:
    def make(scopes: list[str], keys: list[dict[str, Any]] | None = None, **kwargs: Any) -> ApiClient:
        jwks = {"keys": keys if keys is not None else [public_jwk(rsa_private, "key-1")]}
        return ApiClientFactory(allowed_scopes=scopes, jwks=jwks, **kwargs)

    return make


def nothing_issued() -> None:
    assert AccessToken.objects.count() == 0
    assert ClientAssertion.objects.count() == 0


# --- Discovery ------------------------------------------------------------------------------------------


def test_smart_configuration_is_public_and_says_what_the_token_endpoint_accepts(client):
    response = client.get(SMART_CONFIGURATION_URL)

    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    body = response.json()
    assert body == {
        "token_endpoint": "http://testserver/api/v1/auth/token",
        "revocation_endpoint": "http://testserver/api/v1/auth/revoke",
        "token_endpoint_auth_methods_supported": ["private_key_jwt", "client_secret_basic", "client_secret_post"],
        "token_endpoint_auth_signing_alg_values_supported": ["RS384", "ES384"],
        "grant_types_supported": ["client_credentials"],
        "scopes_supported": body["scopes_supported"],
        "capabilities": [
            "client-confidential-asymmetric",
            "client-confidential-symmetric",
            "permission-v1",
            "permission-v2",
        ],
    }
    assert body["scopes_supported"][:3] == ["patients:read", "patients:write", "appointments:read"]
    for scope in ("system/*.rs", "system/*.read", "system/Patient.rs", "system/Observation.read", "system/Slot.rs"):
        assert scope in body["scopes_supported"]


def test_smart_configuration_refuses_other_methods(client):
    assert client.post(SMART_CONFIGURATION_URL).status_code == 405


def test_capability_statement_names_the_smart_service_and_the_token_endpoint(client):
    security = client.get("/fhir/R4/metadata").json()["rest"][0]["security"]

    codings = [coding for service in security["service"] for coding in service["coding"]]
    assert {"system": "http://terminology.hl7.org/CodeSystem/restful-security-service", "code": "SMART-on-FHIR"} in (
        codings
    )
    oauth_uris = security["extension"][0]
    assert oauth_uris["url"] == "http://fhir-registry.smarthealthit.org/StructureDefinition/oauth-uris"
    assert {"url": "token", "valueUri": "http://testserver/api/v1/auth/token"} in oauth_uris["extension"]


# --- Assertions that obtain a token ---------------------------------------------------------------------


def test_an_rs384_assertion_obtains_a_token_that_reads_fhir_and_the_rest_api(client, smart_client, rsa_private):
    api_client = smart_client(["patients:read", "appointments:read"])
    patient = PatientFactory()
    assertion = sign(rsa_private, api_client.client_id)

    response = post_assertion(client, assertion, scope="system/Patient.rs")

    assert response.status_code == 200, response.content
    body = response.json()
    assert set(body) == {"access_token", "token_type", "expires_in", "scope"}
    assert body["token_type"] == "Bearer"
    assert body["expires_in"] == 3600
    assert body["scope"] == "patients:read"
    assert response["Cache-Control"] == "no-store"
    stored = AccessToken.objects.get()
    assert (stored.application_id, stored.scope) == (api_client.pk, "patients:read")
    seen = ClientAssertion.objects.get()
    assert (seen.client_id, seen.jti) == (
        api_client.pk,
        jwt.decode(assertion, options={"verify_signature": False})["jti"],
    )

    token = body["access_token"]
    fhir = client.get("/fhir/R4/Patient", **bearer(token))
    assert fhir.status_code == 200, fhir.content
    assert [entry["resource"]["id"] for entry in fhir.json()["entry"]] == [str(patient.pk)]
    rest = client.get("/api/v1/patients", **bearer(token))
    assert rest.status_code == 200, rest.content
    assert [row["id"] for row in rest.json()] == [str(patient.pk)]
    # The token carries only the mapped scope, though the client is allowed appointments:read too.
    assert client.get("/api/v1/branches", **bearer(token)).status_code == 403


def test_an_es384_assertion_with_v1_wildcard_scope_gets_every_read_scope_the_client_is_allowed(client, smart_client):
    key = ec_key()
    api_client = smart_client(["patients:read", "patients:write", "lab:read"], keys=[public_jwk(key, "ec-1")])

    response = post_assertion(client, sign(key, api_client.client_id, alg="ES384", kid="ec-1"), scope="system/*.read")

    assert response.status_code == 200, response.content
    assert response.json()["scope"] == "patients:read lab:read"
    token = response.json()["access_token"]
    observations = client.get("/fhir/R4/Observation", **bearer(token))
    assert observations.status_code == 200, observations.content
    assert observations.json()["total"] == 0


def test_without_a_scope_an_assertion_gets_every_scope_the_client_is_allowed(client, smart_client, rsa_private):
    api_client = smart_client(["patients:read", "billing:read"])

    response = post_assertion(client, sign(rsa_private, api_client.client_id))

    assert response.status_code == 200, response.content
    assert response.json()["scope"] == "patients:read billing:read"


def test_smart_scopes_and_ours_may_be_mixed_and_write_permissions_map_to_nothing(client, smart_client, rsa_private):
    api_client = smart_client(["patients:read", "appointments:read", "emr:read"])

    response = post_assertion(
        client,
        sign(rsa_private, api_client.client_id),
        scope="appointments:read system/Patient.cruds system/Condition.read system/Observation.c",
    )

    assert response.status_code == 200, response.content
    assert response.json()["scope"] == "appointments:read patients:read emr:read"


def test_a_lab_type_maps_to_emr_read_for_a_client_allowed_the_record_and_not_lab_read(
    client, smart_client, rsa_private
):
    api_client = smart_client(["emr:read"])

    response = post_assertion(client, sign(rsa_private, api_client.client_id), scope="system/Observation.rs")

    assert response.status_code == 200, response.content
    assert response.json()["scope"] == "emr:read"
    observations = client.get("/fhir/R4/Observation", **bearer(response.json()["access_token"]))
    assert observations.status_code == 200, observations.content


def test_a_client_with_a_jwks_still_obtains_tokens_with_its_secret(client, smart_client):
    api_client = smart_client(["patients:read"])

    response = exchange(client, api_client.client_id, api_client.secret)

    assert response.status_code == 200, response.content
    assert response.json()["scope"] == "patients:read"


def test_an_assertion_may_name_its_client_id_in_the_form_too(client, smart_client, rsa_private):
    api_client = smart_client(["patients:read"])

    response = post_assertion(client, sign(rsa_private, api_client.client_id), client_id=api_client.client_id)

    assert response.status_code == 200, response.content


# --- Assertions that are refused ------------------------------------------------------------------------


def _other_rsa() -> rsa.RSAPrivateKey:
    return rsa_key()


REFUSED_ASSERTIONS: dict[str, tuple[Callable[[Any, str], str], str]] = {
    "hs256": (
        lambda key, cid: jwt.encode(
            {"iss": cid, "sub": cid, "aud": AUDIENCE, "exp": int(time.time()) + 60, "jti": "j"},
            "a-shared-secret-the-client-chose-32b",
            algorithm="HS256",
            headers={"kid": "key-1"},
        ),
        "The client assertion is signed with 'HS256'; only RS384 and ES384 are accepted.",
    ),
    "alg-none": (
        lambda key, cid: unsigned(cid),
        "The client assertion is signed with 'none'; only RS384 and ES384 are accepted.",
    ),
    "rs256": (
        lambda key, cid: sign(key, cid, alg="RS256"),
        "The client assertion is signed with 'RS256'; only RS384 and ES384 are accepted.",
    ),
    "wrong-aud": (
        lambda key, cid: sign(key, cid, aud="https://elsewhere.example/token"),
        "The client assertion's aud is not valid; it must be http://testserver/api/v1/auth/token.",
    ),
    "exp-10-minutes-ahead": (
        lambda key, cid: sign(key, cid, lifetime=600),
        "The client assertion's exp is more than 300 seconds ahead; sign a fresh, short-lived assertion for each "
        "token request.",
    ),
    "expired": (lambda key, cid: sign(key, cid, lifetime=-120), "The client assertion has expired."),
    "no-exp": (lambda key, cid: sign(key, cid, exp=None), "The client assertion lacks the claim(s) exp."),
    "no-jti": (lambda key, cid: sign(key, cid, jti=None), "The client assertion lacks the claim(s) jti."),
    "iss-not-the-client": (
        lambda key, cid: sign(key, cid, iss="someone-else"),
        "The client assertion's iss is not valid; it must be the client id.",
    ),
    "unknown-kid": (
        lambda key, cid: sign(key, cid, kid="key-2"),
        "The client's JWKS has no key with kid 'key-2'.",
    ),
    "key-not-in-the-jwks": (
        lambda key, cid: sign(_other_rsa(), cid, kid="key-1"),
        "The client assertion's signature does not verify with the key it names.",
    ),
    "no-kid": (
        lambda key, cid: jwt.encode(
            {"iss": cid, "sub": cid, "aud": AUDIENCE, "exp": int(time.time()) + 60, "jti": "j"}, key, algorithm="RS384"
        ),
        'The client assertion\'s header has no "kid" naming the signing key.',
    ),
    "not-a-jwt": (
        lambda key, cid: "not.a.jwt",
        "The client assertion is not a signed JWT (JWS compact serialization).",
    ),
}


@pytest.mark.parametrize("case", REFUSED_ASSERTIONS)
def test_a_bad_assertion_is_invalid_client_and_issues_nothing(client, smart_client, rsa_private, case):
    api_client = smart_client(["patients:read"])
    build, description = REFUSED_ASSERTIONS[case]
    assertion = build(rsa_private, api_client.client_id)
    if case == "not-a-jwt":
        response = post_assertion(client, assertion, client_id=api_client.client_id)
    else:
        response = post_assertion(client, assertion)

    body = assert_token_error(response, 401, "invalid_client")
    assert body["error_description"] == description
    nothing_issued()


def test_an_assertion_signed_by_the_ec_key_of_another_curve_is_refused(client, smart_client):
    p384 = ec_key()
    api_client = smart_client(["patients:read"], keys=[public_jwk(p384, "ec-1")])

    response = post_assertion(client, sign(ec_key(ec.SECP256R1()), api_client.client_id, alg="ES256", kid="ec-1"))

    body = assert_token_error(response, 401, "invalid_client")
    assert (
        body["error_description"] == "The client assertion is signed with 'ES256'; only RS384 and ES384 are accepted."
    )
    nothing_issued()


def test_an_rs384_assertion_naming_an_ec_key_is_refused(client, smart_client, rsa_private):
    api_client = smart_client(["patients:read"], keys=[public_jwk(ec_key(), "ec-1")])

    response = post_assertion(client, sign(rsa_private, api_client.client_id, kid="ec-1"))

    body = assert_token_error(response, 401, "invalid_client")
    assert body["error_description"] == "The key 'ec-1' is a EC key, which cannot verify RS384."
    nothing_issued()


def test_an_assertion_for_an_unknown_client_is_invalid_client(client, rsa_private):
    response = post_assertion(client, sign(rsa_private, "no-such-client"))

    assert_token_error(response, 401, "invalid_client")
    nothing_issued()


def test_an_assertion_for_a_client_without_a_jwks_is_refused(client, rsa_private):
    api_client = ApiClientFactory(allowed_scopes=["patients:read"])

    response = post_assertion(client, sign(rsa_private, api_client.client_id))

    body = assert_token_error(response, 401, "invalid_client")
    assert body["error_description"] == ("This client has no registered JWKS, so it cannot authenticate by assertion.")
    nothing_issued()


def test_a_replayed_assertion_is_refused_and_the_first_token_stands(client, smart_client, rsa_private):
    api_client = smart_client(["patients:read"])
    assertion = sign(rsa_private, api_client.client_id)
    assert post_assertion(client, assertion).status_code == 200

    response = post_assertion(client, assertion)

    body = assert_token_error(response, 401, "invalid_client")
    assert body["error_description"] == "This client assertion was used already (its jti was seen); sign a new one."
    assert AccessToken.objects.count() == 1
    assert ClientAssertion.objects.count() == 1


def test_a_jti_is_per_client(client, smart_client, rsa_private):
    first, second = smart_client(["patients:read"]), smart_client(["patients:read"])

    for api_client in (first, second):
        response = post_assertion(client, sign(rsa_private, api_client.client_id, jti="shared-jti"))
        assert response.status_code == 200, response.content

    assert sorted(ClientAssertion.objects.values_list("client_id", flat=True)) == sorted([first.pk, second.pk])


@pytest.mark.django_db(transaction=True)
def test_one_assertion_sent_twice_at_once_on_two_connections_yields_exactly_one_token(smart_client, rsa_private):
    api_client = smart_client(["patients:read"])
    assertion = sign(rsa_private, api_client.client_id)
    barrier = threading.Barrier(2)
    statuses: list[int] = []

    def send() -> None:
        try:
            http = Client()
            barrier.wait()
            statuses.append(post_assertion(http, assertion).status_code)
        finally:
            connection.close()  # each thread had its own database connection

    threads = [threading.Thread(target=send) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)

    assert sorted(statuses) == [200, 401]
    assert AccessToken.objects.count() == 1
    assert ClientAssertion.objects.count() == 1


def test_an_assertion_with_a_write_only_scope_is_invalid_scope_and_records_no_jti(client, smart_client, rsa_private):
    api_client = smart_client(["patients:read", "patients:write"])
    assertion = sign(rsa_private, api_client.client_id)

    response = post_assertion(client, assertion, scope="system/Patient.cud")

    body = assert_token_error(response, 400, "invalid_scope")
    assert body["error_description"] == (
        "None of the requested SMART scopes maps onto a scope this client is allowed; the server grants read "
        "access only."
    )
    nothing_issued()
    # Nothing was recorded, so the same assertion still works with a scope that can be granted.
    assert post_assertion(client, assertion, scope="system/Patient.rs").status_code == 200


@pytest.mark.parametrize(
    ("scope", "description"),
    [
        (
            "system/Observation.rs",
            "None of the requested SMART scopes maps onto a scope this client is allowed; "
            "the server grants read access only.",
        ),
        (
            "patient/Patient.rs",
            "'patient/Patient.rs' is not a SMART Backend Services scope: use system/<Type>.rs "
            "(v2), system/<Type>.read (v1), or * for every type.",
        ),
        (
            "system/Patient.sr",
            "'system/Patient.sr' is not a SMART Backend Services scope: use system/<Type>.rs "
            "(v2), system/<Type>.read (v1), or * for every type.",
        ),
        (
            "system/Observation.rs?category=laboratory",
            "'system/Observation.rs?category=laboratory': SMART scopes narrowed by a query are not supported.",
        ),
        ("billing:read", "The requested scope is unknown or not allowed for this client."),
    ],
)
def test_scopes_the_client_cannot_have_are_invalid_scope(client, smart_client, rsa_private, scope, description):
    api_client = smart_client(["patients:read"])

    response = post_assertion(client, sign(rsa_private, api_client.client_id), scope=scope)

    body = assert_token_error(response, 400, "invalid_scope")
    assert body["error_description"] == description
    nothing_issued()


def test_an_assertion_only_client_is_refused_with_its_secret(client, smart_client, rsa_private):
    api_client = smart_client(["patients:read"], assertion_only=True)

    response = exchange(client, api_client.client_id, api_client.secret)

    body = assert_token_error(response, 401, "invalid_client")
    assert body["error_description"] == (
        "This client authenticates with a signed client assertion (private_key_jwt) only."
    )
    nothing_issued()
    assert post_assertion(client, sign(rsa_private, api_client.client_id)).status_code == 200


@pytest.mark.parametrize(
    ("form", "description"),
    [
        ({"client_assertion_type": "urn:example:other"}, f"client_assertion_type must be {ASSERTION_TYPE}."),
        ({"client_assertion": ""}, "client_assertion is missing."),
        ({"client_secret": "x"}, "Send either a client assertion or the client secret, not both."),
    ],
)
def test_malformed_assertion_requests_are_invalid_request(client, smart_client, rsa_private, form, description):
    api_client = smart_client(["patients:read"])

    response = client.post(TOKEN_URL, {**assertion_form(sign(rsa_private, api_client.client_id)), **form})

    body = assert_token_error(response, 400, "invalid_request")
    assert body["error_description"] == description
    nothing_issued()


def test_an_assertion_only_client_revokes_its_token_with_an_assertion_used_once(client, smart_client, rsa_private):
    api_client = smart_client(["patients:read"], assertion_only=True)
    token = post_assertion(client, sign(rsa_private, api_client.client_id)).json()["access_token"]
    assertion = sign(rsa_private, api_client.client_id)

    revoked = client.post(REVOKE_URL, {**assertion_form(assertion), "token": token})

    assert revoked.status_code == 200, revoked.content
    assert AccessToken.objects.count() == 0
    assert client.get("/fhir/R4/Patient", **bearer(token)).status_code == 401
    replayed = client.post(REVOKE_URL, {**assertion_form(assertion), "token": token})
    body = assert_token_error(replayed, 401, "invalid_client")
    assert body["error_description"] == "This client assertion was used already (its jti was seen); sign a new one."
    assert ClientAssertion.objects.count() == 2


def test_a_bad_assertion_at_the_revocation_endpoint_revokes_nothing(client, smart_client, rsa_private):
    api_client = smart_client(["patients:read"])
    token = post_assertion(client, sign(rsa_private, api_client.client_id)).json()["access_token"]

    response = client.post(
        REVOKE_URL, {**assertion_form(sign(rsa_private, api_client.client_id, lifetime=-120)), "token": token}
    )

    body = assert_token_error(response, 401, "invalid_client")
    assert body["error_description"] == "The client assertion has expired."
    assert AccessToken.objects.count() == 1
    assert ClientAssertion.objects.count() == 1


def test_the_hourly_token_purge_forgets_the_jtis_of_expired_assertions(smart_client):
    api_client = smart_client(["patients:read"])
    now = timezone.now()
    ClientAssertion.objects.create(client=api_client, jti="old", expires_at=now - timedelta(seconds=1))
    ClientAssertion.objects.create(client=api_client, jti="current", expires_at=now + timedelta(minutes=5))

    assert purge_expired_tokens() == 1

    assert list(ClientAssertion.objects.values_list("jti", flat=True)) == ["current"]


def test_a_valid_assertion_gets_a_token_from_an_address_over_its_anonymous_limit(
    client, smart_client, rsa_private, settings
):
    api_client = smart_client(["patients:read"])
    settings.ANONYMOUS_RATE_LIMIT = 2
    address = {"REMOTE_ADDR": "203.0.113.50"}
    assert [client.get("/api/v1/patients", **address).status_code for _ in range(3)] == [401, 401, 429]

    valid = sign(rsa_private, api_client.client_id)
    issued = client.post(TOKEN_URL, assertion_form(valid), **address)
    replayed = client.post(TOKEN_URL, assertion_form(valid), **address)  # a jti seen before proves nothing
    wrong_key = client.post(TOKEN_URL, assertion_form(sign(rsa_key(), api_client.client_id)), **address)
    no_signature = client.post(TOKEN_URL, assertion_form(unsigned(api_client.client_id)), **address)

    assert issued.status_code == 200, issued.content
    assert issued.json()["scope"] == "patients:read"
    for refused in (replayed, wrong_key, no_signature):
        body = assert_token_error(refused, 429, "rate_limited")
        assert body["error_description"] == f"Too many failed requests; retry in {refused['Retry-After']} s."
    assert AccessToken.objects.count() == 1
    assert ClientAssertion.objects.count() == 1


# --- Registered key sets --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("keys", "message"),
    [
        (
            lambda: [public_jwk(rsa_key(), "k", private=True)],
            "Key 1 holds private key material (d, p, q, dp, dq, qi): register the public key only, and keep the "
            "private key with the client.",
        ),
        (
            lambda: [public_jwk(ec_key(), "k", private=True)],
            "Key 1 holds private key material (d): register the public key only, and keep the private key with "
            "the client.",
        ),
        (
            lambda: [public_jwk(rsa_key(1024), "small")],
            "Key 'small' is an RSA key of 1024 bits; at least 2048 are required.",
        ),
        (
            lambda: [public_jwk(ec_key(ec.SECP256R1()), "p256")],
            "Key 'p256' is on the curve 'P-256'; only P-384 (ES384) is accepted.",
        ),
        (
            lambda: [{"kty": "oct", "kid": "h"}],
            "Key 'h' has the key type 'oct'; only RSA and EC public keys are accepted.",
        ),
        (lambda: [{**public_jwk(rsa_key(), "k"), "kid": ""}], 'Key 1 has no "kid"; assertions name their key by it.'),
        (
            lambda: [public_jwk(rsa_key(), "k"), public_jwk(rsa_key(), "k")],
            "Two keys have the kid 'k'; each key needs its own.",
        ),
        (lambda: [], "The JWKS holds no key."),
    ],
)
def test_a_registered_jwks_must_hold_public_signing_keys_only(keys, message):
    with pytest.raises(ValidationError) as refused:
        api_client_create(name="Analytics", scopes=["patients:read"], jwks={"keys": keys()})

    assert refused.value.message_dict == {"jwks": [message]}
    assert ApiClient.objects.count() == 0


def test_a_client_has_either_a_jwks_url_or_inline_keys(receiver):  # noqa: F811
    with pytest.raises(ValidationError) as refused:
        api_client_create(
            name="Both",
            scopes=["patients:read"],
            jwks={"keys": [public_jwk(rsa_key(), "k")]},
            jwks_uri=receiver.url("/jwks.json"),
        )

    assert refused.value.messages == ["Give either a JWKS URL or inline keys, not both."]
    assert ApiClient.objects.count() == 0


def test_an_assertion_only_client_needs_keys():
    with pytest.raises(ValidationError) as refused:
        api_client_create(name="No keys", scopes=["patients:read"], assertion_only=True)

    assert refused.value.messages == ["An assertion-only client needs a JWKS (URL or inline keys)."]


def test_a_jwks_url_must_be_https_outside_development(settings):
    settings.WEBHOOK_ALLOW_PRIVATE_TARGETS = False

    with pytest.raises(ValidationError) as refused:
        api_client_create(name="Plain", scopes=["patients:read"], jwks_uri="http://keys.example.com/jwks.json")

    assert refused.value.message_dict == {"jwks_uri": ["The URL must use https."]}


def test_keys_served_at_a_jwks_url_are_fetched_cached_and_refetched_for_a_new_kid(client, receiver):  # noqa: F811
    cache.clear()
    first, second = rsa_key(), ec_key()
    receiver.default = Reply(body=json.dumps({"keys": [public_jwk(first, "2026-1")]}).encode())
    api_client, _ = api_client_create(
        name="Bulk client", scopes=["patients:read"], jwks_uri=receiver.url("/.well-known/jwks.json")
    )

    for _ in range(2):
        response = post_assertion(client, sign(first, api_client.client_id, kid="2026-1"))
        assert response.status_code == 200, response.content
    assert [(r.method, r.path) for r in receiver.requests] == [("GET", "/.well-known/jwks.json")]

    # The client rotates its key: the first assertion naming the new kid refetches the set once.
    receiver.default = Reply(body=json.dumps({"keys": [public_jwk(second, "2026-2")]}).encode())
    response = post_assertion(client, sign(second, api_client.client_id, alg="ES384", kid="2026-2"))
    assert response.status_code == 200, response.content
    assert len(receiver.requests) == 2

    # An unknown kid costs a refetch only once per JWKS_REFETCH_INTERVAL_SECONDS (the last was just now).
    response = post_assertion(client, sign(first, api_client.client_id, kid="2026-1"))
    body = assert_token_error(response, 401, "invalid_client")
    assert body["error_description"] == "The client's JWKS has no key with kid '2026-1'."
    assert len(receiver.requests) == 2
    cache.delete(jwks._refetch_key(api_client.pk, api_client.jwks_uri))  # the interval has passed
    response = post_assertion(client, sign(first, api_client.client_id, kid="2026-1"))
    assert_token_error(response, 401, "invalid_client")
    assert len(receiver.requests) == 3
    assert AccessToken.objects.count() == 3


def test_assertions_naming_made_up_keys_refetch_a_jwks_url_at_most_once_an_interval(client, receiver):  # noqa: F811
    cache.clear()
    key = rsa_key()
    receiver.default = Reply(body=json.dumps({"keys": [public_jwk(key, "real")]}).encode())
    api_client, _ = api_client_create(name="Bulk client", scopes=["patients:read"], jwks_uri=receiver.url("/jwks"))
    cache.clear()
    fetched_before = len(receiver.requests)
    assert post_assertion(client, sign(key, api_client.client_id, kid="real")).status_code == 200

    refused = [post_assertion(client, sign(key, api_client.client_id, kid=f"made-up-{n}")) for n in range(10)]

    assert [r.status_code for r in refused] == [401] * 10
    # The first fetch, and one refetch for the first made-up kid; none for the nine after it.
    assert len(receiver.requests) == fetched_before + 2
    assert post_assertion(client, sign(key, api_client.client_id, kid="real")).status_code == 200
    assert AccessToken.objects.count() == 2


def test_a_jwks_url_that_fails_is_not_fetched_again_within_the_interval(client, receiver):  # noqa: F811
    cache.clear()
    key = rsa_key()
    receiver.default = Reply(body=json.dumps({"keys": [public_jwk(key, "k")]}).encode())
    api_client, _ = api_client_create(name="Bulk client", scopes=["patients:read"], jwks_uri=receiver.url("/jwks"))
    cache.clear()
    receiver.default = Reply(status=503, body=b"down")
    fetched_before = len(receiver.requests)

    refused = [post_assertion(client, sign(key, api_client.client_id, kid="k")) for _ in range(5)]

    descriptions = [assert_token_error(r, 401, "invalid_client")["error_description"] for r in refused]
    assert descriptions == ["The client's JWKS cannot be used: The JWKS URL answered 503, not 200."] * 5
    assert len(receiver.requests) == fetched_before + 1
    nothing_issued()


def test_a_jwks_url_serving_a_private_key_refuses_every_assertion(client, receiver):  # noqa: F811
    cache.clear()
    key = rsa_key()
    receiver.default = Reply(body=json.dumps({"keys": [public_jwk(key, "k")]}).encode())
    api_client, _ = api_client_create(name="Leaky", scopes=["patients:read"], jwks_uri=receiver.url("/jwks"))
    receiver.default = Reply(body=json.dumps({"keys": [public_jwk(key, "k", private=True)]}).encode())

    response = post_assertion(client, sign(key, api_client.client_id, kid="k"))

    body = assert_token_error(response, 401, "invalid_client")
    assert body["error_description"] == (
        "The client's JWKS cannot be used: Key 1 holds private key material (d, p, q, dp, dq, qi): register the "
        "public key only, and keep the private key with the client."
    )
    nothing_issued()


def test_a_jwks_url_over_tls_is_fetched_from_the_checked_address_with_the_host_name_verified(
    client,
    settings,
    monkeypatch,
    fake_dns,  # noqa: F811
    tls_certificate,  # noqa: F811
):
    cache.clear()
    settings.WEBHOOK_ALLOW_PRIVATE_TARGETS = True  # the name resolves to 127.0.0.1, where the test server is
    certificate = tls_certificate("keys.example.com")
    server = Receiver(tls=certificate.server_context())
    try:
        monkeypatch.setattr(jwks, "ca_bundle", lambda: certificate.cert_path)
        fake_dns.records["keys.example.com"] = ["127.0.0.1"]
        key = ec_key()
        server.default = Reply(body=json.dumps({"keys": [public_jwk(key, "e1")]}).encode())
        url = server.url("/jwks.json", host="keys.example.com")
        api_client, _ = api_client_create(name="TLS", scopes=["patients:read"], jwks_uri=url)

        response = post_assertion(client, sign(key, api_client.client_id, alg="ES384", kid="e1"))

        assert response.status_code == 200, response.content
        (request,) = server.requests
        assert request.server_name == "keys.example.com"  # SNI: the name, though the connection went to the address
        assert request.headers["host"] == f"keys.example.com:{server.port}"
        assert fake_dns.lookups == ["keys.example.com"]
    finally:
        server.close()


def test_a_jwks_url_whose_name_resolves_to_a_private_address_is_refused(client, settings, fake_dns):  # noqa: F811
    cache.clear()
    settings.WEBHOOK_ALLOW_PRIVATE_TARGETS = False
    fake_dns.records["keys.example.com"] = ["10.1.2.3"]
    api_client, _ = api_client_create(
        name="Rebound", scopes=["patients:read"], jwks_uri="https://keys.example.com/jwks.json"
    )

    response = post_assertion(client, sign(rsa_key(), api_client.client_id))

    body = assert_token_error(response, 401, "invalid_client")
    assert body["error_description"] == (
        "The client's JWKS cannot be used: The JWKS URL is refused: keys.example.com resolves to a non-public "
        "address: 10.1.2.3 is a private address (10.0.0.0/8)."
    )
    nothing_issued()


# --- Audit and a client over real HTTP -----------------------------------------------------------------


def test_assertion_exchanges_are_audited_with_the_client_and_never_the_assertion(client, smart_client, rsa_private):
    api_client = smart_client(["patients:read"])
    accepted = sign(rsa_private, api_client.client_id)
    refused = sign(rsa_private, api_client.client_id, kid="nope")

    assert post_assertion(client, accepted).status_code == 200
    assert post_assertion(client, refused).status_code == 401

    rows = list(AuditLogEntry.objects.order_by("id").values("client_id", "actor", "status", "route", "path"))
    assert rows == [
        {"client_id": api_client.pk, "actor": "", "status": 200, "route": "api/v1/auth/token", "path": TOKEN_URL},
        {
            "client_id": api_client.pk,
            "actor": f"client-id-tried:{api_client.client_id}",
            "status": 401,
            "route": "api/v1/auth/token",
            "path": TOKEN_URL,
        },
    ]
    stored = json.dumps(list(AuditLogEntry.objects.values()), default=str)
    for secret in (accepted, refused, accepted.split(".")[2]):
        assert secret not in stored


def test_a_refused_assertion_of_an_unknown_client_names_the_client_id_it_claimed(client, rsa_private):
    assert post_assertion(client, sign(rsa_private, "claimed-id")).status_code == 401

    row = AuditLogEntry.objects.get()
    assert (row.client_id, row.actor, row.status) == (None, "client-id-tried:claimed-id", 401)


@pytest.mark.django_db(transaction=True)
def test_an_independent_client_discovers_the_token_endpoint_and_reads_over_http(live_server, rsa_private):
    api_client = ApiClientFactory(
        allowed_scopes=["patients:read", "appointments:read"],
        jwks={"keys": [public_jwk(rsa_private, "key-1")]},
        assertion_only=True,
    )
    patient = PatientFactory()
    session = requests.Session()

    configuration = session.get(live_server.url + SMART_CONFIGURATION_URL).json()
    token_url = configuration["token_endpoint"]
    assert token_url == live_server.url + TOKEN_URL
    now = int(time.time())
    claims = {"iss": api_client.client_id, "sub": api_client.client_id, "aud": token_url, "exp": now + 300}
    assertion = jwt.encode(
        {**claims, "jti": str(uuid.uuid4())}, rsa_private, algorithm="RS384", headers={"kid": "key-1"}
    )
    issued = session.post(token_url, data=assertion_form(assertion, scope="system/Patient.rs system/Slot.read"))

    assert issued.status_code == 200, issued.text
    assert issued.json()["scope"] == "patients:read appointments:read"
    headers = {"Authorization": f"Bearer {issued.json()['access_token']}"}
    bundle = session.get(live_server.url + "/fhir/R4/Patient", headers=headers)
    assert bundle.status_code == 200, bundle.text
    assert [entry["resource"]["id"] for entry in bundle.json()["entry"]] == [str(patient.pk)]
    branches = session.get(live_server.url + "/api/v1/branches", headers=headers)
    assert branches.status_code == 200, branches.text
