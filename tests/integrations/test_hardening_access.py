"""Leaks and authentication details found by black-box testing (issue 13 item 3, docs/api-rules.md §7):
tokens from the header only, one way of sending client credentials, the anonymous per-address limit,
audit rows for failed exchanges, encrypted idempotency records, no-store and security headers, and no
cross-branch existence oracle on duplicates."""

from __future__ import annotations

import json
from datetime import date
from typing import Any

import pytest
from django.db import connection

from integrations.models import AuditLogEntry, IdempotencyRecord
from patients.models import Patient
from tests.factories import BranchFactory
from tests.helpers import basic_auth, bearer
from tests.patients.factories import PatientFactory, patch_patient, post_patient

pytestmark = pytest.mark.django_db

NEW_PATIENT: dict[str, Any] = {
    "first_name": "Meera",
    "last_name": "Nair",
    "date_of_birth": "1984-02-29",
    "gender": "female",
    "phone": "+919811122233",
}


@pytest.fixture
def blr() -> Any:
    return BranchFactory(code="BLR", name="Bengaluru")


@pytest.fixture
def mum() -> Any:
    return BranchFactory(code="MUM", name="Mumbai", state="Maharashtra")


def token_request(client: Any, data: str, **extra: Any) -> Any:
    return client.post("/api/v1/auth/token", data, content_type="application/x-www-form-urlencoded", **extra)


# --- Tokens and client credentials ----------------------------------------------------------------------


def test_an_access_token_in_a_form_body_does_not_authenticate(client, token_for, blr):
    token = token_for(["patients:read", "patients:write"])

    response = client.post(
        "/api/v1/patients",
        f"access_token={token}&first_name=X",
        content_type="application/x-www-form-urlencoded",
    )

    assert response.status_code == 401
    assert response.json()["code"] == "not_authenticated"
    assert not Patient.objects.exists()


def test_an_access_token_in_the_query_does_not_authenticate(client, token_for):
    token = token_for(["appointments:read"])

    response = client.get(f"/api/v1/branches?access_token={token}")

    assert response.status_code == 401


def test_basic_and_form_credentials_together_are_invalid_request(client, api_client_factory):
    api_client = api_client_factory(scopes=["appointments:read"])

    response = token_request(
        client,
        f"grant_type=client_credentials&client_id={api_client.client_id}&client_secret={api_client.secret}",
        **basic_auth(api_client.client_id, api_client.secret),
    )

    assert response.status_code == 400
    assert response.json() == {
        "error": "invalid_request",
        "error_description": "Send the client credentials either by HTTP Basic or in the form, not both.",
    }
    assert response["Cache-Control"] == "no-store"
    assert not api_client.accesstoken_set.exists()


@pytest.mark.parametrize("path", ["/api/v1/auth/token", "/api/v1/auth/revoke"])
def test_a_query_string_on_the_token_endpoints_is_an_rfc_6749_invalid_request(client, api_client_factory, path):
    # The token endpoint answered problem+json here: oauthlib's endpoint-level error had no Content-Type.
    api_client = api_client_factory(scopes=["appointments:read"])
    form = f"grant_type=client_credentials&token=x&client_id={api_client.client_id}&client_secret={api_client.secret}"

    response = client.post(f"{path}?foo=1", form, content_type="application/x-www-form-urlencoded")

    assert response.status_code == 400
    assert response["Content-Type"] == "application/json"
    assert response["Cache-Control"] == "no-store"
    assert response.json() == {"error": "invalid_request", "error_description": "URL query parameters are not allowed"}


def test_basic_credentials_alone_still_work(client, api_client_factory):
    api_client = api_client_factory(scopes=["appointments:read"])

    response = token_request(
        client, "grant_type=client_credentials", **basic_auth(api_client.client_id, api_client.secret)
    )

    assert response.status_code == 200
    assert response.json()["scope"] == "appointments:read"


def test_a_failed_exchange_for_an_unknown_client_names_the_client_id_tried(client):
    response = token_request(client, "grant_type=client_credentials&client_id=no-such-client&client_secret=guess")

    assert response.status_code == 401
    row = AuditLogEntry.objects.get()
    assert (row.client_id, row.actor, row.status) == (None, "client-id-tried:no-such-client", 401)


def test_a_failed_exchange_with_a_wrong_secret_names_the_client_and_the_id_tried(client, api_client_factory):
    api_client = api_client_factory(scopes=["appointments:read"])

    response = token_request(client, "grant_type=client_credentials", **basic_auth(api_client.client_id, "wrong"))

    assert response.status_code == 401
    row = AuditLogEntry.objects.get()
    assert row.actor == f"client-id-tried:{api_client.client_id}"


