"""Client secrets: stored with a fast keyed hash, verifiable across a key rotation, never shown again."""

from __future__ import annotations

import base64
import logging
import time

import pytest
from django.contrib.auth.hashers import check_password, identify_hasher, make_password
from oauth2_provider.models import AccessToken

from integrations.clients.hashers import ClientSecretHasher
from integrations.clients.services import api_client_create, api_client_rotate_secret
from integrations.models import ApiClient, AuditLogEntry
from tests.factories import BranchFactory, network_wide
from tests.helpers import TOKEN_URL, bearer, exchange

pytestmark = pytest.mark.django_db

REVOKE_URL = "/api/v1/auth/revoke"
OLD_KEY = "old-secret-key-for-the-rotation-test-0123456789abcdef"
NEW_KEY = "new-secret-key-for-the-rotation-test-fedcba9876543210"


def stored_secret(api_client):
    return ApiClient.objects.values_list("client_secret", flat=True).get(pk=api_client.pk)


def test_every_way_of_creating_a_client_stores_a_keyed_hash_not_the_secret(api_client_factory):
    factory_client = api_client_factory()
    service_client, service_secret = api_client_create(name="Service", scopes=["patients:read"])
    rotated_secret = api_client_rotate_secret(client=factory_client)

    for api_client, secret in [(factory_client, rotated_secret), (service_client, service_secret)]:
        encoded = stored_secret(api_client)
        assert encoded.startswith("client_secret_hmac$")
        assert not encoded.startswith("pbkdf2")
        assert secret not in encoded
        assert encoded != secret
        assert identify_hasher(encoded).algorithm == "client_secret_hmac"
        assert check_password(secret, encoded)
    assert len(service_secret) == 48


def test_all_stored_secrets_use_the_keyed_hash(api_client_factory):
    for _ in range(3):
        api_client_factory()
    api_client_create(name="Another", scopes=["billing:read"])
    secrets = list(ApiClient.objects.values_list("client_secret", flat=True))
    assert len(secrets) == 4
    assert all(secret.startswith("client_secret_hmac$") for secret in secrets)


def test_same_secret_hashes_differently_each_time_thanks_to_the_salt():
    first = make_password("s3cr3t-value", hasher="client_secret_hmac")
    second = make_password("s3cr3t-value", hasher="client_secret_hmac")
    assert first != second
    assert check_password("s3cr3t-value", first)
    assert check_password("s3cr3t-value", second)
    assert not check_password("s3cr3t-valuf", first)


def test_hasher_is_fast_enough_for_every_token_exchange():
    encoded = make_password("a" * 48, hasher="client_secret_hmac")
    started = time.perf_counter()
    for _ in range(200):
        assert check_password("a" * 48, encoded)
    # A password KDF (PBKDF2 at Django's iteration count) takes hundreds of ms per check.
    assert time.perf_counter() - started < 0.5


def test_safe_summary_masks_salt_and_digest():
    encoded = make_password("a" * 48, hasher="client_secret_hmac")
    _, salt, digest = encoded.split("$")
    summary = ClientSecretHasher().safe_summary(encoded)
    assert summary["algorithm"] == "client_secret_hmac"
    assert salt not in summary["salt"]
    assert digest not in summary["hash"]


def test_secret_still_verifies_after_a_key_rotation_through_the_fallbacks(client, settings, api_client_factory):
    settings.SECRET_KEY = OLD_KEY
    settings.SECRET_KEY_FALLBACKS = []
    api_client = api_client_factory()

    settings.SECRET_KEY = NEW_KEY
    settings.SECRET_KEY_FALLBACKS = [OLD_KEY]
    response = exchange(client, api_client.client_id, api_client.secret)
    assert response.status_code == 200, response.content
    assert AccessToken.objects.filter(application=api_client).count() == 1


def test_secret_hashed_under_a_dropped_key_no_longer_verifies(client, settings, api_client_factory):
    settings.SECRET_KEY = OLD_KEY
    settings.SECRET_KEY_FALLBACKS = []
    api_client = api_client_factory()

    settings.SECRET_KEY = NEW_KEY
    response = exchange(client, api_client.client_id, api_client.secret)
    assert response.status_code == 401
    assert response.json()["error"] == "invalid_client"
    assert AccessToken.objects.count() == 0


def test_wrong_secret_does_not_verify_even_with_fallbacks(settings):
    settings.SECRET_KEY = OLD_KEY
    encoded = make_password("the-right-secret", hasher="client_secret_hmac")
    settings.SECRET_KEY = NEW_KEY
    settings.SECRET_KEY_FALLBACKS = [OLD_KEY]
    assert check_password("the-right-secret", encoded)
    assert not check_password("the-wrong-secret", encoded)


