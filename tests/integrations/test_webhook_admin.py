"""The webhook admin (secret shown once, headers masked, test event, rotation, enable/disable, read-only
deliveries with their attempts, replay) and the create_webhook_subscription command."""

from __future__ import annotations

import json
import re
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from standardwebhooks import Webhook

from integrations.webhooks import delivery as delivery_module
from integrations.webhooks.events import event_publish
from integrations.webhooks.models import WebhookAttempt, WebhookDelivery, WebhookEvent, WebhookSubscription
from integrations.webhooks.registry import event_kinds
from tests.factories import BranchFactory, network_wide
from tests.helpers import shown_secret, wait_until
from tests.integrations.webhook_receiver import Reply, fake_dns, receiver, subscribe, verify
from tests.worker import celery_worker

__all__ = ["celery_worker", "fake_dns", "receiver"]

ADD_URL = "/admin/integrations/webhooksubscription/add/"
LIST_URL = "/admin/integrations/webhooksubscription/"
DELIVERIES_URL = "/admin/integrations/webhookdelivery/"
PAYLOAD = {"appointment": {"appointment_id": "3f0b3c1e-7f7e-4a9e-b1b5-2d6a9d4f8e21", "status": "booked"}}


@pytest.fixture
def staff(client, django_user_model):
    client.force_login(network_wide(django_user_model.objects.create_superuser("root", "root@example.com", None)))
    return client


@pytest.fixture(autouse=True)
def public_dns(fake_dns):
    return fake_dns


def add_form(**overrides):
    data = {
        "name": "Hospital ERP",
        "description": "Appointment feed for the ERP.",
        "target_url": "https://hooks.example.com/clinic",
        "event_types": ["appointment.booked", "appointment.cancelled"],
        "extra_headers": "Authorization: Bearer erp-token-1\nX-Tenant: 42",
        "is_active": "on",
    }
    data.update(overrides)
    return data


def action(client, url, name, *pks, follow=False):
    return client.post(url, {"action": name, "_selected_action": [str(pk) for pk in pks]}, follow=follow)


# --- Subscriptions --------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_adding_a_subscription_shows_its_secret_once_and_stores_secret_and_headers_encrypted(staff):
    blr = BranchFactory(code="BLR")
    response = staff.post(ADD_URL, add_form(branches=[str(blr.pk)]))

    assert response.status_code == 200, response.content
    assert "no-store" in response["Cache-Control"]
    subscription = WebhookSubscription.objects.get()
    secret = shown_secret(response, "signing-secret")
    assert secret == subscription.secret
    assert secret.startswith("whsec_")
    assert "erp-token-1" not in response.content.decode()
    assert (subscription.name, subscription.target_url, subscription.is_active) == (
        "Hospital ERP",
        "https://hooks.example.com/clinic",
        True,
    )
    assert subscription.event_types == ["appointment.booked", "appointment.cancelled"]
    assert list(subscription.branches.all()) == [blr]
    assert subscription.extra_headers == {"Authorization": "Bearer erp-token-1", "X-Tenant": "42"}
    raw = " ".join(str(v) for v in WebhookSubscription.objects.filter(pk=subscription.pk).values().get().values())
    assert secret not in raw
    assert "erp-token-1" not in raw


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("overrides", "field", "message"),
    [
        ({"target_url": "https://169.254.169.254/latest"}, "target_url", "link-local (cloud metadata)"),
        ({"target_url": "http://hooks.example.com/"}, "target_url", "The URL must use https."),
        ({"target_url": "https://admin:pw@hooks.example.com/"}, "target_url", "Credentials in the URL"),
        ({"target_url": "https://intranet/"}, "target_url", "single-label name"),
        ({"extra_headers": "webhook-signature: forged"}, "extra_headers", "set by the sender"),
        ({"extra_headers": "Bad Header: x"}, "extra_headers", "not a valid header name"),
        ({"extra_headers": "no colon here"}, "extra_headers", "Write each header as"),
        ({"event_types": []}, "event_types", "This field is required."),
    ],
)
def test_the_admin_form_refuses_bad_input_and_saves_nothing(staff, overrides, field, message):
    response = staff.post(ADD_URL, add_form(**overrides))

    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert field in errors
    assert message in " ".join(errors[field])
    assert not WebhookSubscription.objects.exists()


