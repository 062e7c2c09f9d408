"""Webhook subscriptions through the API (/api/v1/webhooks/subscriptions, scope `webhooks:manage`): the
signing secret shown once, a client sees and changes only what it created, the admin's SSRF, event-kind and
header rules refuse the same values here, Idempotency-Key, the audit trail, test events that really deliver,
and secret rotation with the old secret honoured for the grace period."""

from __future__ import annotations

import json
import uuid
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone
from standardwebhooks import Webhook

from integrations.clients.scopes import SCOPES
from integrations.models import AuditLogEntry, IdempotencyRecord, NotificationOutboxMessage
from integrations.webhooks import delivery as delivery_module
from integrations.webhooks.models import HEADER_MASK, WebhookDelivery, WebhookEvent, WebhookSubscription
from integrations.webhooks.services import subscription_create
from tests.factories import ApiClientFactory, BranchFactory
from tests.helpers import REQUEST_BOOKKEEPING, bearer, exchange, row_counts
from tests.integrations.webhook_receiver import PUBLIC_TEST_ADDRESS, fake_dns, receiver, verify

__all__ = ["fake_dns", "receiver"]

pytestmark = pytest.mark.django_db

URL = "/api/v1/webhooks/subscriptions"
TARGET = "https://hooks.example.com/clinic"  # resolves to a public address through the fake DNS
MASKED_SECRET = f"whsec_{'•' * 8}"


@pytest.fixture(autouse=True)
def public_only(settings: Any, fake_dns: Any) -> Any:
    """The production rule (https, public addresses only) and a DNS that knows hooks.example.com."""
    settings.WEBHOOK_ALLOW_PRIVATE_TARGETS = False
    return fake_dns


class Caller:
    """An API client with a token, and its requests."""

    def __init__(self, http: Client, scopes: list[str], **kwargs: Any) -> None:
        self.api_client = ApiClientFactory(allowed_scopes=scopes, rate_limit_per_minute=1_000_000, **kwargs)
        response = exchange(http, self.api_client.client_id, self.api_client.secret)
        assert response.status_code == 200, response.content
        self.http = http
        self.token = response.json()["access_token"]

    def send(self, method: str, path: str, body: Any = None, **headers: Any) -> Any:
        data = "" if body is None else json.dumps(body)
        return self.http.generic(method, path, data, content_type="application/json", **bearer(self.token), **headers)

    def create(self, **overrides: Any) -> Any:
        return self.send("POST", URL, {**BODY, **overrides})


BODY: dict[str, Any] = {
    "name": "Hospital ERP",
    "description": "Bookings for the ERP.",
    "target_url": TARGET,
    "event_types": ["appointment.cancelled", "appointment.booked"],
    "extra_headers": {"Authorization": "Bearer erp-token-1", "X-Tenant": "42"},
}


@pytest.fixture
def manager(client: Client) -> Caller:
    return Caller(client, ["webhooks:manage", "appointments:read"])


@pytest.fixture
def other(client: Client) -> Caller:
    return Caller(client, ["webhooks:manage"])


def assert_field_errors(response: Any, *fields: str) -> list[dict[str, Any]]:
    assert response.status_code == 400, response.content
    assert response["Content-Type"] == "application/problem+json"
    body = response.json()
    assert (body["code"], body["title"], body["status"]) == ("validation_error", "Invalid input", 400)
    assert [error["field"] for error in body["errors"]] == list(fields)
    return body["errors"]


def state() -> dict[str, Any]:
    """Every row count, and every subscription as stored (secrets included), for "nothing changed"."""
    return {
        "counts": row_counts(exclude=REQUEST_BOOKKEEPING),
        "subscriptions": sorted(
            (
                str(s.pk),
                s.name,
                s.target_url,
                tuple(s.event_types),
                s.is_active,
                s.secret,
                json.dumps(s.extra_headers),
                str(s.previous_secret_expires_at),
            )
            for s in WebhookSubscription.objects.all()
        ),
    }


# --- Create and read ----------------------------------------------------------------------------------