def test_plaintext_secret_never_appears_in_later_responses(client, django_user_model, api_client_factory):
    BranchFactory(code="BLR")
    api_client = api_client_factory(scopes=["appointments:read"])
    admin = network_wide(
        django_user_model.objects.create_superuser("root", "root@example.com", None)
    )  # force_login: no slow hash
    secret = api_client.secret.encode()

    token_response = exchange(client, api_client.client_id, api_client.secret)
    assert token_response.status_code == 200
    token = token_response.json()["access_token"]
    api_response = client.get("/api/v1/branches", **bearer(token))
    assert api_response.status_code == 200
    denied = client.get("/api/v1/branches", **bearer("bogus"))
    revoke = client.post(
        REVOKE_URL, {"token": token, "client_id": api_client.client_id, "client_secret": api_client.secret}
    )
    assert revoke.status_code == 200

    client.force_login(admin)
    change_page = client.get(f"/admin/integrations/apiclient/{api_client.pk}/change/")
    list_page = client.get("/admin/integrations/apiclient/")
    search_page = client.get("/admin/integrations/apiclient/", {"q": api_client.client_id})
    audit_page = client.get("/admin/integrations/auditlogentry/")
    for response in (change_page, list_page, search_page, audit_page):
        assert response.status_code == 200
    assert api_client.client_id.encode() in change_page.content
    assert api_client.client_id.encode() in list_page.content

    for response in (token_response, api_response, denied, revoke, change_page, list_page, search_page, audit_page):
        assert secret not in response.content
        assert all(secret.decode() not in value for _, value in response.items())
    # Not even the stored hash is rendered in the admin.
    encoded = stored_secret(api_client).encode()
    for response in (change_page, list_page):
        assert encoded not in response.content
        assert encoded.split(b"$")[-1] not in response.content


def _exchange_series(client, api_client, other):
    """Successful and refused token exchanges (form and Basic), a revocation, and API calls."""
    wrong_secret = api_client.secret[::-1]
    basic = base64.b64encode(f"{api_client.client_id}:{api_client.secret}".encode()).decode()
    responses = [
        exchange(client, api_client.client_id, api_client.secret),
        exchange(client, api_client.client_id, wrong_secret),
        exchange(client, api_client.client_id, other.secret),
        exchange(client, "unknown-client", api_client.secret),
        exchange(client, api_client.client_id, api_client.secret, {"scope": "billing:write"}),
        exchange(client, api_client.client_id, api_client.secret, {"grant_type": "password"}),
        client.post(TOKEN_URL, {"grant_type": "client_credentials"}, HTTP_AUTHORIZATION=f"Basic {basic}"),
    ]
    assert [r.status_code for r in responses] == [200, 401, 401, 401, 400, 400, 200]
    tokens = [responses[0].json()["access_token"], responses[-1].json()["access_token"]]
    assert client.get("/api/v1/branches", **bearer(tokens[0])).status_code == 200
    revoke = client.post(
        REVOKE_URL, {"token": tokens[1], "client_id": api_client.client_id, "client_secret": api_client.secret}
    )
    assert revoke.status_code == 200
    return wrong_secret, basic, tokens


def test_audit_log_never_holds_secrets_or_tokens(client, api_client_factory):
    api_client = api_client_factory(scopes=["appointments:read"])
    other = api_client_factory(scopes=["appointments:read"])
    wrong_secret, basic, tokens = _exchange_series(client, api_client, other)

    rows = list(AuditLogEntry.objects.all())
    assert len(rows) == 9  # one per request, refused ones included
    forbidden = [api_client.secret, other.secret, wrong_secret, basic, *tokens]
    for row in rows:
        for field in AuditLogEntry._meta.concrete_fields:
            value = str(getattr(row, field.attname))
            for needle in forbidden:
                assert needle not in value, f"{field.name} of audit row {row.pk} holds a secret"
    # Token exchanges are recorded against the client, even the refused one with a known client id.
    token_rows = AuditLogEntry.objects.filter(path=TOKEN_URL).order_by("id")
    assert [(r.status, r.client_id) for r in token_rows] == [
        (200, api_client.pk),
        (401, api_client.pk),
        (401, api_client.pk),
        (401, None),
        (400, api_client.pk),
        (400, None),
        (200, api_client.pk),
    ]


def test_logs_never_hold_secrets_or_tokens(client, api_client_factory, caplog):
    caplog.set_level(logging.DEBUG)
    api_client = api_client_factory(scopes=["appointments:read"])
    other = api_client_factory(scopes=["appointments:read"])
    wrong_secret, basic, tokens = _exchange_series(client, api_client, other)

    assert caplog.records  # the debug logging of the toolkit and oauthlib was captured
    for needle in [api_client.secret, other.secret, wrong_secret, basic, *tokens]:
        assert needle not in caplog.text