@pytest.mark.django_db
def test_the_change_page_masks_the_secret_and_header_values_and_keeps_masked_values(staff):
    subscription, secret = subscribe(
        "https://hooks.example.com/clinic", extra_headers={"Authorization": "Bearer erp-token-1", "X-Tenant": "42"}
    )
    url = f"{LIST_URL}{subscription.pk}/change/"

    page = staff.get(url).content.decode()

    assert secret not in page
    assert secret.removeprefix("whsec_") not in page
    assert "erp-token-1" not in page
    assert f"whsec_••••••••{secret[-4:]}" in page
    assert "Authorization: ••••••••\nX-Tenant: ••••••••" in page

    form = add_form(extra_headers="Authorization: ••••••••\nX-Tenant: 43\nX-Extra: new", name="ERP (renamed)")
    response = staff.post(url, form)
    assert response.status_code == 302, response.context["adminform"].form.errors if response.context else ""
    subscription.refresh_from_db()
    assert subscription.name == "ERP (renamed)"
    assert subscription.extra_headers == {"Authorization": "Bearer erp-token-1", "X-Tenant": "43", "X-Extra": "new"}
    assert subscription.secret == secret  # editing never changes the secret

    staff.post(url, add_form(extra_headers=""))
    subscription.refresh_from_db()
    assert subscription.extra_headers == {}


@pytest.mark.django_db
def test_a_masked_value_for_a_new_header_name_is_refused(staff):
    subscription, _ = subscribe("https://hooks.example.com/clinic", extra_headers={"X-Tenant": "42"})
    response = staff.post(f"{LIST_URL}{subscription.pk}/change/", add_form(extra_headers="X-Other: ••••••••"))
    assert response.status_code == 200
    assert response.context["adminform"].form.errors["extra_headers"] == ["Enter the value of X-Other."]


@pytest.mark.django_db
def test_disable_and_enable_actions(staff):
    first, _ = subscribe("https://hooks.example.com/a", name="a")
    second, _ = subscribe("https://hooks.example.com/b", name="b")

    action(staff, LIST_URL, "disable", first.pk, second.pk)
    first.refresh_from_db()
    assert (first.is_active, first.disabled_reason) == (False, "Disabled by root.")
    assert not WebhookSubscription.objects.filter(is_active=True).exists()

    action(staff, LIST_URL, "enable", first.pk)
    first.refresh_from_db()
    second.refresh_from_db()
    assert (first.is_active, first.disabled_reason, first.disabled_at, second.is_active) == (True, "", None, False)


@pytest.mark.django_db
def test_rotate_shows_the_new_secret_once_and_keeps_the_old_one_for_the_grace_period(staff, settings):
    settings.WEBHOOK_SECRET_ROTATION_GRACE_SECONDS = 3600
    subscription, old_secret = subscribe("https://hooks.example.com/clinic")

    response = action(staff, LIST_URL, "rotate_secret", subscription.pk)

    assert response.status_code == 200
    assert "no-store" in response["Cache-Control"]
    new_secret = shown_secret(response, "signing-secret")
    assert old_secret not in response.content.decode()
    subscription.refresh_from_db()
    assert subscription.secret == new_secret != old_secret
    assert subscription.signing_secrets(subscription.previous_secret_expires_at.replace(microsecond=0)) == [
        new_secret,
        old_secret,
    ]


@pytest.mark.django_db
def test_rotate_needs_exactly_one_subscription(staff):
    first, first_secret = subscribe("https://hooks.example.com/a", name="a")
    second, _ = subscribe("https://hooks.example.com/b", name="b")
    response = action(staff, LIST_URL, "rotate_secret", first.pk, second.pk, follow=True)
    assert "Select exactly one subscription" in response.content.decode()
    first.refresh_from_db()
    assert first.secret == first_secret