def test_creating_a_subscription_answers_201_with_its_secret_once(manager: Caller) -> None:
    response = manager.create()

    assert response.status_code == 201, response.content
    subscription = WebhookSubscription.objects.get()
    body = response.json()
    secret = body.pop("signing_secret")
    assert secret == subscription.secret
    assert secret.startswith("whsec_")
    assert len(secret) == len("whsec_") + 44
    assert response["Location"] == f"/api/v1/webhooks/subscriptions/{subscription.pk}"
    assert response["Cache-Control"] == "no-store"
    created = timezone.localtime(subscription.created_at).isoformat()
    assert (
        body
        == {
            "id": str(subscription.pk),
            "name": "Hospital ERP",
            "description": "Bookings for the ERP.",
            "target_url": TARGET,
            "event_types": ["appointment.booked", "appointment.cancelled"],  # the registry's order
            "branch_ids": [],
            "extra_headers": {"Authorization": HEADER_MASK, "X-Tenant": HEADER_MASK},
            "is_active": True,
            "disabled_reason": None,
            "disabled_at": None,
            "signing_secret_masked": MASKED_SECRET + secret[-4:],
            "previous_secret_expires_at": None,
            "created_at": created,
            "updated_at": timezone.localtime(subscription.updated_at).isoformat(),
        }
    )
    assert "erp-token-1" not in response.content.decode()
    assert subscription.owner == manager.api_client
    assert subscription.extra_headers == {"Authorization": "Bearer erp-token-1", "X-Tenant": "42"}
    assert "erp-token-1" not in subscription.extra_headers_encrypted
    assert secret not in subscription.secret_encrypted


def test_the_secret_is_never_shown_again(manager: Caller) -> None:
    created = manager.create().json()
    secret = created["signing_secret"]

    detail = manager.send("GET", f"{URL}/{created['id']}")
    listed = manager.send("GET", URL)

    assert detail.status_code == 200
    assert detail.json() == {key: value for key, value in created.items() if key != "signing_secret"}
    assert listed.status_code == 200
    assert listed.json() == [detail.json()]
    assert listed["X-Total-Count"] == "1"
    for response in (detail, listed):
        assert secret not in response.content.decode()
        assert secret[6:] not in response.content.decode()
        assert "erp-token-1" not in response.content.decode()


def test_the_list_holds_only_the_callers_own_subscriptions(manager: Caller, other: Caller) -> None:
    mine = [manager.create(name=f"Mine {n}").json()["id"] for n in range(3)]
    other.create(name="Theirs")
    subscription_create(name="Staff-made", target_url=TARGET, event_types=["appointment.booked"])

    first = manager.send("GET", f"{URL}?per_page=2")
    second = manager.send("GET", f"{URL}?per_page=2&page=2")

    assert [row["id"] for row in first.json() + second.json()] == mine  # oldest first
    assert (first["X-Total-Count"], second["X-Total-Count"]) == ("3", "3")
    assert [row["name"] for row in other.send("GET", URL).json()] == ["Theirs"]


# --- Scopes and isolation -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "suffix", "body"),
    [
        ("GET", "", None),
        ("POST", "", BODY),
        ("GET", "/{id}", None),
        ("PATCH", "/{id}", {"is_active": False}),
        ("DELETE", "/{id}", None),
        ("POST", "/{id}/test", None),
        ("POST", "/{id}/rotate-secret", None),
    ],
)
def test_a_token_without_webhooks_manage_is_403_and_changes_nothing(
    client: Client, manager: Caller, method: str, suffix: str, body: Any
) -> None:
    subscription_id = manager.create().json()["id"]
    reader = Caller(client, [scope for scope in SCOPES if scope != "webhooks:manage"])
    before = state()

    response = reader.send(method, URL + suffix.format(id=subscription_id), body)

    assert response.status_code == 403, response.content
    assert response.json()["code"] == "insufficient_scope"
    assert (
        response["WWW-Authenticate"] == 'Bearer realm="clinic-api", error="insufficient_scope", scope="webhooks:manage"'
    )
    assert state() == before


@pytest.mark.parametrize(
    ("method", "suffix", "body"),
    [
        ("GET", "", None),
        ("PATCH", "", {"is_active": False, "target_url": "https://hooks.example.com/stolen"}),
        ("DELETE", "", None),
        ("POST", "/test", None),
        ("POST", "/rotate-secret", None),
    ],
)
def test_another_clients_subscription_is_404_like_an_unknown_id_and_changes_nothing(
    manager: Caller, other: Caller, method: str, suffix: str, body: Any
) -> None:
    theirs = other.create().json()["id"]
    staff_made, _ = subscription_create(name="Staff", target_url=TARGET, event_types=["appointment.booked"])
    unknown = str(uuid.uuid4())
    before = state()

    answers = {ref: manager.send(method, f"{URL}/{ref}{suffix}", body) for ref in (theirs, str(staff_made.pk), unknown)}

    for ref, response in answers.items():
        assert response.status_code == 404, response.content
        assert response["Content-Type"] == "application/problem+json"
        problem = response.json()
        assert problem == {
            "type": "/api/v1/problems/not_found",
            "title": "Not found",
            "status": 404,
            "detail": f"No webhook subscription {ref!r}.",
            "code": "not_found",
            "request_id": response["X-Request-ID"],
        }
    assert state() == before
    assert WebhookEvent.objects.count() == 0


