"""POST /api/v1/auth/token and /api/v1/auth/revoke (client credentials), and bearer tokens on the API."""

from __future__ import annotations

import hashlib
from datetime import timedelta

import pytest
from django.utils import timezone
from oauth2_provider.models import AccessToken, RefreshToken
from oauthlib.oauth2 import BackendApplicationClient
from oauthlib.oauth2.rfc6749.errors import InvalidClientError
from requests.auth import HTTPBasicAuth
from requests_oauthlib import OAuth2Session

from integrations.clients.services import api_client_set_active
from integrations.models import ApiClient
from tests.factories import BranchFactory
from tests.helpers import TOKEN_URL, assert_problem, assert_token_error, basic_auth, bearer

pytestmark = pytest.mark.django_db

REVOKE_URL = "/api/v1/auth/revoke"
BRANCHES_URL = "/api/v1/branches"


def credentials(api_client, **extra):
    return {
        "grant_type": "client_credentials",
        "client_id": api_client.client_id,
        "client_secret": api_client.secret,
        **extra,
    }


# --- A real OAuth client library against a real HTTP server ---------------------------------------


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("form_credentials", [False, True], ids=["http-basic", "form"])
def test_requests_oauthlib_obtains_a_token_and_lists_branches(
    live_server, monkeypatch, api_client_factory, form_credentials
):
    monkeypatch.setenv("OAUTHLIB_INSECURE_TRANSPORT", "1")  # the live server speaks plain http
    BranchFactory(code="BLR", name="Bengaluru")
    api_client = api_client_factory(scopes=["appointments:read", "patients:read"])
    session = OAuth2Session(client=BackendApplicationClient(client_id=api_client.client_id))

    if form_credentials:
        token = session.fetch_token(
            token_url=live_server.url + TOKEN_URL,
            client_id=api_client.client_id,
            client_secret=api_client.secret,
            include_client_id=True,
        )
    else:
        token = session.fetch_token(
            token_url=live_server.url + TOKEN_URL,
            auth=HTTPBasicAuth(api_client.client_id, api_client.secret),
        )

    assert token["token_type"] == "Bearer"
    assert token["expires_in"] == 3600
    assert sorted(token["scope"]) == ["appointments:read", "patients:read"]
    assert "refresh_token" not in token
    stored = AccessToken.objects.get()
    assert stored.application_id == api_client.pk
    assert stored.token_checksum == hashlib.sha256(token["access_token"].encode()).hexdigest()

    response = session.get(live_server.url + BRANCHES_URL)
    assert response.status_code == 200, response.text
    assert [branch["code"] for branch in response.json()] == ["BLR"]


@pytest.mark.django_db(transaction=True)
def test_requests_oauthlib_default_basic_auth_works_and_wrong_secret_is_rejected(
    live_server, monkeypatch, api_client_factory
):
    monkeypatch.setenv("OAUTHLIB_INSECURE_TRANSPORT", "1")
    api_client = api_client_factory(scopes=["appointments:read"])
    session = OAuth2Session(client=BackendApplicationClient(client_id=api_client.client_id))

    # Without include_client_id, requests-oauthlib sends client_id/client_secret as HTTP Basic.
    token = session.fetch_token(
        token_url=live_server.url + TOKEN_URL, client_id=api_client.client_id, client_secret=api_client.secret
    )
    assert token["scope"] == ["appointments:read"]
    assert session.get(live_server.url + BRANCHES_URL).status_code == 200

    other = OAuth2Session(client=BackendApplicationClient(client_id=api_client.client_id))
    with pytest.raises(InvalidClientError):
        other.fetch_token(
            token_url=live_server.url + TOKEN_URL, client_id=api_client.client_id, client_secret="not-the-secret"
        )
    assert AccessToken.objects.count() == 1


# --- The token endpoint ---------------------------------------------------------------------------


def test_token_response_has_exactly_the_rfc6749_fields_and_no_refresh_token(client, api_client_factory):
    api_client = api_client_factory(scopes=["patients:read", "appointments:read"])
    response = client.post(TOKEN_URL, credentials(api_client))
    assert response.status_code == 200, response.content
    assert response["Content-Type"] == "application/json"
    assert response["Cache-Control"] == "no-store"
    assert response["Pragma"] == "no-cache"
    body = response.json()
    assert set(body) == {"access_token", "token_type", "expires_in", "scope"}
    assert body["token_type"] == "Bearer"
    assert body["expires_in"] == 3600
    assert sorted(body["scope"].split()) == ["appointments:read", "patients:read"]
    assert len(body["access_token"]) >= 30
    assert AccessToken.objects.count() == 1
    assert RefreshToken.objects.count() == 0


