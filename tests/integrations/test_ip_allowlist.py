"""The per-client IP allow-list, on API requests and token exchanges, behind trusted proxies or not."""

from __future__ import annotations

import ipaddress

import pytest
from oauth2_provider.models import get_access_token_model

from integrations.models import AuditLogEntry
from tests.helpers import TOKEN_URL, bearer, exchange, row_counts, stored_token

pytestmark = pytest.mark.django_db

AccessToken = get_access_token_model()
BRANCHES = "/api/v1/branches"
ALLOWLIST = ["10.1.0.0/16", "2001:db8::/32"]


def assert_ip_not_allowed(response) -> None:
    assert response.status_code == 403
    assert response["Content-Type"] == "application/problem+json"
    assert response.json() == {
        "type": "/api/v1/problems/ip_not_allowed",
        "title": "Address not allowed",
        "status": 403,
        "detail": "This client may not call the API from this address.",
        "code": "ip_not_allowed",
        "request_id": response["X-Request-ID"],
    }


@pytest.fixture
def listed_token(api_client_factory):
    return stored_token(api_client_factory(ip_allowlist=ALLOWLIST))


@pytest.mark.parametrize("address", ["10.1.2.3", "10.1.255.254", "2001:db8::5", "2001:db8:ffff::1", "::ffff:10.1.0.9"])
def test_request_from_an_address_inside_the_allow_list_is_served(client, listed_token, address):
    response = client.get(BRANCHES, REMOTE_ADDR=address, **bearer(listed_token))
    assert response.status_code == 200
    assert response.json() == []


@pytest.mark.parametrize("address", ["10.2.0.1", "10.0.255.255", "2001:db9::1", "127.0.0.1", "::1"])
def test_request_from_an_address_outside_the_allow_list_is_refused(client, listed_token, address):
    assert_ip_not_allowed(client.get(BRANCHES, REMOTE_ADDR=address, **bearer(listed_token)))


def test_single_address_entry_admits_only_that_address(client, api_client_factory):
    token = stored_token(api_client_factory(ip_allowlist=["203.0.113.7"]))
    assert client.get(BRANCHES, REMOTE_ADDR="203.0.113.7", **bearer(token)).status_code == 200
    assert_ip_not_allowed(client.get(BRANCHES, REMOTE_ADDR="203.0.113.8", **bearer(token)))


@pytest.mark.parametrize("address", ["10.2.0.1", "2001:db9::1", "198.51.100.9"])
def test_empty_allow_list_admits_any_address(client, api_client_factory, address):
    token = stored_token(api_client_factory(ip_allowlist=[]))
    assert client.get(BRANCHES, REMOTE_ADDR=address, **bearer(token)).status_code == 200


def test_forwarded_for_from_an_untrusted_peer_cannot_forge_an_allowed_address(client, listed_token, settings):
    settings.TRUSTED_PROXIES = [ipaddress.ip_network("127.0.0.1/32")]
    response = client.get(BRANCHES, REMOTE_ADDR="198.51.100.9", HTTP_X_FORWARDED_FOR="10.1.2.3", **bearer(listed_token))
    assert_ip_not_allowed(response)


def test_trusted_proxy_forwards_an_allowed_client_address(client, listed_token, settings):
    settings.TRUSTED_PROXIES = [ipaddress.ip_network("127.0.0.1/32")]
    response = client.get(BRANCHES, REMOTE_ADDR="127.0.0.1", HTTP_X_FORWARDED_FOR="10.1.2.3", **bearer(listed_token))
    assert response.status_code == 200


def test_behind_a_trusted_proxy_the_rightmost_untrusted_hop_is_the_client(client, listed_token, settings):
    # The caller at 198.51.100.9 sent "X-Forwarded-For: 10.1.2.3"; the proxy appended the real address.
    settings.TRUSTED_PROXIES = [ipaddress.ip_network("127.0.0.1/32")]
    response = client.get(
        BRANCHES, REMOTE_ADDR="127.0.0.1", HTTP_X_FORWARDED_FOR="10.1.2.3, 198.51.100.9", **bearer(listed_token)
    )
    assert_ip_not_allowed(response)