# --- Validation: the admin's rules --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("target", "reason"),
    [
        ("http://127.0.0.1/hooks", "The URL must use https."),
        ("https://127.0.0.1/hooks", "127.0.0.1 is a loopback address"),
        ("https://169.254.169.254/latest/meta-data/", "link-local (cloud metadata)"),
        ("https://10.1.2.3/hooks", "private address"),
        ("https://[::1]/hooks", "loopback"),
        ("https://2130706433/hooks", "not a canonical IPv4 address"),
        ("https://localhost/hooks", "localhost is not a public host."),
        ("https://user:pw@hooks.example.com/x", "Credentials in the URL are not allowed"),
        ("http://hooks.example.com/clinic", "The URL must use https."),
        ("https://internal.example.com/hooks", "resolves to a non-public address"),
        ("https://nowhere.example.com/hooks", "does not resolve"),
    ],
)
def test_a_target_the_ssrf_rules_refuse_is_400_naming_target_url_and_creates_nothing(
    manager: Caller, public_only: Any, target: str, reason: str
) -> None:
    public_only.records["internal.example.com"] = [PUBLIC_TEST_ADDRESS, "192.168.1.10"]
    before = state()

    response = manager.create(target_url=target)

    (error,) = assert_field_errors(response, "target_url")
    assert reason in error["message"]
    assert state() == before
    assert not IdempotencyRecord.objects.exists()


def test_an_update_to_a_refused_target_changes_nothing(manager: Caller) -> None:
    subscription_id = manager.create().json()["id"]
    before = state()

    response = manager.send(
        "PATCH", f"{URL}/{subscription_id}", {"name": "Renamed", "target_url": "https://169.254.169.254/"}
    )

    assert_field_errors(response, "target_url")
    assert state() == before


def test_an_unknown_event_kind_is_400_naming_event_types(manager: Caller) -> None:
    before = state()

    response = manager.create(event_types=["appointment.booked", "appointment.teleported"])
    empty = manager.create(event_types=[])

    (error,) = assert_field_errors(response, "event_types")
    assert error["message"] == "Unknown event kinds: appointment.teleported."
    assert assert_field_errors(empty, "event_types")[0]["code"] == "min_length"
    assert state() == before


def test_every_bad_field_is_named_and_unknown_fields_are_refused(manager: Caller) -> None:
    response = manager.send("POST", URL, {"name": "", "target_url": TARGET, "secret": "whsec_mine"})

    assert response.status_code == 400, response.content
    errors = {error["field"]: error["code"] for error in response.json()["errors"]}
    assert errors == {"name": "blank", "event_types": "required", "secret": "unknown_field"}
    assert WebhookSubscription.objects.count() == 0


def test_reserved_or_malformed_extra_headers_are_400_naming_extra_headers(manager: Caller) -> None:
    reserved = manager.create(extra_headers={"webhook-signature": "v1,forged"})
    malformed = manager.create(extra_headers={"Bad Name": "x"})
    masked_unknown = manager.create(extra_headers={"Authorization": HEADER_MASK})

    assert "set by the sender" in assert_field_errors(reserved, "extra_headers")[0]["message"]
    assert "not a valid header name" in assert_field_errors(malformed, "extra_headers")[0]["message"]
    assert assert_field_errors(masked_unknown, "extra_headers")[0]["message"] == "Enter the value of Authorization."
    assert WebhookSubscription.objects.count() == 0


def test_a_bad_header_and_a_bad_target_are_named_together(manager: Caller) -> None:
    created = manager.create(target_url="https://169.254.169.254/", extra_headers={"Host": "evil"})
    subscription_id = manager.create().json()["id"]
    before = state()

    patched = manager.send(
        "PATCH", f"{URL}/{subscription_id}", {"target_url": "https://10.0.0.1/", "extra_headers": {"Host": "evil"}}
    )

    assert sorted(error["field"] for error in created.json()["errors"]) == ["extra_headers", "target_url"]
    assert sorted(error["field"] for error in patched.json()["errors"]) == ["extra_headers", "target_url"]
    assert patched.status_code == 400
    assert state() == before