def test_http_basic_credentials_are_accepted(client, api_client_factory):
    api_client = api_client_factory(scopes=["appointments:read"])
    response = client.post(
        TOKEN_URL, {"grant_type": "client_credentials"}, **basic_auth(api_client.client_id, api_client.secret)
    )
    assert response.status_code == 200, response.content
    assert response.json()["scope"] == "appointments:read"
    assert AccessToken.objects.get().application_id == api_client.pk


def test_scope_parameter_asks_for_a_subset_of_the_allowed_scopes(client, api_client_factory):
    api_client = api_client_factory(scopes=["patients:read", "patients:write", "appointments:read"])
    response = client.post(TOKEN_URL, credentials(api_client, scope="patients:read appointments:read"))
    assert response.status_code == 200, response.content
    assert sorted(response.json()["scope"].split()) == ["appointments:read", "patients:read"]
    assert sorted(AccessToken.objects.get().scope.split()) == ["appointments:read", "patients:read"]


def test_no_scope_parameter_gives_all_the_clients_allowed_scopes_and_no_other(client, api_client_factory):
    api_client = api_client_factory(scopes=["billing:read", "lab:read"])
    response = client.post(TOKEN_URL, credentials(api_client))
    assert response.status_code == 200, response.content
    assert sorted(response.json()["scope"].split()) == ["billing:read", "lab:read"]
    assert sorted(AccessToken.objects.get().scope.split()) == ["billing:read", "lab:read"]


def test_scope_outside_the_allowed_set_returns_400_invalid_scope(client, api_client_factory):
    api_client = api_client_factory(scopes=["appointments:read"])
    response = client.post(TOKEN_URL, credentials(api_client, scope="appointments:read patients:write"))
    assert_token_error(response, 400, "invalid_scope")
    assert AccessToken.objects.count() == 0


def test_unknown_scope_returns_400_invalid_scope(client, api_client_factory):
    api_client = api_client_factory(scopes=["appointments:read"])
    response = client.post(TOKEN_URL, credentials(api_client, scope="admin:everything"))
    assert_token_error(response, 400, "invalid_scope")
    assert AccessToken.objects.count() == 0


def test_client_without_any_allowed_scope_cannot_obtain_a_token(client, api_client_factory):
    api_client = api_client_factory(scopes=["appointments:read"])
    ApiClient.objects.filter(pk=api_client.pk).update(allowed_scopes=[])
    response = client.post(TOKEN_URL, credentials(api_client))
    assert response.status_code == 400, response.content
    assert response.json()["error"] == "invalid_scope"
    assert AccessToken.objects.count() == 0


def test_wrong_secret_returns_401_invalid_client(client, api_client_factory):
    api_client = api_client_factory()
    # Flip the last character to one it cannot already be (a fixed "x" matched 1 secret in 62).
    wrong = api_client.secret[:-1] + ("y" if api_client.secret.endswith("x") else "x")
    response = client.post(TOKEN_URL, {**credentials(api_client), "client_secret": wrong})
    assert_token_error(response, 401, "invalid_client")
    assert AccessToken.objects.count() == 0


def test_wrong_secret_over_http_basic_returns_401_invalid_client(client, api_client_factory):
    api_client = api_client_factory()
    response = client.post(TOKEN_URL, {"grant_type": "client_credentials"}, **basic_auth(api_client.client_id, "nope"))
    assert_token_error(response, 401, "invalid_client")
    assert AccessToken.objects.count() == 0


def test_unknown_client_id_returns_401_invalid_client(client, api_client_factory):
    api_client = api_client_factory()
    response = client.post(TOKEN_URL, {**credentials(api_client), "client_id": "no-such-client"})
    assert_token_error(response, 401, "invalid_client")
    assert AccessToken.objects.count() == 0


def test_missing_client_credentials_returns_401_invalid_client(client, api_client_factory):
    api_client_factory()
    response = client.post(TOKEN_URL, {"grant_type": "client_credentials"})
    assert_token_error(response, 401, "invalid_client")
    assert AccessToken.objects.count() == 0


@pytest.mark.parametrize("grant_type", ["password", "authorization_code", "refresh_token", "implicit"])
def test_other_grant_types_return_400_unsupported_grant_type(client, api_client_factory, grant_type):
    api_client = api_client_factory()
    data = {**credentials(api_client), "grant_type": grant_type, "username": "u", "password": "p", "code": "c"}
    response = client.post(TOKEN_URL, data)
    assert_token_error(response, 400, "unsupported_grant_type")
    assert AccessToken.objects.count() == 0


