"""Registering an API client's JWKS for SMART Backend Services (docs/fhir.md section 7): in the admin and with
`manage.py create_api_client --jwks`."""

from __future__ import annotations

import json
import re
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from oauth2_provider.models import AccessToken

from integrations.models import ApiClient
from tests.factories import ApiClientFactory, network_wide
from tests.helpers import exchange
from tests.integrations.test_smart_backend_services import ec_key, post_assertion, public_jwk, rsa_key, sign
from tests.integrations.webhook_receiver import Reply, receiver  # noqa: F401 - a fixture

pytestmark = pytest.mark.django_db

ADD_URL = "/admin/integrations/apiclient/add/"
PRIVATE_KEY_MESSAGE = (
    "Key 1 holds private key material (d, p, q, dp, dq, qi): register the public key only, and keep the private "
    "key with the client."
)


@pytest.fixture
def admin_client(client, django_user_model):
    client.force_login(network_wide(django_user_model.objects.create_superuser("root", "root@example.com", None)))
    return client


def form(**overrides):
    data = {
        "name": "Population health",
        "description": "",
        "allowed_scopes": ["patients:read", "lab:read"],
        "ip_allowlist": "",
        "rate_limit_per_minute": "",
        "token_lifetime_seconds": "",
        "is_active": "on",
        "jwks_uri": "",
        "jwks": "",
    }
    data.update(overrides)
    return data


def change_url(api_client: ApiClient) -> str:
    return f"/admin/integrations/apiclient/{api_client.pk}/change/"


# --- The admin ------------------------------------------------------------------------------------------


def test_the_admin_registers_inline_public_keys_for_an_assertion_only_client(admin_client, client):
    key = rsa_key()

    response = admin_client.post(ADD_URL, form(jwks=json.dumps({"keys": [public_jwk(key, "k1")]}), assertion_only="on"))

    assert response.status_code == 200, response.content
    api_client = ApiClient.objects.get()
    assert api_client.jwks == {"keys": [public_jwk(key, "k1")]}
    assert (api_client.jwks_uri, api_client.assertion_only) == ("", True)
    # The page after creating it shows the client id and no secret: an assertion-only client's is never accepted.
    page = response.content.decode()
    assert api_client.client_id in page
    assert 'id="client-secret"' not in page
    assert "it has no secret to copy" in page
    # Rotating its secret is refused and changes nothing.
    secret_before = api_client.client_secret
    rotated = admin_client.post(
        "/admin/integrations/apiclient/",
        {"action": "rotate_secret", "_selected_action": [api_client.pk]},
        follow=True,
    )
    assert "it has no secret to rotate" in rotated.content.decode()
    api_client.refresh_from_db()
    assert api_client.client_secret == secret_before
    client.logout()
    assert post_assertion(client, sign(key, api_client.client_id, kid="k1")).status_code == 200


def test_the_admin_refuses_a_private_key_and_changes_nothing(admin_client):
    api_client = ApiClientFactory(allowed_scopes=["patients:read"])
    before = ApiClient.objects.values().get(pk=api_client.pk)

    response = admin_client.post(
        change_url(api_client),
        form(
            name=api_client.name,
            allowed_scopes=["patients:read"],
            jwks=json.dumps({"keys": [public_jwk(rsa_key(), "k1", private=True)]}),
        ),
    )

    assert response.status_code == 200
    assert response.context["adminform"].form.errors == {"jwks": [PRIVATE_KEY_MESSAGE]}
    assert ApiClient.objects.values().get(pk=api_client.pk) == before


def test_the_admin_refuses_a_url_and_inline_keys_together(admin_client, receiver):  # noqa: F811
    receiver.default = Reply(body=json.dumps({"keys": [public_jwk(ec_key(), "e1")]}).encode())

    response = admin_client.post(
        ADD_URL, form(jwks_uri=receiver.url("/jwks"), jwks=json.dumps({"keys": [public_jwk(rsa_key(), "k1")]}))
    )

    assert response.status_code == 200
    assert response.context["adminform"].form.non_field_errors() == ["Give either a JWKS URL or inline keys, not both."]
    assert ApiClient.objects.count() == 0