# --- Branches -----------------------------------------------------------------------------------------


def test_a_client_limited_to_branches_subscribes_to_its_branches_only(client: Client) -> None:
    home, away = BranchFactory(code="BLR"), BranchFactory(code="MUM")
    limited = Caller(client, ["webhooks:manage"], branches=[home])
    before = state()

    refused = limited.create(branch_ids=[str(away.id)])
    defaulted = limited.create()
    named = limited.create(branch_ids=[str(home.id)])

    assert_field_errors(refused, "branch_ids")
    assert defaulted.status_code == 201
    assert named.status_code == 201
    assert defaulted.json()["branch_ids"] == [str(home.id)]
    assert named.json()["branch_ids"] == [str(home.id)]
    assert (
        state()["counts"]["integrations.WebhookSubscription"]
        == before["counts"]["integrations.WebhookSubscription"] + 2
    )


def test_an_unrestricted_client_may_filter_by_any_branch(manager: Caller) -> None:
    blr = BranchFactory(code="BLR")

    response = manager.create(branch_ids=[str(blr.id)])
    unknown = manager.create(branch_ids=[str(uuid.uuid4())])

    assert response.json()["branch_ids"] == [str(blr.id)]
    assert list(WebhookSubscription.objects.get().branches.all()) == [blr]
    assert_field_errors(unknown, "branch_ids")


# --- Update, disable, delete --------------------------------------------------------------------------


def test_patch_changes_only_what_it_sends_and_a_masked_header_keeps_its_value(manager: Caller) -> None:
    created = manager.create().json()

    response = manager.send(
        "PATCH",
        f"{URL}/{created['id']}",
        {"event_types": ["appointment.no_show"], "extra_headers": {"Authorization": HEADER_MASK, "X-Region": "south"}},
    )

    assert response.status_code == 200, response.content
    subscription = WebhookSubscription.objects.get()
    assert response.json() == {
        **{key: value for key, value in created.items() if key != "signing_secret"},
        "event_types": ["appointment.no_show"],
        "extra_headers": {"Authorization": HEADER_MASK, "X-Region": HEADER_MASK},
        "updated_at": timezone.localtime(subscription.updated_at).isoformat(),
    }
    assert subscription.extra_headers == {"Authorization": "Bearer erp-token-1", "X-Region": "south"}
    assert subscription.secret == created["signing_secret"]


def test_is_active_false_disables_and_true_enables_again(manager: Caller) -> None:
    subscription_id = manager.create().json()["id"]

    disabled = manager.send("PATCH", f"{URL}/{subscription_id}", {"is_active": False})
    enabled = manager.send("PATCH", f"{URL}/{subscription_id}", {"is_active": True})

    assert disabled.status_code == 200
    name = manager.api_client.name
    assert (disabled.json()["is_active"], disabled.json()["disabled_reason"]) == (
        False,
        f"Disabled by API client {name}.",
    )
    assert disabled.json()["disabled_at"] is not None
    assert (enabled.json()["is_active"], enabled.json()["disabled_reason"], enabled.json()["disabled_at"]) == (
        True,
        None,
        None,
    )


def test_disabling_does_not_recheck_a_target_that_no_longer_resolves(manager: Caller, public_only: Any) -> None:
    public_only.records["gone.example.com"] = [PUBLIC_TEST_ADDRESS]
    subscription_id = manager.create(target_url="https://gone.example.com/hooks").json()["id"]
    del public_only.records["gone.example.com"]

    disabled = manager.send("PATCH", f"{URL}/{subscription_id}", {"is_active": False})
    renamed = manager.send("PATCH", f"{URL}/{subscription_id}", {"name": "Renamed"})

    assert disabled.status_code == 200
    assert disabled.json()["is_active"] is False
    assert_field_errors(renamed, "target_url")


def test_a_disabled_subscription_receives_no_event(manager: Caller) -> None:
    from integrations.webhooks.events import event_publish

    subscription_id = manager.create().json()["id"]
    manager.send("PATCH", f"{URL}/{subscription_id}", {"is_active": False})

    event_publish(event_type="appointment.booked", payload={"appointment": {"status": "booked"}})

    assert WebhookDelivery.objects.count() == 0