def test_missing_grant_type_returns_400_invalid_request(client, api_client_factory):
    api_client = api_client_factory()
    data = credentials(api_client)
    del data["grant_type"]
    response = client.post(TOKEN_URL, data)
    assert_token_error(response, 400, "invalid_request")
    assert AccessToken.objects.count() == 0


def test_token_endpoint_refuses_get(client, api_client_factory):
    api_client = api_client_factory()
    response = client.get(TOKEN_URL, credentials(api_client))
    assert response.status_code == 405
    assert AccessToken.objects.count() == 0


def test_per_client_token_lifetime_sets_expires_in_and_the_stored_expiry(client, api_client_factory):
    api_client = api_client_factory(token_lifetime_seconds=120)
    before = timezone.now()
    response = client.post(TOKEN_URL, credentials(api_client))
    after = timezone.now()
    assert response.status_code == 200, response.content
    assert response.json()["expires_in"] == 120
    expires = AccessToken.objects.get().expires
    assert before + timedelta(seconds=119) <= expires <= after + timedelta(seconds=121)


def test_default_token_lifetime_comes_from_the_setting(client, api_client_factory, settings):
    settings.ACCESS_TOKEN_EXPIRE_SECONDS = 900
    api_client = api_client_factory()
    response = client.post(TOKEN_URL, credentials(api_client))
    assert response.status_code == 200, response.content
    assert response.json()["expires_in"] == 900
    remaining = (AccessToken.objects.get().expires - timezone.now()).total_seconds()
    assert 890 <= remaining <= 900


def test_access_tokens_are_stored_only_as_a_sha256_checksum(client, api_client_factory):
    api_client = api_client_factory()
    token = client.post(TOKEN_URL, credentials(api_client)).json()["access_token"]
    stored = AccessToken.objects.get()
    assert stored.token == ""
    assert stored.token_checksum == hashlib.sha256(token.encode()).hexdigest()
    assert not AccessToken.objects.filter(token=token).exists()


def test_each_exchange_issues_a_distinct_token(client, api_client_factory):
    api_client = api_client_factory()
    first = client.post(TOKEN_URL, credentials(api_client)).json()["access_token"]
    second = client.post(TOKEN_URL, credentials(api_client)).json()["access_token"]
    assert first != second
    assert AccessToken.objects.filter(application=api_client).count() == 2


# --- Bearer tokens on the API ---------------------------------------------------------------------


def test_valid_token_lists_branches(client, api_client_factory, issue_token):
    BranchFactory(code="BLR")
    token = issue_token(api_client_factory(scopes=["appointments:read"]))
    response = client.get(BRANCHES_URL, **bearer(token))
    assert response.status_code == 200
    assert [b["code"] for b in response.json()] == ["BLR"]


def test_no_token_returns_401_not_authenticated_with_bearer_challenge(client, db):
    response = client.get(BRANCHES_URL)
    assert_problem(response, 401, "not_authenticated")
    challenge = response["WWW-Authenticate"]
    assert challenge.startswith('Bearer realm="clinic-api"')
    assert 'error="invalid_token"' in challenge


def test_unknown_token_returns_401_invalid_token(client, db):
    response = client.get(BRANCHES_URL, **bearer("this-token-was-never-issued"))
    assert_problem(response, 401, "invalid_token")
    assert 'error="invalid_token"' in response["WWW-Authenticate"]


def test_expired_token_returns_401_invalid_token(client, api_client_factory, issue_token):
    token = issue_token(api_client_factory(scopes=["appointments:read"]))
    AccessToken.objects.update(expires=timezone.now() - timedelta(seconds=1))
    response = client.get(BRANCHES_URL, **bearer(token))
    assert_problem(response, 401, "invalid_token")
    challenge = response["WWW-Authenticate"]
    assert challenge.startswith('Bearer realm="clinic-api"')
    assert 'error="invalid_token"' in challenge


def test_token_in_query_string_is_not_accepted(client, api_client_factory, issue_token):
    token = issue_token(api_client_factory(scopes=["appointments:read"]))
    response = client.get(BRANCHES_URL, {"access_token": token})
    assert response.status_code == 401
    assert response.json()["code"] == "not_authenticated"