def test_refused_request_changes_nothing_but_its_audit_row(client, api_client_factory):
    api_client = api_client_factory(ip_allowlist=ALLOWLIST)
    token = stored_token(api_client)
    before = row_counts()

    response = client.get(BRANCHES, REMOTE_ADDR="10.2.0.1", **bearer(token))

    assert_ip_not_allowed(response)
    assert row_counts() == {**before, "integrations.AuditLogEntry": before["integrations.AuditLogEntry"] + 1}
    row = AuditLogEntry.objects.get()
    assert (row.client, row.ip, row.status) == (api_client, "10.2.0.1", 403)


def test_token_exchange_from_an_address_outside_the_allow_list_is_refused(client, api_client_factory):
    api_client = api_client_factory(ip_allowlist=ALLOWLIST)
    before = row_counts()

    response = exchange(client, api_client.client_id, api_client.secret, REMOTE_ADDR="10.2.0.1")

    assert response.status_code == 403
    assert response["Content-Type"] == "application/json"
    assert response.json() == {
        "error": "access_denied",
        "error_description": "This client may not request tokens from this address.",
    }
    assert response["Cache-Control"] == "no-store"
    assert not AccessToken.objects.exists()
    assert row_counts() == {**before, "integrations.AuditLogEntry": before["integrations.AuditLogEntry"] + 1}
    row = AuditLogEntry.objects.get()
    assert (row.client, row.ip, row.status, row.token_ref) == (api_client, "10.2.0.1", 403, "")


@pytest.mark.parametrize("address", ["10.1.2.3", "2001:db8::5"])
def test_token_exchange_from_an_address_inside_the_allow_list_issues_a_token(client, api_client_factory, address):
    api_client = api_client_factory(ip_allowlist=ALLOWLIST)

    response = exchange(client, api_client.client_id, api_client.secret, REMOTE_ADDR=address)

    assert response.status_code == 200
    assert response.json()["token_type"] == "Bearer"
    assert AccessToken.objects.filter(application=api_client).count() == 1
    served = client.get(BRANCHES, REMOTE_ADDR=address, **bearer(response.json()["access_token"]))
    assert served.status_code == 200


def test_token_exchange_behind_a_trusted_proxy_uses_the_forwarded_address(client, api_client_factory, settings):
    settings.TRUSTED_PROXIES = [ipaddress.ip_network("127.0.0.1/32")]
    api_client = api_client_factory(ip_allowlist=ALLOWLIST)

    forged = exchange(
        client, api_client.client_id, api_client.secret, REMOTE_ADDR="198.51.100.9", HTTP_X_FORWARDED_FOR="10.1.2.3"
    )
    forwarded = exchange(
        client, api_client.client_id, api_client.secret, REMOTE_ADDR="127.0.0.1", HTTP_X_FORWARDED_FOR="10.1.2.3"
    )

    assert (forged.status_code, forged.json()["error"]) == (403, "access_denied")
    assert forwarded.status_code == 200
    assert AccessToken.objects.filter(application=api_client).count() == 1


def test_token_exchange_with_a_wrong_secret_is_invalid_client_wherever_it_comes_from(client, api_client_factory):
    # Authentication comes first: an outsider learns nothing about the allow-list of a client it cannot prove.
    api_client = api_client_factory(ip_allowlist=ALLOWLIST)
    data = {"grant_type": "client_credentials", "client_id": api_client.client_id, "client_secret": "wrong"}

    response = client.post(TOKEN_URL, data, REMOTE_ADDR="10.2.0.1")

    assert response.status_code == 401
    assert response.json()["error"] == "invalid_client"
    assert not AccessToken.objects.exists()


def test_allow_list_change_applies_to_existing_tokens_on_the_next_request(client, api_client_factory):
    api_client = api_client_factory()
    token = stored_token(api_client)
    assert client.get(BRANCHES, REMOTE_ADDR="10.2.0.1", **bearer(token)).status_code == 200

    api_client.ip_allowlist = ALLOWLIST
    api_client.save(update_fields=["ip_allowlist"])

    assert_ip_not_allowed(client.get(BRANCHES, REMOTE_ADDR="10.2.0.1", **bearer(token)))