# --- Anonymous traffic is rate limited per address ------------------------------------------------------


def test_unauthenticated_requests_beyond_the_limit_are_429_with_retry_after(client, settings):
    settings.ANONYMOUS_RATE_LIMIT = 3
    address = {"REMOTE_ADDR": "203.0.113.10"}

    statuses = [client.get("/api/v1/patients", **address).status_code for _ in range(5)]

    assert statuses == [401, 401, 401, 429, 429]
    refused = client.get("/api/v1/patients", **address)
    assert refused["Content-Type"] == "application/problem+json"
    assert refused.json()["code"] == "rate_limited"
    assert int(refused["Retry-After"]) >= 1
    assert refused["RateLimit-Limit"] == "3"
    assert refused["RateLimit-Remaining"] == "0"
    assert AuditLogEntry.objects.filter(status=429).count() == 3  # refused requests are audited too


def test_another_address_is_not_affected(client, settings):
    settings.ANONYMOUS_RATE_LIMIT = 1
    client.get("/api/v1/patients", REMOTE_ADDR="203.0.113.11")

    assert client.get("/api/v1/patients", REMOTE_ADDR="203.0.113.11").status_code == 429
    assert client.get("/api/v1/patients", REMOTE_ADDR="203.0.113.12").status_code == 401


def test_failed_token_exchanges_count_and_then_only_the_right_secret_gets_through(client, settings, api_client_factory):
    settings.ANONYMOUS_RATE_LIMIT = 2
    api_client = api_client_factory(scopes=["appointments:read"])
    address = {"REMOTE_ADDR": "203.0.113.13"}
    guess = f"grant_type=client_credentials&client_id={api_client.client_id}&client_secret=guess"

    statuses = [token_request(client, guess, **address).status_code for _ in range(3)]
    right = token_request(
        client,
        f"grant_type=client_credentials&client_id={api_client.client_id}&client_secret={api_client.secret}",
        **address,
    )
    guess_again = token_request(client, guess, **address)

    assert statuses == [401, 401, 429]
    # Valid credentials are never refused for their address (docs/api-rules.md §3); guesses still are.
    assert right.status_code == 200
    assert guess_again.json()["error"] == "rate_limited"
    assert api_client.accesstoken_set.count() == 1


def test_successful_token_exchanges_do_not_use_the_anonymous_budget(client, settings, api_client_factory):
    settings.ANONYMOUS_RATE_LIMIT = 1
    api_client = api_client_factory(scopes=["appointments:read"], rate_limit_per_minute=100)
    form = f"grant_type=client_credentials&client_id={api_client.client_id}&client_secret={api_client.secret}"

    statuses = [token_request(client, form, REMOTE_ADDR="203.0.113.14").status_code for _ in range(3)]

    assert statuses == [200, 200, 200]


def test_a_valid_token_is_served_from_an_address_over_its_anonymous_limit(client, settings, token_for):
    token = token_for(["appointments:read"])
    settings.ANONYMOUS_RATE_LIMIT = 1
    address = {"REMOTE_ADDR": "203.0.113.15"}
    client.get("/api/v1/branches", **address)
    assert client.get("/api/v1/branches", **address).status_code == 429

    assert client.get("/api/v1/branches", **bearer(token), **address).status_code == 200
    assert client.get("/api/v1/branches", HTTP_AUTHORIZATION="Bearer invalid", **address).status_code == 429


# --- Stored idempotent responses are encrypted ---------------------------------------------------------


def test_an_idempotent_response_is_stored_encrypted_and_replayed_in_clear(client, token_for, blr):
    token = token_for(["patients:read", "patients:write"], branches=[blr])

    first = post_patient(client, token, NEW_PATIENT, key="register-meera")
    replay = post_patient(client, token, NEW_PATIENT, key="register-meera")

    assert first.status_code == replay.status_code == 201
    assert replay["Idempotent-Replayed"] == "true"
    assert replay.content == first.content
    with connection.cursor() as cursor:
        cursor.execute("SELECT response_body FROM integrations_idempotencyrecord")
        (stored,) = cursor.fetchone()
    assert stored.startswith("gAAAAA")  # a Fernet token
    assert "Meera" not in stored
    assert "+919811122233" not in stored
    assert IdempotencyRecord.objects.count() == 1