def test_token_without_the_operation_scope_returns_403_insufficient_scope(client, api_client_factory, issue_token):
    token = issue_token(api_client_factory(scopes=["patients:read", "billing:read"]))
    response = client.get(BRANCHES_URL, **bearer(token))
    assert_problem(response, 403, "insufficient_scope")
    assert (
        response["WWW-Authenticate"]
        == 'Bearer realm="clinic-api", error="insufficient_scope", scope="appointments:read"'
    )


def test_token_narrowed_by_the_scope_parameter_lacks_the_other_scopes(client, api_client_factory, issue_token):
    api_client = api_client_factory(scopes=["appointments:read", "patients:read"])
    token = issue_token(api_client, scope="patients:read")
    response = client.get(BRANCHES_URL, **bearer(token))
    assert_problem(response, 403, "insufficient_scope")


def test_revoked_token_stops_working(client, api_client_factory, issue_token):
    api_client = api_client_factory(scopes=["appointments:read"])
    token = issue_token(api_client)
    assert client.get(BRANCHES_URL, **bearer(token)).status_code == 200

    response = client.post(
        REVOKE_URL, {"token": token, "client_id": api_client.client_id, "client_secret": api_client.secret}
    )
    assert response.status_code == 200, response.content
    assert response["Cache-Control"] == "no-store"
    assert AccessToken.objects.count() == 0

    assert_problem(client.get(BRANCHES_URL, **bearer(token)), 401, "invalid_token")


def test_revoking_with_http_basic_credentials_and_a_type_hint(client, api_client_factory, issue_token):
    api_client = api_client_factory(scopes=["appointments:read"])
    token = issue_token(api_client)
    response = client.post(
        REVOKE_URL,
        {"token": token, "token_type_hint": "access_token"},
        **basic_auth(api_client.client_id, api_client.secret),
    )
    assert response.status_code == 200, response.content
    assert AccessToken.objects.count() == 0
    assert client.get(BRANCHES_URL, **bearer(token)).status_code == 401


def test_revoking_another_clients_token_has_no_effect(client, api_client_factory, issue_token):
    owner = api_client_factory(scopes=["appointments:read"])
    intruder = api_client_factory(scopes=["appointments:read"])
    token = issue_token(owner)

    response = client.post(
        REVOKE_URL, {"token": token, "client_id": intruder.client_id, "client_secret": intruder.secret}
    )
    assert response.status_code == 200, response.content  # RFC 7009: no oracle on other clients' tokens
    assert AccessToken.objects.filter(application=owner).count() == 1
    assert client.get(BRANCHES_URL, **bearer(token)).status_code == 200


def test_revoking_with_a_wrong_secret_returns_401_and_keeps_the_token(client, api_client_factory, issue_token):
    api_client = api_client_factory(scopes=["appointments:read"])
    token = issue_token(api_client)
    response = client.post(REVOKE_URL, {"token": token, "client_id": api_client.client_id, "client_secret": "wrong"})
    assert_token_error(response, 401, "invalid_client")
    assert AccessToken.objects.count() == 1
    assert client.get(BRANCHES_URL, **bearer(token)).status_code == 200


def test_revoking_an_unknown_token_returns_200(client, api_client_factory):
    api_client = api_client_factory()
    response = client.post(
        REVOKE_URL, {"token": "never-issued", "client_id": api_client.client_id, "client_secret": api_client.secret}
    )
    assert response.status_code == 200, response.content


def test_client_deactivated_by_the_service_loses_its_tokens_and_cannot_exchange(
    client, api_client_factory, issue_token
):
    api_client = api_client_factory(scopes=["appointments:read"])
    token = issue_token(api_client)
    assert client.get(BRANCHES_URL, **bearer(token)).status_code == 200

    api_client_set_active(client=api_client, active=False)

    assert_problem(client.get(BRANCHES_URL, **bearer(token)), 401, "invalid_token")
    assert_token_error(client.post(TOKEN_URL, credentials(api_client)), 401, "invalid_client")
    assert AccessToken.objects.count() == 0


def test_client_deactivated_directly_in_the_database_fails_on_the_next_request(client, api_client_factory, issue_token):
    api_client = api_client_factory(scopes=["appointments:read"])
    token = issue_token(api_client)
    assert client.get(BRANCHES_URL, **bearer(token)).status_code == 200

    # No service involved: the token row survives, yet is_usable() is checked on every request.
    ApiClient.objects.filter(pk=api_client.pk).update(is_active=False)

    assert_problem(client.get(BRANCHES_URL, **bearer(token)), 401, "invalid_token")
    assert_token_error(client.post(TOKEN_URL, credentials(api_client)), 401, "invalid_client")
    assert AccessToken.objects.count() == 1


