"""The anonymous per-address limit at the token endpoints (docs/api-rules.md §3): requests that do not
authenticate their client count and are refused beyond ANONYMOUS_RATE_LIMIT a minute; a request with valid
client credentials is neither counted nor refused, whatever its address sent before."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from oauth2_provider.models import get_access_token_model

from clinic.api import ratelimit
from integrations.models import AuditLogEntry
from tests.helpers import TOKEN_URL, assert_token_error, basic_auth, bearer, exchange, stored_token

AccessToken = get_access_token_model()
REVOKE_URL = "/api/v1/auth/revoke"
_ADDRESSES = (f"198.18.0.{n}" for n in itertools.count(1))  # Redis keeps each address's log for the session


@pytest.fixture
def address() -> dict[str, str]:
    """The client address of one test's requests, its own."""
    return {"REMOTE_ADDR": next(_ADDRESSES)}


def assert_refused_for_the_address(response: Any, limit: int) -> None:
    """The token endpoints' 429 for an address over its anonymous limit: an RFC 6749 body, never cached."""
    body = assert_token_error(response, 429, "rate_limited")
    wait = int(response["Retry-After"])
    assert 1 <= wait <= ratelimit.WINDOW_SECONDS
    assert body == {"error": "rate_limited", "error_description": f"Too many failed requests; retry in {wait} s."}
    assert (response["RateLimit-Limit"], response["RateLimit-Remaining"]) == (str(limit), "0")
    assert response["RateLimit-Reset"] == response["Retry-After"]


def exhaust(client: Any, limit: int, address: dict[str, str]) -> None:
    """`limit` failed requests from `address`, of every kind that counts."""
    kinds = [
        lambda: client.get("/api/v1/branches", **address),  # no token: 401
        lambda: client.get("/api/v1/branches", HTTP_AUTHORIZATION="Bearer made-up", **address),  # 401
        lambda: exchange(client, "no-such-client", "guess", **address),  # 401 invalid_client
        lambda: client.post(TOKEN_URL, {"grant_type": "password"}, **address),  # 400, no credentials
    ]
    statuses = [kinds[n % len(kinds)]().status_code for n in range(limit)]
    assert set(statuses) <= {400, 401}, statuses


def test_after_60_failed_requests_from_an_address_valid_credentials_still_get_a_token(
    client, address, settings, api_client_factory
):
    """The issue's finding: after 60 failed requests a minute from an address, valid clients there got 429."""
    settings.ANONYMOUS_RATE_LIMIT = 60
    api_client = api_client_factory(scopes=["appointments:read"])
    exhaust(client, 60, address)
    AuditLogEntry.objects.all().delete()

    by_form = exchange(client, api_client.client_id, api_client.secret, **address)
    by_basic = client.post(
        TOKEN_URL,
        {"grant_type": "client_credentials"},
        **basic_auth(api_client.client_id, api_client.secret),
        **address,
    )
    wrong_secret = exchange(client, api_client.client_id, "guess", **address)
    unknown_client = exchange(client, "no-such-client", api_client.secret, **address)
    no_credentials = client.post(TOKEN_URL, {"grant_type": "client_credentials"}, **address)
    no_token = client.get("/api/v1/branches", **address)

    for issued in (by_form, by_basic):
        assert issued.status_code == 200, issued.content
        assert issued.json()["scope"] == "appointments:read"
        assert issued["Cache-Control"] == "no-store"
        assert client.get("/api/v1/branches", **bearer(issued.json()["access_token"]), **address).status_code == 200
    # The exchanges report the client's token budget (TOKEN_RATE_LIMIT), not the address's.
    assert [(r["RateLimit-Limit"], r["RateLimit-Remaining"]) for r in (by_form, by_basic)] == [
        ("60", "59"),
        ("60", "58"),
    ]
    for refused in (wrong_secret, unknown_client, no_credentials):
        assert_refused_for_the_address(refused, limit=60)
    assert no_token.status_code == 429
    assert no_token.json()["code"] == "rate_limited"
    assert AccessToken.objects.filter(application=api_client).count() == 2
    rows = AuditLogEntry.objects.filter(path=TOKEN_URL).order_by("id")
    assert [(row.status, row.client_id, row.actor) for row in rows] == [
        (200, api_client.pk, ""),
        (200, api_client.pk, ""),
        (429, api_client.pk, f"client-id-tried:{api_client.client_id}"),
        (429, None, "client-id-tried:no-such-client"),
        (429, None, ""),
    ]