def test_delete_answers_204_and_removes_the_subscription_with_its_deliveries(manager: Caller) -> None:
    subscription_id = manager.create().json()["id"]
    manager.send("POST", f"{URL}/{subscription_id}/test")

    response = manager.send("DELETE", f"{URL}/{subscription_id}")

    assert (response.status_code, response.content) == (204, b"")
    assert not WebhookSubscription.objects.exists()
    assert not WebhookDelivery.objects.exists()
    assert manager.send("GET", f"{URL}/{subscription_id}").status_code == 404


# --- Test event and rotation --------------------------------------------------------------------------


def test_a_test_event_queues_a_real_delivery_and_emits_nothing_to_patients(manager: Caller) -> None:
    subscription_id = manager.create().json()["id"]
    notifications = NotificationOutboxMessage.objects.count()

    response = manager.send("POST", f"{URL}/{subscription_id}/test")

    assert response.status_code == 202, response.content
    delivery = WebhookDelivery.objects.select_related("event").get()
    assert response.json() == {
        "id": str(delivery.event_id),
        "type": "webhook.test",
        "subscription_id": subscription_id,
        "status": "pending",
        "created_at": timezone.localtime(delivery.created_at).isoformat(),
    }
    assert (str(delivery.subscription_id), delivery.status, delivery.event.is_test) == (
        subscription_id,
        "pending",
        True,
    )
    assert delivery.event.type == "webhook.test"
    assert NotificationOutboxMessage.objects.count() == notifications


def test_a_test_event_with_a_body_is_refused(manager: Caller) -> None:
    subscription_id = manager.create().json()["id"]

    response = manager.send("POST", f"{URL}/{subscription_id}/test", {"event_type": "appointment.booked"})

    assert assert_field_errors(response, "event_type")[0]["code"] == "unknown_field"
    assert not WebhookEvent.objects.exists()


def test_rotation_shows_the_new_secret_once_and_both_secrets_sign_during_the_grace_period(
    manager: Caller, receiver: Any, settings: Any
) -> None:
    created = manager.create(target_url=receiver.url()).json()
    old_secret = created["signing_secret"]

    rotated = manager.send("POST", f"{URL}/{created['id']}/rotate-secret")

    assert rotated.status_code == 200, rotated.content
    new_secret = rotated.json()["signing_secret"]
    subscription = WebhookSubscription.objects.get()
    assert new_secret.startswith("whsec_")
    assert new_secret not in (old_secret, subscription.previous_secret_encrypted)
    assert subscription.secret == new_secret
    expires = subscription.previous_secret_expires_at
    assert expires is not None
    grace = expires - subscription.updated_at
    assert abs(grace - timedelta(seconds=settings.WEBHOOK_SECRET_ROTATION_GRACE_SECONDS)) < timedelta(seconds=5)
    assert rotated.json()["previous_secret_expires_at"] == timezone.localtime(expires).isoformat()
    assert rotated.json()["signing_secret_masked"] == MASKED_SECRET + new_secret[-4:]
    assert new_secret not in manager.send("GET", f"{URL}/{created['id']}").content.decode()
    # A real delivery of a test event: signed with the new secret and, for the grace period, the old one.
    manager.send("POST", f"{URL}/{created['id']}/test")
    delivery = WebhookDelivery.objects.get()
    assert delivery_module.delivery_attempt(delivery_id=delivery.pk) == "succeeded"
    (received,) = receiver.wait_for(1)
    assert len(received.headers["webhook-signature"].split(" ")) == 2
    assert verify(received, new_secret) == Webhook(old_secret).verify(received.body, received.headers)
    assert verify(received, new_secret)["type"] == "webhook.test"


# --- Idempotency and audit ----------------------------------------------------------------------------


def test_a_create_replayed_with_its_idempotency_key_creates_one_and_shows_the_secret_masked(manager: Caller) -> None:
    first = manager.send("POST", URL, BODY, HTTP_IDEMPOTENCY_KEY="sub-1")
    replay = manager.send("POST", URL, BODY, HTTP_IDEMPOTENCY_KEY="sub-1")
    reused = manager.send("POST", URL, {**BODY, "name": "Other"}, HTTP_IDEMPOTENCY_KEY="sub-1")

    assert first.status_code == 201
    assert replay.status_code == 201
    assert replay["Idempotent-Replayed"] == "true"
    assert replay["Location"] == first["Location"]
    secret = first.json()["signing_secret"]
    assert replay.json() == {**first.json(), "signing_secret": MASKED_SECRET + secret[-4:]}
    assert secret not in replay.content.decode()
    assert (reused.status_code, reused.json()["code"]) == (422, "idempotency_key_reused")
    assert WebhookSubscription.objects.count() == 1
    stored = IdempotencyRecord.objects.get()
    assert secret not in stored.response_body


