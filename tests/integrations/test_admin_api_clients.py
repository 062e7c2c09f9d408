"""The admin for API clients (secret shown exactly once, actions through services) and the audit log."""

from __future__ import annotations

import re
import uuid

import pytest
from django.contrib import admin
from django.test import RequestFactory
from django.utils import timezone
from oauth2_provider.models import AccessToken, get_grant_model, get_id_token_model, get_refresh_token_model

from integrations.models import ApiClient, AuditLogEntry
from tests.factories import BranchFactory, network_wide
from tests.helpers import bearer, exchange, shown_secret

pytestmark = pytest.mark.django_db

ADD_URL = "/admin/integrations/apiclient/add/"
LIST_URL = "/admin/integrations/apiclient/"
CLIENT_ID_RE = re.compile(r'<code id="client-id">([^<]+)</code>')


@pytest.fixture
def superuser(django_user_model):
    return network_wide(
        django_user_model.objects.create_superuser("root", "root@example.com", None)
    )  # force_login: no slow hash


@pytest.fixture
def admin_client(client, superuser):
    client.force_login(superuser)
    return client


def add_form(**overrides):
    data = {
        "name": "Hospital ERP",
        "description": "Books appointments from the ERP.",
        "allowed_scopes": ["appointments:read", "patients:read"],
        "ip_allowlist": "",
        "rate_limit_per_minute": "",
        "token_lifetime_seconds": "",
        "is_active": "on",
    }
    data.update(overrides)
    return data


def test_the_add_form_shows_no_client_id_and_the_change_form_the_saved_one(admin_client):
    # The add form used to show the model's default id, which was not the id then generated and saved.
    form = admin_client.get(ADD_URL)
    assert form.status_code == 200
    assert "field-client_id" not in form.content.decode()

    admin_client.post(ADD_URL, add_form())
    saved = ApiClient.objects.get()
    change = admin_client.get(f"/admin/integrations/apiclient/{saved.pk}/change/")

    assert "field-client_id" in change.content.decode()
    assert saved.client_id in change.content.decode()


def test_adding_a_client_shows_its_id_and_secret_once_and_stores_only_the_hash(admin_client):
    blr = BranchFactory(code="BLR")
    response = admin_client.post(
        ADD_URL,
        add_form(
            branches=[str(blr.pk)],
            ip_allowlist="10.0.0.0/8\n192.168.1.7, 2001:db8::/32",
            rate_limit_per_minute="120",
            token_lifetime_seconds="600",
        ),
    )
    assert response.status_code == 200, response.content
    assert "no-store" in [d.strip() for d in response["Cache-Control"].split(",")]
    api_client = ApiClient.objects.get()
    assert CLIENT_ID_RE.findall(response.content.decode()) == [api_client.client_id]
    secret = shown_secret(response, "client-secret")
    assert len(secret) == 48

    assert api_client.name == "Hospital ERP"
    assert api_client.description == "Books appointments from the ERP."
    assert api_client.allowed_scopes == ["patients:read", "appointments:read"]
    assert list(api_client.branches.all()) == [blr]
    assert api_client.ip_allowlist == ["10.0.0.0/8", "192.168.1.7/32", "2001:db8::/32"]
    assert api_client.rate_limit_per_minute == 120
    assert api_client.token_lifetime_seconds == 600
    assert api_client.is_active is True
    assert api_client.client_type == ApiClient.CLIENT_CONFIDENTIAL
    assert api_client.authorization_grant_type == ApiClient.GRANT_CLIENT_CREDENTIALS
    assert api_client.client_secret.startswith("client_secret_hmac$")
    assert secret not in api_client.client_secret


def test_the_secret_from_the_add_page_works_at_the_token_endpoint(admin_client):
    response = admin_client.post(ADD_URL, add_form(token_lifetime_seconds="300"))
    assert response.status_code == 200
    secret = shown_secret(response, "client-secret")
    api_client = ApiClient.objects.get()

    admin_client.logout()
    token_response = exchange(admin_client, api_client.client_id, secret)
    assert token_response.status_code == 200, token_response.content
    body = token_response.json()
    assert body["expires_in"] == 300
    assert sorted(body["scope"].split()) == ["appointments:read", "patients:read"]
    assert admin_client.get("/api/v1/branches", **bearer(body["access_token"])).status_code == 200


def test_the_change_and_list_pages_never_show_the_secret_again(admin_client):
    response = admin_client.post(ADD_URL, add_form())
    secret = shown_secret(response, "client-secret")
    api_client = ApiClient.objects.get()

    change = admin_client.get(f"/admin/integrations/apiclient/{api_client.pk}/change/")
    listing = admin_client.get(LIST_URL)
    again = admin_client.get(f"/admin/integrations/apiclient/{api_client.pk}/change/")
    for page in (change, listing, again):
        assert page.status_code == 200
        assert secret.encode() not in page.content
        assert b'id="client-secret"' not in page.content
    assert api_client.client_id.encode() in change.content
    assert api_client.client_id.encode() in listing.content
    # The secret is not parked in the session or in messages either.
    session = admin_client.session
    assert all(secret not in str(value) for value in session.values())