# --- Caching and security headers ------------------------------------------------------------------------


def test_patient_data_is_never_cached(client, token_for, blr):
    patient = PatientFactory(registration_branch=blr)
    token = token_for(["patients:read"])

    for url in ("/api/v1/patients", f"/api/v1/patients/{patient.id}", "/api/v1/patients/unknown"):
        assert client.get(url, **bearer(token))["Cache-Control"] == "no-store", url


def test_the_schema_may_be_cached_but_the_docs_and_admin_have_a_content_security_policy(client):
    schema = client.get("/api/v1/schema")
    docs = client.get("/api/v1/docs")
    admin = client.get("/admin/login/")

    assert "Cache-Control" not in schema or schema["Cache-Control"] != "no-store"
    for response in (docs, admin):
        assert response.status_code == 200
        policy = response["Content-Security-Policy"]
        assert "script-src 'self'" in policy
        assert "frame-ancestors 'none'" in policy
        assert response["X-Frame-Options"] == "DENY"
        assert response["X-Content-Type-Options"] == "nosniff"
    assert b"<script>" not in docs.content  # the init script is served by the split view, not inline
    assert client.get("/api/v1/docs?script=")["Content-Type"].startswith("application/javascript")


def test_hsts_on_secure_requests_when_configured(client, settings):
    settings.SECURE_HSTS_SECONDS = 31_536_000

    secure = client.get("/healthz", secure=True)
    plain = client.get("/healthz")

    assert secure["Strict-Transport-Security"] == "max-age=31536000"
    assert "Strict-Transport-Security" not in plain


def test_hsts_is_on_by_default_with_debug_off():
    from clinic.env import env_int

    assert env_int("SECURE_HSTS_SECONDS", 31_536_000, minimum=0) == 31_536_000  # the default the settings use


# --- No cross-branch existence oracle ------------------------------------------------------------------


def test_a_duplicate_at_an_invisible_branch_is_409_without_ids(client, token_for, blr, mum):
    PatientFactory(registration_branch=blr, phone="+919811122233", date_of_birth=date(1984, 2, 29))
    token = token_for(["patients:read", "patients:write"], branches=[mum])

    response = post_patient(client, token, NEW_PATIENT)

    assert response.status_code == 409
    body = response.json()
    assert body["code"] == "duplicate_patient"
    assert "existing_id" not in body
    assert "existing_patient_id" not in body
    assert body["detail"].startswith("This person is already registered at another branch of the network")
    assert Patient.objects.count() == 1


def test_a_duplicate_at_a_visible_branch_still_names_the_record(client, token_for, blr):
    existing = PatientFactory(registration_branch=blr, phone="+919811122233", date_of_birth=date(1984, 2, 29))
    token = token_for(["patients:read", "patients:write"], branches=[blr])

    body = post_patient(client, token, NEW_PATIENT).json()

    assert (body["existing_id"], body["existing_patient_id"]) == (str(existing.id), existing.patient_id)


def test_patching_to_an_invisible_duplicate_is_409_without_ids_and_changes_nothing(client, token_for, blr, mum):
    PatientFactory(registration_branch=blr, phone="+919811122233", date_of_birth=date(1984, 2, 29))
    mine = PatientFactory(registration_branch=mum, phone="+919800000001", date_of_birth=date(1984, 2, 29))
    token = token_for(["patients:read", "patients:write"], branches=[mum])

    response = patch_patient(client, token, str(mine.id), {"phone": "+919811122233"})

    assert response.status_code == 409
    assert "existing_id" not in response.json()
    mine.refresh_from_db()
    assert mine.phone == "+919800000001"


def test_an_abha_number_held_at_an_invisible_branch_is_409_without_ids(client, token_for, blr, mum):
    PatientFactory(registration_branch=blr, national_health_id="91123456789012")
    token = token_for(["patients:read", "patients:write"], branches=[mum])

    response = post_patient(client, token, {**NEW_PATIENT, "national_health_id": "91-1234-5678-9012"})

    assert response.status_code == 409
    body = response.json()
    assert body["code"] == "duplicate_patient"
    assert "another patient" not in json.dumps(body)
    assert "existing_id" not in body
    assert Patient.objects.count() == 1


# --- Default registration branch ------------------------------------------------------------------------


def test_a_client_of_several_branches_registers_at_its_default_branch(
    client, api_client_factory, issue_token, blr, mum
):
    api_client = api_client_factory(scopes=["patients:read", "patients:write"], branches=[blr, mum])
    api_client.default_branch = mum
    api_client.save()

    response = post_patient(client, issue_token(api_client), NEW_PATIENT)

    assert response.status_code == 201, response.content
    assert response.json()["branch_id"] == str(mum.id)


