"""The audit log: exactly one row per API request, refused ones and token exchanges included."""

from __future__ import annotations

import base64
import hashlib
import secrets
from datetime import timedelta

import pytest
from django.db import models
from django.utils import timezone
from oauth2_provider.models import get_access_token_model

from integrations.models import AuditLogEntry
from tests.helpers import TOKEN_URL, bearer, stored_token

pytestmark = pytest.mark.django_db

AccessToken = get_access_token_model()
BRANCHES = "/api/v1/branches"


def sha256(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


def only_row() -> AuditLogEntry:
    rows = list(AuditLogEntry.objects.all())
    assert len(rows) == 1, [str(row) for row in rows]
    return rows[0]


def assert_row(response, *, client, token_ref: str, ip: str, method: str, route: str, path: str) -> AuditLogEntry:
    row = only_row()
    assert row.client == client
    assert row.token_ref == token_ref
    assert row.ip == ip
    assert row.method == method
    assert row.route == route
    assert row.path == path
    assert row.status == response.status_code
    assert row.duration_ms > 0
    assert row.request_id == response["X-Request-ID"]
    assert row.patient_ids == []
    assert timezone.now() - timedelta(minutes=1) < row.created_at <= timezone.now()
    return row


def assert_holds_none_of(row: AuditLogEntry, *values: str) -> None:
    """No text column of the row contains any of the values (secrets, raw tokens)."""
    for field in AuditLogEntry._meta.concrete_fields:
        if isinstance(field, models.CharField | models.TextField):
            text = str(getattr(row, field.attname))
            for value in values:
                assert value not in text, field.name


def test_served_request_is_logged_with_client_token_reference_and_route(client, api_client_factory):
    api_client = api_client_factory()
    token = stored_token(api_client)

    response = client.get(
        BRANCHES + "?page=1", REMOTE_ADDR="203.0.113.7", HTTP_USER_AGENT="ehr-sync/2.1", **bearer(token)
    )

    assert response.status_code == 200
    row = assert_row(
        response,
        client=api_client,
        token_ref=sha256(token),
        ip="203.0.113.7",
        method="GET",
        route="api/v1/branches",
        path=BRANCHES,
    )
    assert row.user_agent == "ehr-sync/2.1"
    assert AccessToken.objects.get(application=api_client).token_checksum == row.token_ref
    assert_holds_none_of(row, token, api_client.secret)


def test_request_without_a_token_is_logged_without_client(client):
    response = client.get(BRANCHES)

    assert response.status_code == 401
    assert_row(
        response, client=None, token_ref="", ip="127.0.0.1", method="GET", route="api/v1/branches", path=BRANCHES
    )


def test_token_sent_in_the_query_string_is_refused_and_not_logged(client, api_client_factory):
    token = stored_token(api_client_factory())

    response = client.get(BRANCHES, {"access_token": token})

    assert response.status_code == 401
    row = assert_row(
        response, client=None, token_ref="", ip="127.0.0.1", method="GET", route="api/v1/branches", path=BRANCHES
    )
    assert_holds_none_of(row, token)


def test_request_with_an_unknown_token_is_logged_with_its_reference_but_no_client(client):
    token = secrets.token_urlsafe(32)

    response = client.get(BRANCHES, **bearer(token))

    assert response.status_code == 401
    row = assert_row(
        response,
        client=None,
        token_ref=sha256(token),
        ip="127.0.0.1",
        method="GET",
        route="api/v1/branches",
        path=BRANCHES,
    )
    assert_holds_none_of(row, token)


def test_request_lacking_the_scope_is_logged_with_its_client(client, api_client_factory):
    api_client = api_client_factory(["patients:read"])
    token = stored_token(api_client, scope="patients:read")

    response = client.get(BRANCHES, **bearer(token))

    assert response.status_code == 403
    assert response.json()["code"] == "insufficient_scope"
    assert_row(
        response,
        client=api_client,
        token_ref=sha256(token),
        ip="127.0.0.1",
        method="GET",
        route="api/v1/branches",
        path=BRANCHES,
    )


def test_request_from_an_address_outside_the_allow_list_is_logged(client, api_client_factory):
    api_client = api_client_factory(ip_allowlist=["10.1.0.0/16"])
    token = stored_token(api_client)

    response = client.get(BRANCHES, REMOTE_ADDR="2001:db9::1", **bearer(token))

    assert response.status_code == 403
    assert response.json()["code"] == "ip_not_allowed"
    assert_row(
        response,
        client=api_client,
        token_ref=sha256(token),
        ip="2001:db9::1",
        method="GET",
        route="api/v1/branches",
        path=BRANCHES,
    )


def test_request_to_an_unknown_route_is_logged_without_a_route(client, api_client_factory):
    api_client = api_client_factory()
    token = stored_token(api_client)

    response = client.get("/api/v1/nope", **bearer(token))

    assert response.status_code == 404
    assert response.json()["code"] == "not_found"
    # No view authenticated the token, so no client is named; the reference still ties the row to it.
    assert_row(
        response, client=None, token_ref=sha256(token), ip="127.0.0.1", method="GET", route="", path="/api/v1/nope"
    )


@pytest.mark.parametrize("path", ["/api/v1/schemas", "/api/v1/docsearch", "/api/v1/problemsx"])
def test_unknown_route_that_shares_a_prefix_with_the_documentation_is_logged(client, path):
    response = client.get(path)

    assert response.status_code == 404
    assert_row(response, client=None, token_ref="", ip="127.0.0.1", method="GET", route="", path=path)


def test_refused_over_the_rate_limit_is_logged(client, api_client_factory):
    api_client = api_client_factory(rate_limit_per_minute=1)
    token = stored_token(api_client)
    assert client.get(BRANCHES, **bearer(token)).status_code == 200
    AuditLogEntry.objects.all().delete()

    response = client.get(BRANCHES, **bearer(token))

    assert response.status_code == 429
    assert_row(
        response,
        client=api_client,
        token_ref=sha256(token),
        ip="127.0.0.1",
        method="GET",
        route="api/v1/branches",
        path=BRANCHES,
    )


def test_token_exchange_is_logged_with_the_reference_of_the_issued_token(client, api_client_factory):
    api_client = api_client_factory()
    data = {"grant_type": "client_credentials", "client_id": api_client.client_id, "client_secret": api_client.secret}

    response = client.post(TOKEN_URL, data, REMOTE_ADDR="203.0.113.7")

    assert response.status_code == 200
    issued = response.json()["access_token"]
    row = assert_row(
        response,
        client=api_client,
        token_ref=sha256(issued),
        ip="203.0.113.7",
        method="POST",
        route="api/v1/auth/token",
        path=TOKEN_URL,
    )
    assert AccessToken.objects.get(application=api_client).token_checksum == row.token_ref
    assert_holds_none_of(row, issued, api_client.secret, api_client.client_secret)


def test_token_exchange_with_a_wrong_secret_is_logged_with_the_client_it_named(client, api_client_factory):
    api_client = api_client_factory()
    wrong_secret = secrets.token_urlsafe(32)
    data = {"grant_type": "client_credentials", "client_id": api_client.client_id, "client_secret": wrong_secret}

    response = client.post(TOKEN_URL, data)

    assert response.status_code == 401
    assert response.json()["error"] == "invalid_client"
    row = assert_row(
        response,
        client=api_client,
        token_ref="",
        ip="127.0.0.1",
        method="POST",
        route="api/v1/auth/token",
        path=TOKEN_URL,
    )
    assert_holds_none_of(row, wrong_secret, api_client.secret)
    assert not AccessToken.objects.exists()


def test_token_exchange_with_basic_credentials_never_logs_them(client, api_client_factory):
    api_client = api_client_factory()
    basic = base64.b64encode(f"{api_client.client_id}:{api_client.secret}".encode()).decode()

    response = client.post(TOKEN_URL, {"grant_type": "client_credentials"}, HTTP_AUTHORIZATION=f"Basic {basic}")

    assert response.status_code == 200
    row = assert_row(
        response,
        client=api_client,
        token_ref=sha256(response.json()["access_token"]),
        ip="127.0.0.1",
        method="POST",
        route="api/v1/auth/token",
        path=TOKEN_URL,
    )
    assert_holds_none_of(row, basic, api_client.secret, response.json()["access_token"])


def test_token_exchange_for_an_unknown_client_is_logged_without_client(client):
    data = {"grant_type": "client_credentials", "client_id": "nobody", "client_secret": "nothing"}

    response = client.post(TOKEN_URL, data)

    assert response.status_code == 401
    assert_row(
        response, client=None, token_ref="", ip="127.0.0.1", method="POST", route="api/v1/auth/token", path=TOKEN_URL
    )


@pytest.mark.urls("tests.plumbing_urls")
def test_unhandled_error_is_logged_with_status_500_and_no_detail(client, api_client_factory):
    api_client = api_client_factory()
    token = stored_token(api_client)

    response = client.get("/api/v1/test/boom", **bearer(token))

    assert response.status_code == 500
    row = assert_row(
        response,
        client=api_client,
        token_ref=sha256(token),
        ip="127.0.0.1",
        method="GET",
        route="api/v1/test/boom",
        path="/api/v1/test/boom",
    )
    assert_holds_none_of(row, "Jane Doe", "123412341234", token)


@pytest.mark.parametrize("path", ["/api/v1/schema", "/api/v1/docs", "/healthz"])
def test_documentation_and_health_pages_are_not_audited(client, path):
    response = client.get(path)

    assert response.status_code == 200
    assert not AuditLogEntry.objects.exists()


def test_valid_incoming_request_id_is_echoed_and_stored(client, api_client_factory):
    token = stored_token(api_client_factory())

    response = client.get(BRANCHES, HTTP_X_REQUEST_ID="sync-2026.05:batch-7_item-42", **bearer(token))

    assert response["X-Request-ID"] == "sync-2026.05:batch-7_item-42"
    assert only_row().request_id == "sync-2026.05:batch-7_item-42"


@pytest.mark.parametrize("incoming", ["has spaces", "x" * 129, "<script>"])
def test_invalid_incoming_request_id_is_replaced_and_the_replacement_stored(client, api_client_factory, incoming):
    token = stored_token(api_client_factory())

    response = client.get(BRANCHES, HTTP_X_REQUEST_ID=incoming, **bearer(token))

    assert response["X-Request-ID"] != incoming
    assert len(response["X-Request-ID"]) == 32
    assert only_row().request_id == response["X-Request-ID"]


def test_each_request_writes_its_own_row(client, api_client_factory):
    token = stored_token(api_client_factory())

    responses = [client.get(BRANCHES, **bearer(token)) for _ in range(3)]

    rows = AuditLogEntry.objects.order_by("id")
    assert [row.request_id for row in rows] == [r["X-Request-ID"] for r in responses]
    assert len({r["X-Request-ID"] for r in responses}) == 3
