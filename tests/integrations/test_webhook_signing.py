"""Standard Webhooks signatures: what the receiver gets verifies with the standardwebhooks package, and
anything changed in transit (body, id, timestamp) or replayed later fails; secret rotation signs with both
secrets during its grace period."""

from __future__ import annotations

import base64
from datetime import UTC, datetime, timedelta

import pytest
from standardwebhooks import Webhook
from standardwebhooks.webhooks import WebhookVerificationError

from integrations.webhooks import clock, signing
from integrations.webhooks.delivery import delivery_attempt
from integrations.webhooks.events import event_publish
from integrations.webhooks.models import WebhookDelivery, WebhookSubscription
from integrations.webhooks.services import secret_rotate
from tests.integrations.webhook_receiver import receiver, subscribe, verify

pytestmark = pytest.mark.django_db
__all__ = ["receiver"]

PAYLOAD = {
    "appointment": {"appointment_id": "8d2b9a6e-0d0c-4a4c-9d49-3f7f2f5b1a10", "status": "booked", "notes": "₹ café"}
}


def deliver_one(event_type: str = "appointment.booked") -> WebhookDelivery:
    """Publish an event and make the first attempt of each delivery right here (no broker involved)."""
    event_publish(event_type=event_type, payload=PAYLOAD, branch_id=None)
    for delivery in WebhookDelivery.objects.filter(status="pending"):
        assert delivery_attempt(delivery_id=delivery.pk) == "succeeded"
    return WebhookDelivery.objects.latest("id")


def test_a_secret_is_whsec_and_the_base64_of_32_random_bytes():
    secrets = {signing.secret_generate() for _ in range(50)}
    assert len(secrets) == 50
    for secret in secrets:
        assert secret.startswith("whsec_")
        assert len(base64.b64decode(secret.removeprefix("whsec_"), validate=True)) == 32


def test_the_signature_is_the_standard_webhooks_hmac_of_id_timestamp_and_body():
    secret = signing.secret_generate()
    body = '{"id":"msg_1","data":{"name":"café"}}'.encode()
    ours = signing.signature(secret=secret, msg_id="msg_1", timestamp=1_767_225_600, body=body)
    theirs = Webhook(secret).sign("msg_1", datetime.fromtimestamp(1_767_225_600, UTC), body.decode())
    assert ours == theirs
    assert signing.mask_secret(secret) == "whsec_••••••••" + secret[-4:]


def test_a_delivered_event_verifies_and_every_tampering_fails(receiver):
    _, secret = subscribe(receiver.url())
    deliver_one()
    (received,) = receiver.requests
    assert verify(received, secret)["data"] == PAYLOAD

    headers = received.headers
    hook = Webhook(secret)
    with pytest.raises(WebhookVerificationError, match="No matching signature"):
        hook.verify(received.body.replace(b"booked", b"cancel"), headers)
    with pytest.raises(WebhookVerificationError, match="No matching signature"):
        hook.verify(received.body + b" ", headers)
    with pytest.raises(WebhookVerificationError, match="No matching signature"):
        hook.verify(received.body, {**headers, "webhook-id": "9f1c7e3a-0000-4000-8000-000000000000"})
    with pytest.raises(WebhookVerificationError, match="No matching signature"):
        hook.verify(received.body, {**headers, "webhook-timestamp": str(int(headers["webhook-timestamp"]) - 1)})
    with pytest.raises(WebhookVerificationError, match="No matching signature"):
        Webhook(signing.secret_generate()).verify(received.body, headers)
    with pytest.raises(WebhookVerificationError, match="Missing required headers"):
        hook.verify(received.body, {k: v for k, v in headers.items() if k != "webhook-signature"})


def test_a_message_signed_ten_minutes_ago_is_refused_as_a_replay(receiver, monkeypatch):
    _, secret = subscribe(receiver.url())
    ten_minutes_ago = clock.now() - timedelta(minutes=10)
    monkeypatch.setattr(clock, "now", lambda: ten_minutes_ago)
    deliver_one()
    (received,) = receiver.requests
    assert int(received.headers["webhook-timestamp"]) == int(ten_minutes_ago.timestamp())
    with pytest.raises(WebhookVerificationError, match="too old"):
        verify(received, secret)


def test_after_a_rotation_deliveries_carry_both_signatures_until_the_grace_period_ends(receiver, monkeypatch):
    subscription, old_secret = subscribe(receiver.url())
    new_secret = secret_rotate(subscription=subscription, grace_seconds=3600)
    assert new_secret != old_secret
    assert subscription.secret == new_secret

    deliver_one()
    during = receiver.requests[-1]
    signatures = during.headers["webhook-signature"].split(" ")
    assert len(signatures) == 2
    assert all(s.startswith("v1,") for s in signatures)
    assert verify(during, new_secret) == verify(during, old_secret)
    timestamp = int(during.headers["webhook-timestamp"])
    assert signatures == [
        signing.signature(secret=s, msg_id=during.webhook_id, timestamp=timestamp, body=during.body)
        for s in (new_secret, old_secret)
    ]

    later = clock.now() + timedelta(hours=1, seconds=1)
    monkeypatch.setattr(clock, "now", lambda: later)
    deliver_one()
    after = receiver.requests[-1]
    assert " " not in after.headers["webhook-signature"]
    # Signed an hour ahead of the real clock: compare with the signature as the package computes it.
    expected = Webhook(new_secret).sign(after.webhook_id, later, after.body.decode())
    assert after.headers["webhook-signature"] == expected
    assert Webhook(old_secret).sign(after.webhook_id, later, after.body.decode()) != expected


def test_a_rotation_without_grace_drops_the_old_secret_at_once(receiver):
    subscription, old_secret = subscribe(receiver.url())
    new_secret = secret_rotate(subscription=subscription, grace_seconds=0)
    deliver_one()
    (received,) = receiver.requests
    assert verify(received, new_secret)
    with pytest.raises(WebhookVerificationError):
        verify(received, old_secret)
    subscription.refresh_from_db()
    assert (subscription.previous_secret_encrypted, subscription.previous_secret_expires_at) == ("", None)


def test_the_signing_secret_and_headers_are_stored_encrypted(receiver):
    subscription, secret = subscribe(receiver.url(), extra_headers={"Authorization": "Bearer s3cr3t-token"})
    row = WebhookSubscription.objects.filter(pk=subscription.pk).values().get()
    stored = " ".join(str(value) for value in row.values())
    assert secret not in stored
    assert secret.removeprefix("whsec_") not in stored
    assert "s3cr3t-token" not in stored
    assert subscription.extra_headers == {"Authorization": "Bearer s3cr3t-token"}
    assert subscription.extra_headers_masked == "Authorization: ••••••••"