def test_requests_with_valid_credentials_use_none_of_the_address_budget(client, address, settings, api_client_factory):
    settings.ANONYMOUS_RATE_LIMIT = 2
    api_client = api_client_factory(scopes=["appointments:read"], ip_allowlist=["198.18.0.0/16"])
    elsewhere = api_client_factory(scopes=["appointments:read"], ip_allowlist=["10.0.0.0/8"])

    issued = [exchange(client, api_client.client_id, api_client.secret, **address) for _ in range(5)]
    # Authenticated, then refused for something else: not a guess, so neither counted nor turned into 429.
    bad_scope = [
        exchange(client, api_client.client_id, api_client.secret, {"scope": "billing:write"}, **address)
        for _ in range(3)
    ]
    outside_allow_list = [exchange(client, elsewhere.client_id, elsewhere.secret, **address) for _ in range(3)]
    guesses = [exchange(client, api_client.client_id, "guess", **address) for _ in range(3)]

    assert [r.status_code for r in issued] == [200] * 5
    assert [assert_token_error(r, 400, "invalid_scope")["error"] for r in bad_scope] == ["invalid_scope"] * 3
    assert [assert_token_error(r, 403, "access_denied")["error"] for r in outside_allow_list] == ["access_denied"] * 3
    assert [r.status_code for r in guesses] == [401, 401, 429]
    assert_refused_for_the_address(guesses[-1], limit=2)
    # Over the limit now, an authenticated client's refusal is still its own answer, not the address's 429.
    assert (
        exchange(client, api_client.client_id, api_client.secret, {"scope": "billing:write"}, **address).status_code
        == 400
    )
    assert AccessToken.objects.filter(application=api_client).count() == 5
    assert not AccessToken.objects.filter(application=elsewhere).exists()


def test_below_the_limit_a_wrong_secret_is_401_and_another_address_is_not_affected(
    client, address, settings, api_client_factory
):
    settings.ANONYMOUS_RATE_LIMIT = 1
    api_client = api_client_factory(scopes=["appointments:read"])

    first = exchange(client, api_client.client_id, "guess", **address)
    second = exchange(client, api_client.client_id, "guess", **address)
    elsewhere = exchange(client, api_client.client_id, "guess", REMOTE_ADDR="198.51.100.41")

    assert assert_token_error(first, 401, "invalid_client")["error"] == "invalid_client"
    assert (first["RateLimit-Limit"], first["RateLimit-Remaining"]) == ("1", "0")
    assert_refused_for_the_address(second, limit=1)
    assert elsewhere.status_code == 401
    assert not AccessToken.objects.exists()


def test_revocation_with_valid_credentials_works_from_an_address_over_its_limit(
    client, address, settings, api_client_factory
):
    api_client = api_client_factory(scopes=["appointments:read"])
    token = stored_token(api_client)
    settings.ANONYMOUS_RATE_LIMIT = 3
    exhaust(client, 3, address)

    guessed = client.post(REVOKE_URL, {"token": token}, **basic_auth(api_client.client_id, "guess"), **address)
    still_valid = client.get("/api/v1/branches", **bearer(token), **address)
    revoked = client.post(
        REVOKE_URL, {"token": token}, **basic_auth(api_client.client_id, api_client.secret), **address
    )

    assert_refused_for_the_address(guessed, limit=3)
    assert still_valid.status_code == 200  # the refused revocation changed nothing
    assert revoked.status_code == 200
    assert not AccessToken.objects.filter(application=api_client).exists()
    assert client.get("/api/v1/branches", **bearer(token), **address).status_code == 429  # now an invalid token