def test_editing_a_client_keeps_its_secret(admin_client, api_client_factory):
    api_client = api_client_factory(scopes=["appointments:read"])
    encoded = api_client.client_secret
    response = admin_client.post(
        f"/admin/integrations/apiclient/{api_client.pk}/change/",
        add_form(name="Renamed", allowed_scopes=["billing:read"]),
    )
    assert response.status_code == 302, response.content
    api_client.refresh_from_db()
    assert api_client.name == "Renamed"
    assert api_client.allowed_scopes == ["billing:read"]
    assert api_client.client_secret == encoded
    assert exchange(admin_client, api_client.client_id, api_client.secret).status_code == 200


def test_rotate_secret_action_shows_a_new_secret_once_and_the_old_one_stops_working(
    admin_client, api_client_factory, issue_token
):
    api_client = api_client_factory(scopes=["appointments:read"])
    old_secret = api_client.secret
    existing_token = issue_token(api_client)

    response = admin_client.post(LIST_URL, {"action": "rotate_secret", "_selected_action": [str(api_client.pk)]})
    assert response.status_code == 200, response.content
    assert "no-store" in [d.strip() for d in response["Cache-Control"].split(",")]
    new_secret = shown_secret(response, "client-secret")
    assert new_secret != old_secret
    assert CLIENT_ID_RE.findall(response.content.decode()) == [api_client.client_id]

    old = exchange(admin_client, api_client.client_id, old_secret)
    assert old.status_code == 401
    assert old.json()["error"] == "invalid_client"
    new = exchange(admin_client, api_client.client_id, new_secret)
    assert new.status_code == 200, new.content
    # Rotation does not revoke tokens already issued.
    assert admin_client.get("/api/v1/branches", **bearer(existing_token)).status_code == 200

    listing = admin_client.get(LIST_URL)
    assert new_secret.encode() not in listing.content


def test_rotate_secret_action_on_two_clients_changes_nothing(admin_client, api_client_factory):
    first = api_client_factory()
    second = api_client_factory()
    before = dict(ApiClient.objects.values_list("pk", "client_secret"))

    response = admin_client.post(
        LIST_URL, {"action": "rotate_secret", "_selected_action": [str(first.pk), str(second.pk)]}, follow=True
    )
    assert response.status_code == 200
    assert b"Select exactly one client" in response.content
    assert b'id="client-secret"' not in response.content
    assert dict(ApiClient.objects.values_list("pk", "client_secret")) == before


def test_deactivate_action_makes_existing_tokens_fail(admin_client, api_client_factory, issue_token):
    api_client = api_client_factory(scopes=["appointments:read"])
    bystander = api_client_factory(scopes=["appointments:read"])
    token = issue_token(api_client)
    bystander_token = issue_token(bystander)

    response = admin_client.post(LIST_URL, {"action": "deactivate", "_selected_action": [str(api_client.pk)]})
    assert response.status_code == 302

    api_client.refresh_from_db()
    assert api_client.is_active is False
    denied = admin_client.get("/api/v1/branches", **bearer(token))
    assert denied.status_code == 401
    assert denied.json()["code"] == "invalid_token"
    assert exchange(admin_client, api_client.client_id, api_client.secret).status_code == 401
    assert AccessToken.objects.filter(application=api_client).count() == 0
    # Other clients are untouched.
    assert admin_client.get("/api/v1/branches", **bearer(bystander_token)).status_code == 200


def test_unticking_is_active_on_the_change_form_makes_existing_tokens_fail(
    admin_client, api_client_factory, issue_token
):
    api_client = api_client_factory(scopes=["appointments:read"])
    token = issue_token(api_client)
    data = add_form(allowed_scopes=["appointments:read"])
    del data["is_active"]

    response = admin_client.post(f"/admin/integrations/apiclient/{api_client.pk}/change/", data)
    assert response.status_code == 302, response.content
    api_client.refresh_from_db()
    assert api_client.is_active is False
    assert admin_client.get("/api/v1/branches", **bearer(token)).status_code == 401
    assert AccessToken.objects.count() == 0


def test_activate_action_lets_the_client_obtain_tokens_again(admin_client, api_client_factory):
    api_client = api_client_factory()
    ApiClient.objects.filter(pk=api_client.pk).update(is_active=False)
    assert exchange(admin_client, api_client.client_id, api_client.secret).status_code == 401

    response = admin_client.post(LIST_URL, {"action": "activate", "_selected_action": [str(api_client.pk)]})
    assert response.status_code == 302
    assert ApiClient.objects.get(pk=api_client.pk).is_active is True
    assert exchange(admin_client, api_client.client_id, api_client.secret).status_code == 200