def test_reactivated_client_can_exchange_again_but_revoked_tokens_stay_dead(client, api_client_factory, issue_token):
    api_client = api_client_factory(scopes=["appointments:read"])
    old_token = issue_token(api_client)
    api_client_set_active(client=api_client, active=False)
    api_client_set_active(client=api_client, active=True)

    assert client.get(BRANCHES_URL, **bearer(old_token)).status_code == 401
    new_token = issue_token(api_client)
    assert client.get(BRANCHES_URL, **bearer(new_token)).status_code == 200


# --- The exchange's statements (bench/results/profiles/token*.txt) ----------------------------------


@pytest.mark.django_db(transaction=True)
def test_an_exchange_runs_three_statements_and_stores_the_toolkits_token_row(client, api_client_factory):
    """The client by its id, the token's INSERT (no BEGIN/COMMIT around it, no SELECT of it afterwards) and the
    audit row; the row holds what the toolkit's save() wrote."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    api_client = api_client_factory(scopes=["appointments:read"], token_lifetime_seconds=300)
    client.post(TOKEN_URL, credentials(api_client))  # the plans compile on this connection
    AccessToken.objects.all().delete()
    before = timezone.now()
    with CaptureQueriesContext(connection) as queries:
        response = client.post(TOKEN_URL, credentials(api_client))
    after = timezone.now()
    assert response.status_code == 200, response.content
    statements = [query["sql"].split(" ", 3)[:3] for query in queries.captured_queries]
    assert statements == [
        ["SELECT", "*", "FROM"],  # the client by client_id (integrations.clients.oauth._client_by_client_id)
        ["INSERT", "INTO", '"oauth2_provider_accesstoken"'],
        ["INSERT", "INTO", '"integrations_auditlogentry"'],
    ]
    token = response.json()["access_token"]
    stored = AccessToken.objects.get()
    assert (stored.token, stored.token_checksum) == ("", hashlib.sha256(token.encode()).hexdigest())
    assert (stored.application_id, stored.user_id, stored.scope, stored.resource) == (
        api_client.pk,
        None,
        "appointments:read",
        [],
    )
    assert before + timedelta(seconds=299) <= stored.expires <= after + timedelta(seconds=301)
    assert before <= stored.created <= after
    assert before <= stored.updated <= after
    assert client.get(BRANCHES_URL, **bearer(token)).status_code == 200


def test_app_authorized_listeners_still_get_the_issued_token(client, api_client_factory):
    from oauth2_provider.signals import app_authorized

    received = []

    def listener(sender, request, token, **kwargs):
        received.append(token)

    app_authorized.connect(listener)
    try:
        response = client.post(TOKEN_URL, credentials(api_client_factory()))
    finally:
        app_authorized.disconnect(listener)
    assert response.status_code == 200
    assert [token.pk for token in received] == [AccessToken.objects.get().pk]


def test_an_unknown_client_id_gets_401_and_no_token(client, api_client_factory):
    api_client = api_client_factory()
    for client_id in ("no-such-client", api_client.client_id + "x"):
        refused = client.post(TOKEN_URL, {**credentials(api_client), "client_id": client_id})
        assert_token_error(refused, 401, "invalid_client")
    assert AccessToken.objects.count() == 0


def test_tokens_have_oauthlibs_shape_and_every_character_is_as_likely():
    from collections import Counter

    from oauthlib.common import UNICODE_ASCII_CHARACTER_SET

    from integrations.clients.token_generator import access_token_generate

    tokens = [access_token_generate(None) for _ in range(4000)]
    assert len(set(tokens)) == len(tokens)
    assert {len(token) for token in tokens} == {30}
    counts = Counter("".join(tokens))
    assert set(counts) == set(UNICODE_ASCII_CHARACTER_SET)
    expected = 4000 * 30 / 62
    # A modulo bias (bytes 248-255 folded onto the first 8 characters) would make those 25 % likelier.
    chi_square = sum((count - expected) ** 2 / expected for count in counts.values())
    assert chi_square < 120  # 61 degrees of freedom: p < 1e-5 for a uniform draw


def test_the_issued_token_comes_from_the_generator(client, api_client_factory):
    import re

    from oauth2_provider.settings import oauth2_settings

    from integrations.clients.token_generator import access_token_generate

    assert oauth2_settings.ACCESS_TOKEN_GENERATOR is access_token_generate
    token = client.post(TOKEN_URL, credentials(api_client_factory())).json()["access_token"]
    assert re.fullmatch(r"[A-Za-z0-9]{30}", token)