@pytest.mark.django_db(transaction=True)
def test_a_test_event_from_the_admin_reaches_the_receiver_signed(staff, celery_worker, receiver):
    subscription, secret = subscribe(receiver.url(), ["appointment.cancelled"], is_active=False)

    response = action(staff, LIST_URL, "send_test_event", subscription.pk, follow=True)

    delivery = WebhookDelivery.objects.get()
    assert f"delivery {delivery.pk}</a> shows the result" in response.content.decode()
    (received,) = receiver.wait_for(1)
    body = verify(received, secret)
    assert body["type"] == "webhook.test"
    assert body["data"]["subscription"] == {"id": str(subscription.pk), "name": "Receiver"}
    wait_until(lambda: WebhookDelivery.objects.get().status == "succeeded")
    assert WebhookEvent.objects.get().is_test is True


@pytest.mark.django_db(transaction=True)
def test_after_rotation_from_the_admin_both_secrets_verify_a_test_event(staff, celery_worker, receiver):
    subscription, old_secret = subscribe(receiver.url())
    new_secret = shown_secret(action(staff, LIST_URL, "rotate_secret", subscription.pk), "signing-secret")

    action(staff, LIST_URL, "send_test_event", subscription.pk)

    (received,) = receiver.wait_for(1)
    assert len(received.headers["webhook-signature"].split(" ")) == 2
    assert Webhook(new_secret).verify(received.body, received.headers) == Webhook(old_secret).verify(
        received.body, received.headers
    )


@pytest.mark.django_db
def test_a_failed_test_event_is_not_retried(receiver):
    subscription, _ = subscribe(receiver.url())
    receiver.reply_with(Reply(status=500))
    from integrations.webhooks.services import test_event_send

    delivery = test_event_send(subscription=subscription)
    assert delivery_module.delivery_attempt(delivery_id=delivery.pk) == "failed"
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempt_count, delivery.next_attempt_at) == ("failed", 1, None)


# --- Deliveries -----------------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_replaying_a_failed_delivery_sends_it_again_with_the_same_webhook_id(staff, celery_worker, receiver):
    _, secret = subscribe(receiver.url())
    event_publish(event_type="appointment.booked", payload=PAYLOAD)
    (first,) = receiver.wait_for(1)
    wait_until(lambda: WebhookDelivery.objects.get().status == "succeeded")
    delivery = WebhookDelivery.objects.get()
    WebhookDelivery.objects.filter(pk=delivery.pk).update(status="failed")

    response = action(staff, DELIVERIES_URL, "replay", delivery.pk, follow=True)

    assert "Queued 1 delivery(ies) again." in response.content.decode()
    received = receiver.wait_for(2)
    assert received[1].webhook_id == first.webhook_id
    assert verify(received[1], secret)["data"] == PAYLOAD
    wait_until(lambda: WebhookDelivery.objects.get().status == "succeeded")
    delivery.refresh_from_db()
    assert delivery.attempt_count == 1  # a replay starts the schedule again
    assert WebhookAttempt.objects.filter(delivery=delivery).count() == 2


@pytest.mark.django_db
def test_replay_is_refused_while_an_attempt_is_in_flight_or_the_subscription_is_disabled(staff, receiver):
    subscription, _ = subscribe(receiver.url())
    event_publish(event_type="appointment.booked", payload=PAYLOAD)
    delivery = WebhookDelivery.objects.get()
    delivery_module.delivery_claim(delivery_id=delivery.pk)

    response = action(staff, DELIVERIES_URL, "replay", delivery.pk, follow=True)
    assert "is being attempted right now" in response.content.decode()
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempt_count) == ("delivering", 1)

    WebhookDelivery.objects.filter(pk=delivery.pk).update(status="failed", claimed_until=None)
    WebhookSubscription.objects.filter(pk=subscription.pk).update(is_active=False)
    response = action(staff, DELIVERIES_URL, "replay", delivery.pk, follow=True)
    assert "enable it before replaying" in response.content.decode()
    assert WebhookDelivery.objects.get().status == "failed"