@pytest.mark.parametrize("allowlist", ["10.0.0.0/33", "not-an-ip", "10.0.0.1\n999.1.1.1"])
def test_invalid_ip_allowlist_entry_is_a_form_error_and_creates_nothing(admin_client, allowlist):
    response = admin_client.post(ADD_URL, add_form(ip_allowlist=allowlist))
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert list(errors) == ["ip_allowlist"]
    assert b'id="client-secret"' not in response.content
    assert ApiClient.objects.count() == 0


def test_invalid_ip_allowlist_on_the_change_form_changes_nothing(admin_client, api_client_factory):
    api_client = api_client_factory(ip_allowlist=["10.0.0.0/8"])
    response = admin_client.post(
        f"/admin/integrations/apiclient/{api_client.pk}/change/", add_form(name="Renamed", ip_allowlist="10.0.0.300")
    )
    assert response.status_code == 200
    assert list(response.context["adminform"].form.errors) == ["ip_allowlist"]
    api_client.refresh_from_db()
    assert api_client.name != "Renamed"
    assert api_client.ip_allowlist == ["10.0.0.0/8"]


@pytest.mark.parametrize(
    ("field", "value"),
    [("token_lifetime_seconds", "30"), ("token_lifetime_seconds", "86401"), ("rate_limit_per_minute", "0")],
)
def test_out_of_range_controls_are_form_errors_and_create_nothing(admin_client, field, value):
    response = admin_client.post(ADD_URL, add_form(**{field: value}))
    assert response.status_code == 200
    assert list(response.context["adminform"].form.errors) == [field]
    assert ApiClient.objects.count() == 0


def test_unknown_scope_is_a_form_error_and_creates_nothing(admin_client):
    response = admin_client.post(ADD_URL, add_form(allowed_scopes=["appointments:read", "root:all"]))
    assert response.status_code == 200
    assert list(response.context["adminform"].form.errors) == ["allowed_scopes"]
    assert ApiClient.objects.count() == 0


def test_only_client_credentials_models_are_in_the_admin():
    for model in (get_grant_model(), get_id_token_model(), get_refresh_token_model()):
        assert not admin.site.is_registered(model)
    assert admin.site.is_registered(ApiClient)


# --- The audit log admin --------------------------------------------------------------------------


def _audit_row(client=None):
    return AuditLogEntry.objects.create(
        created_at=timezone.now(),
        client=client,
        ip="10.1.2.3",
        method="GET",
        route="api/v1/branches",
        path="/api/v1/branches",
        status=200,
        duration_ms=1.5,
        request_id="req-1",
    )


def test_audit_log_admin_has_no_add_change_or_delete_permission(superuser):
    model_admin = admin.site._registry[AuditLogEntry]
    request = RequestFactory().get("/admin/")
    request.user = superuser
    row = _audit_row()
    assert model_admin.has_add_permission(request) is False
    assert model_admin.has_change_permission(request) is False
    assert model_admin.has_change_permission(request, row) is False
    assert model_admin.has_delete_permission(request) is False
    assert model_admin.has_delete_permission(request, row) is False
    assert model_admin.has_view_permission(request, row) is True


def test_audit_log_cannot_be_modified_or_deleted_through_the_admin(admin_client, api_client_factory):
    api_client = api_client_factory()
    row = _audit_row(api_client)
    before = AuditLogEntry.objects.values().get(pk=row.pk)
    url = f"/admin/integrations/auditlogentry/{row.pk}/"

    view = admin_client.get(url + "change/")
    assert view.status_code == 200
    assert b"req-1" in view.content
    assert b'name="_save"' not in view.content

    change = admin_client.post(url + "change/", {"status": "500", "path": "/tampered", "request_id": "x"})
    assert change.status_code == 403
    delete = admin_client.post(url + "delete/", {"post": "yes"})
    assert delete.status_code == 403
    add = admin_client.post("/admin/integrations/auditlogentry/add/", {"status": "200", "path": "/forged"})
    assert add.status_code == 403
    bulk = admin_client.post(
        "/admin/integrations/auditlogentry/", {"action": "delete_selected", "_selected_action": [str(row.pk)]}
    )
    assert bulk.status_code in (200, 302)

    assert AuditLogEntry.objects.count() == 1
    assert AuditLogEntry.objects.values().get(pk=row.pk) == before


def test_audit_log_admin_filters_by_client_and_searches_by_patient(admin_client, api_client_factory):
    first = api_client_factory(name="First")
    second = api_client_factory(name="Second")
    patient = uuid.uuid4()
    hit = _audit_row(first)
    hit.request_id = "req-hit"
    hit.patient_ids = [patient]
    hit.save()
    miss = _audit_row(second)
    miss.request_id = "req-miss"
    miss.save()

    by_client = admin_client.get("/admin/integrations/auditlogentry/", {"client__id__exact": str(second.pk)})
    assert by_client.status_code == 200
    assert [e.pk for e in by_client.context["cl"].result_list] == [miss.pk]

    by_patient = admin_client.get("/admin/integrations/auditlogentry/", {"q": str(patient)})
    assert by_patient.status_code == 200
    assert [e.pk for e in by_patient.context["cl"].result_list] == [hit.pk]