def test_without_a_default_the_head_office_is_used(client, token_for, blr, mum):
    mum.is_head_office = True
    mum.save()

    response = post_patient(client, token_for(["patients:read", "patients:write"]), NEW_PATIENT)

    assert response.status_code == 201
    assert response.json()["branch_id"] == str(mum.id)


def test_a_head_office_the_client_may_not_see_is_not_used(client, token_for, blr, mum):
    other = BranchFactory(code="DEL", is_head_office=True)
    token = token_for(["patients:read", "patients:write"], branches=[blr, mum])

    response = post_patient(client, token, NEW_PATIENT)

    assert response.status_code == 400
    assert [e["field"] for e in response.json()["errors"]] == ["branch_id"]
    assert not Patient.objects.exclude(registration_branch=other).exists()


# --- PostgreSQL restarting: 503 with Retry-After, audited once it is back ---------------------------------


@pytest.mark.django_db(transaction=True)
def test_requests_while_postgresql_is_unreachable_are_503_and_audited_when_it_is_back(client, token_for):
    from integrations.tasks import flush_deferred_audit_rows

    token = token_for(["appointments:read"])
    AuditLogEntry.objects.all().delete()
    port = connection.settings_dict["PORT"]
    connection.close()
    connection.settings_dict["PORT"] = "1"  # nothing listens there: every connection attempt is refused
    try:
        responses = [client.get("/api/v1/branches", **bearer(token), HTTP_X_REQUEST_ID=f"down-{n}") for n in range(3)]
    finally:
        connection.close()
        connection.settings_dict["PORT"] = port

    for response in responses:
        assert response.status_code == 503
        assert response["Content-Type"] == "application/problem+json"
        assert response["Retry-After"] == "5"
        assert response.json()["code"] == "service_unavailable"
    assert not AuditLogEntry.objects.exists()

    assert flush_deferred_audit_rows() == 3

    rows = AuditLogEntry.objects.order_by("request_id")
    assert [(r.request_id, r.status, r.path) for r in rows] == [
        (f"down-{n}", 503, "/api/v1/branches") for n in range(3)
    ]


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("path", "form"),
    [
        ("/api/v1/auth/token", "grant_type=client_credentials&client_id=gateway-7&client_secret=s3cret"),
        ("/api/v1/auth/revoke", "token=abc&client_id=gateway-7&client_secret=s3cret"),
    ],
)
def test_token_endpoints_while_postgresql_is_unreachable_answer_rfc_6749_503_and_are_audited_later(client, path, form):
    # They answered the API's problem+json 503, a body no OAuth client library reads, with no actor in the
    # deferred audit row; the token endpoints answer in RFC 6749 bodies whatever the status.
    from integrations.tasks import flush_deferred_audit_rows

    port = connection.settings_dict["PORT"]
    connection.close()
    connection.settings_dict["PORT"] = "1"
    try:
        response = client.post(path, form, content_type="application/x-www-form-urlencoded")
    finally:
        connection.close()
        connection.settings_dict["PORT"] = port

    assert response.status_code == 503
    assert response["Content-Type"] == "application/json"
    assert response["Retry-After"] == "5"
    assert response["Cache-Control"] == "no-store"
    assert response.json() == {
        "error": "temporarily_unavailable",
        "error_description": "The service is temporarily unavailable; retry shortly.",
    }
    AuditLogEntry.objects.all().delete()
    assert flush_deferred_audit_rows() >= 1
    row = AuditLogEntry.objects.get(path=path)
    assert (row.status, row.actor, row.client_id) == (503, "client-id-tried:gateway-7", None)


def test_the_admin_refuses_a_default_branch_outside_the_clients_branches(blr, mum):
    from integrations.clients.admin import ApiClientForm

    form = ApiClientForm(
        data={"name": "Kiosk", "allowed_scopes": ["patients:write"], "branches": [blr.pk], "default_branch": mum.pk}
    )

    assert not form.is_valid()
    assert form.errors["default_branch"] == ["Choose one of the client's branches (or none)."]


def test_only_one_branch_can_be_the_head_office(blr, mum):
    from django.db import IntegrityError, transaction

    blr.is_head_office = True
    blr.save()
    mum.is_head_office = True
    with pytest.raises(IntegrityError), transaction.atomic():
        mum.save()