@pytest.mark.django_db
def test_deliveries_are_read_only_with_their_attempts_and_filterable(staff, receiver):
    ok, _ = subscribe(receiver.url("/ok"), name="ok")
    failing, _ = subscribe(receiver.url("/failing"), ["appointment.cancelled"], name="failing")
    # The receiver answers in arrival order, so the failing subscription's delivery is attempted last
    # (the two deliveries of one event are not created in any particular order).
    receiver.reply_with(Reply(status=200), Reply(status=200), Reply(status=500, body=b"db down"))
    event_publish(event_type="appointment.booked", payload=PAYLOAD)
    event_publish(event_type="appointment.cancelled", payload=PAYLOAD)
    for delivery in sorted(WebhookDelivery.objects.order_by("id"), key=lambda d: d.subscription_id == failing.pk):
        delivery_module.delivery_attempt(delivery_id=delivery.pk)
    booked_ok = WebhookDelivery.objects.get(subscription=ok, event__type="appointment.booked")
    cancelled_failing = WebhookDelivery.objects.get(subscription=failing)

    def listed(query):
        response = staff.get(DELIVERIES_URL + query)
        assert response.status_code == 200
        return sorted(d.pk for d in response.context["cl"].result_list)

    assert listed("?status__exact=pending") == [cancelled_failing.pk]
    assert listed("?status__exact=succeeded") == sorted(
        WebhookDelivery.objects.filter(status="succeeded").values_list("pk", flat=True)
    )
    assert listed(f"?subscription__id__exact={failing.pk}") == [cancelled_failing.pk]
    assert listed("?event__type=appointment.booked") == [booked_ok.pk]

    page = staff.get(f"{DELIVERIES_URL}{cancelled_failing.pk}/change/")
    html = page.content.decode()
    assert page.status_code == 200
    assert "db down" in html
    assert "Save" not in html  # view only
    assert staff.post(f"{DELIVERIES_URL}{cancelled_failing.pk}/change/", {}).status_code == 403
    assert staff.get(f"{DELIVERIES_URL}add/").status_code == 403
    assert staff.get(f"/admin/integrations/webhookevent/{cancelled_failing.event_id}/change/").status_code == 200
    assert staff.get("/admin/integrations/webhookevent/").status_code == 200


# --- create_webhook_subscription ------------------------------------------------------------------------


@pytest.mark.django_db
def test_the_command_creates_a_subscription_and_prints_its_secret_once():
    BranchFactory(code="BLR")
    out = StringIO()
    call_command(
        "create_webhook_subscription",
        "--name",
        "Lab gateway",
        "--url",
        "https://hooks.example.com/lab",
        "--events",
        "appointment.booked appointment.completed",
        "--branch",
        "blr",
        "--header",
        "Authorization: Bearer lab-1",
        "--json",
        stdout=out,
    )
    result = json.loads(out.getvalue())
    subscription = WebhookSubscription.objects.get()
    assert result == {
        "id": str(subscription.pk),
        "name": "Lab gateway",
        "url": "https://hooks.example.com/lab",
        "events": ["appointment.booked", "appointment.completed"],
        "branches": [str(subscription.branches.get().pk)],
        "headers": ["Authorization"],
        "active": True,
        "signing_secret": subscription.secret,
    }
    assert subscription.extra_headers == {"Authorization": "Bearer lab-1"}

    out = StringIO()
    call_command(
        "create_webhook_subscription",
        "--name",
        "All",
        "--url",
        "https://hooks.example.com/all",
        "--events",
        "all",
        stdout=out,
    )
    text = out.getvalue()
    everything = WebhookSubscription.objects.get(name="All")
    assert everything.event_types == [kind.name for kind in event_kinds()]
    assert text.count(everything.secret) == 1
    assert "Store the secret now" in text


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--url", "https://10.0.0.8/hook", "--events", "all"], "target_url: The target must be a public address"),
        (["--url", "https://hooks.example.com/", "--events", "appointment.deleted"], "Unknown or missing event kinds"),
        (["--url", "https://hooks.example.com/", "--events", "all", "--branch", "NOPE"], "No branch with id or code"),
        (["--url", "https://hooks.example.com/", "--events", "all", "--header", "X-Key"], "Write each header"),
    ],
)
def test_the_command_refuses_bad_input(arguments, message):
    with pytest.raises(CommandError, match=re.escape(message)):
        call_command("create_webhook_subscription", "--name", "x", *arguments, stdout=StringIO())
    assert not WebhookSubscription.objects.exists()


@pytest.mark.django_db
def test_the_admin_offers_no_view_site_link_to_a_page_that_does_not_exist(admin_client):
    page = admin_client.get("/admin/")

    assert page.status_code == 200
    assert "View site" not in page.content.decode()