def test_the_admin_fetches_a_jwks_url_before_registering_it(admin_client, receiver):  # noqa: F811
    receiver.reply_with(Reply(status=404, body=b"not here"))
    receiver.default = Reply(body=json.dumps({"keys": [public_jwk(ec_key(), "e1")]}).encode())

    refused = admin_client.post(ADD_URL, form(jwks_uri=receiver.url("/jwks")))

    assert refused.status_code == 200
    assert refused.context["adminform"].form.errors == {"jwks_uri": ["The JWKS URL answered 404, not 200."]}
    assert ApiClient.objects.count() == 0

    accepted = admin_client.post(ADD_URL, form(jwks_uri=receiver.url("/jwks")))

    assert accepted.status_code == 200
    assert ApiClient.objects.get().jwks_uri == receiver.url("/jwks")


# --- create_api_client --jwks ---------------------------------------------------------------------------


def run(*args: str) -> str:
    out = StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def test_create_api_client_registers_a_jwks_file_and_keeps_the_secret(client, tmp_path: Path):
    key = rsa_key()
    path = tmp_path / "jwks.json"
    path.write_text(json.dumps({"keys": [public_jwk(key, "k1")]}))

    result = json.loads(
        run("create_api_client", "--name", "Bulk", "--scopes", "patients:read", "--jwks", str(path), "--json")
    )

    api_client = ApiClient.objects.get()
    assert result == {
        "id": api_client.pk,
        "name": "Bulk",
        "client_id": api_client.client_id,
        "client_secret": result["client_secret"],
        "scopes": ["patients:read"],
        "branches": [],
        "jwks": "inline",
        "token_endpoint_auth_methods": ["private_key_jwt", "secret"],
    }
    assert api_client.jwks == {"keys": [public_jwk(key, "k1")]}
    assert post_assertion(client, sign(key, api_client.client_id, kid="k1")).status_code == 200
    assert exchange(client, api_client.client_id, result["client_secret"]).status_code == 200


def test_create_api_client_assertion_only_by_url_prints_no_secret(client, receiver):  # noqa: F811
    receiver.default = Reply(body=json.dumps({"keys": [public_jwk(ec_key(), "e1")]}).encode())
    url = receiver.url("/jwks")

    output = run("create_api_client", "--name", "Bulk", "--scopes", "lab:read", "--jwks", url, "--assertion-only")

    api_client = ApiClient.objects.get()
    assert (api_client.jwks_uri, api_client.jwks, api_client.assertion_only) == (url, None, True)
    assert "client_secret" not in output
    assert f"client_id: {api_client.client_id}" in output
    assert f"jwks: {url} (signed assertions: private_key_jwt, RS384 or ES384)" in output


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--assertion-only"], "--assertion-only needs --jwks: the client's public keys."),
        (
            ["--jwks", "/nonexistent/jwks.json"],
            "Cannot read the JWKS file '/nonexistent/jwks.json': No such file or directory.",
        ),
        (["--jwks", "PRIVATE"], f"--jwks: {PRIVATE_KEY_MESSAGE}"),
    ],
)
def test_create_api_client_refuses_bad_keys_and_creates_nothing(tmp_path: Path, arguments, message):
    private = tmp_path / "private.json"
    private.write_text(json.dumps({"keys": [public_jwk(rsa_key(), "k1", private=True)]}))
    arguments = [str(private) if value == "PRIVATE" else value for value in arguments]

    with pytest.raises(CommandError) as refused:
        run("create_api_client", "--name", "Bulk", "--scopes", "patients:read", *arguments)

    assert str(refused.value) == message
    assert ApiClient.objects.count() == 0
    assert AccessToken.objects.count() == 0


def test_the_admin_refuses_a_plain_http_jwks_url_in_production_once(admin_client, settings):
    settings.WEBHOOK_ALLOW_PRIVATE_TARGETS = False

    response = admin_client.post(ADD_URL, form(jwks_uri="http://keys.example.com/jwks.json"))

    assert response.status_code == 200
    assert response.context["adminform"].form.errors == {"jwks_uri": ["The URL must use https."]}
    assert ApiClient.objects.count() == 0


def test_the_change_page_shows_an_empty_jwks_for_a_client_without_one(admin_client):
    api_client = ApiClientFactory(allowed_scopes=["patients:read"])

    response = admin_client.get(change_url(api_client))

    assert response.status_code == 200
    assert response.context["adminform"].form["jwks"].value() in (None, "")
    assert re.search(r'<textarea name="jwks"[^>]*>\s*</textarea>', response.content.decode())