def test_a_test_event_replayed_with_its_idempotency_key_queues_one_delivery(manager: Caller) -> None:
    subscription_id = manager.create().json()["id"]

    first = manager.send("POST", f"{URL}/{subscription_id}/test", HTTP_IDEMPOTENCY_KEY="test-1")
    replay = manager.send("POST", f"{URL}/{subscription_id}/test", HTTP_IDEMPOTENCY_KEY="test-1")

    assert (first.status_code, replay.status_code, replay["Idempotent-Replayed"]) == (202, 202, "true")
    assert replay.json() == first.json()
    assert WebhookDelivery.objects.count() == 1


def test_a_rotation_replayed_with_its_idempotency_key_rotates_once(manager: Caller) -> None:
    subscription_id = manager.create().json()["id"]

    first = manager.send("POST", f"{URL}/{subscription_id}/rotate-secret", HTTP_IDEMPOTENCY_KEY="rot-1")
    replay = manager.send("POST", f"{URL}/{subscription_id}/rotate-secret", HTTP_IDEMPOTENCY_KEY="rot-1")

    secret = first.json()["signing_secret"]
    assert WebhookSubscription.objects.get().secret == secret
    assert replay["Idempotent-Replayed"] == "true"
    assert replay.json() == {**first.json(), "signing_secret": MASKED_SECRET + secret[-4:]}


def test_a_patch_and_a_delete_replayed_with_their_keys_answer_as_the_first_time(manager: Caller) -> None:
    subscription_id = manager.create().json()["id"]
    path = f"{URL}/{subscription_id}"

    patched = [manager.send("PATCH", path, {"name": "Renamed"}, HTTP_IDEMPOTENCY_KEY="p-1") for _ in range(2)]
    deleted = [manager.send("DELETE", path, HTTP_IDEMPOTENCY_KEY="d-1") for _ in range(2)]

    assert [r.status_code for r in patched] == [200, 200]
    assert patched[1].json() == patched[0].json()
    assert [r.status_code for r in deleted] == [204, 204]
    assert deleted[1]["Idempotent-Replayed"] == "true"
    assert not WebhookSubscription.objects.exists()


def test_every_request_writes_one_audit_row_with_no_secret(manager: Caller, other: Caller) -> None:
    created = manager.create()
    subscription_id = created.json()["id"]
    secret = created.json()["signing_secret"]
    calls = [
        manager.send("GET", f"{URL}/{subscription_id}"),
        manager.send("PATCH", f"{URL}/{subscription_id}", {"is_active": False}),
        manager.send("POST", f"{URL}/{subscription_id}/rotate-secret"),
        manager.send("POST", f"{URL}/{subscription_id}/test"),
        other.send("DELETE", f"{URL}/{subscription_id}"),
        manager.send("DELETE", f"{URL}/{subscription_id}"),
    ]

    rows = {row.request_id: row for row in AuditLogEntry.objects.filter(path__startswith=URL)}
    assert len(rows) == 7
    expected = [
        (manager.api_client.pk, "POST", "api/v1/webhooks/subscriptions", 201),
        (manager.api_client.pk, "GET", "api/v1/webhooks/subscriptions/<str:id>", 200),
        (manager.api_client.pk, "PATCH", "api/v1/webhooks/subscriptions/<str:id>", 200),
        (manager.api_client.pk, "POST", "api/v1/webhooks/subscriptions/<str:id>/rotate-secret", 200),
        (manager.api_client.pk, "POST", "api/v1/webhooks/subscriptions/<str:id>/test", 202),
        (other.api_client.pk, "DELETE", "api/v1/webhooks/subscriptions/<str:id>", 404),
        (manager.api_client.pk, "DELETE", "api/v1/webhooks/subscriptions/<str:id>", 204),
    ]
    found = [rows[response["X-Request-ID"]] for response in [created, *calls]]
    assert [(row.client_id, row.method, row.route, row.status) for row in found] == expected
    assert all(row.patient_ids == [] for row in found)
    for row in found:
        assert secret not in json.dumps([row.path, row.route, row.user_agent, row.actor])
