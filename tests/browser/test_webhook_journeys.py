"""Webhook administration in a real browser: a subscription created in the admin against a real local
receiver, its secret seen once, a test event sent from the list and read back on the delivery page, and a
failed delivery replayed from the admin. Deliveries are made by a real Celery worker (thread) on Redis."""

from __future__ import annotations

from typing import Any

import pytest

from integrations.webhooks.models import WebhookAttempt, WebhookDelivery, WebhookSubscription
from tests.factories import BranchFactory
from tests.helpers import wait_until
from tests.integrations.webhook_receiver import Reply, receiver, verify
from tests.worker import celery_worker

__all__ = ["celery_worker", "receiver"]

pytestmark = pytest.mark.django_db(transaction=True)

SUBSCRIPTIONS = "/admin/integrations/webhooksubscription/"
DELIVERIES = "/admin/integrations/webhookdelivery/"


def run_action(page: Any, pk: Any, action: str) -> None:
    page.check(f"input[name=_selected_action][value='{pk}']")
    page.select_option("select[name=action]", action)
    page.click("button[name=index]")


def attempts_shown(page: Any) -> list[dict[str, str]]:
    """The attempts inline of a delivery page, one dict of cell texts per attempt."""
    rows = page.locator("#attempts-group tbody tr.form-row")
    columns = ("number", "duration_ms", "status_code", "error", "response_excerpt")
    return [
        {name: rows.nth(i).locator(f"td.field-{name}").inner_text().strip() for name in columns}
        for i in range(rows.count())
    ]


def create_subscription(page: Any, url: str, branch: Any) -> tuple[WebhookSubscription, str]:
    page.goto(f"{SUBSCRIPTIONS}add/")
    page.fill("#id_name", "Hospital ERP")
    page.fill("#id_description", "Appointment feed for the ERP.")
    page.fill("#id_target_url", url)
    page.check("input[name=event_types][value='appointment.booked']")
    page.check("input[name=event_types][value='appointment.cancelled']")
    page.select_option("#id_branches_from", label=str(branch))
    page.click("#id_branches_add")
    page.fill("#id_extra_headers", "X-Tenant: tenant-42-blr")
    page.click("input[name=_save]")

    page.wait_for_selector("#signing-secret")
    secret = page.inner_text("#signing-secret")
    assert secret.startswith("whsec_")
    assert page.content().count(secret) == 1
    subscription = WebhookSubscription.objects.get()
    return subscription, secret


def test_create_a_subscription_see_its_secret_once_and_read_a_test_delivery(admin_page, celery_worker, receiver):
    page = admin_page
    branch = BranchFactory(code="BLR", name="Bengaluru Central")

    subscription, secret = create_subscription(page, receiver.url(), branch)

    assert (subscription.name, subscription.target_url, subscription.event_types, subscription.is_active) == (
        "Hospital ERP",
        receiver.url(),
        ["appointment.booked", "appointment.cancelled"],
        True,
    )
    assert list(subscription.branches.all()) == [branch]
    assert subscription.extra_headers == {"X-Tenant": "tenant-42-blr"}
    assert subscription.secret == secret
    assert secret not in subscription.secret_encrypted
    # A value long enough that finding it by chance in the base64 ciphertext is out of the question
    # ("42" alone turned up there in one CI run).
    assert "tenant-42-blr" not in subscription.extra_headers_encrypted

    # Continuing, or coming back later, shows the secret and the header value masked only.
    page.click("text=I have stored the secret: continue")
    page.wait_for_url(f"**{SUBSCRIPTIONS}{subscription.pk}/change/")
    assert secret not in page.content()
    assert page.input_value("#id_extra_headers") == "X-Tenant: ••••••••"
    page.goto(SUBSCRIPTIONS)
    cells = [cell.strip() for cell in page.locator("#result_list tbody tr").first.locator("th, td").all_inner_texts()]
    assert cells[1:4] == ["Hospital ERP", receiver.url(), "appointment.booked, appointment.cancelled"]
    assert cells[4] == "BLR"
    assert secret not in page.content()

    run_action(page, subscription.pk, "send_test_event")
    page.wait_for_selector("text=Test event queued for Hospital ERP")
    (received,) = receiver.wait_for(1)
    assert verify(received, secret)["type"] == "webhook.test"
    assert received.headers["x-tenant"] == "tenant-42-blr"
    delivery = WebhookDelivery.objects.get()
    assert received.webhook_id == str(delivery.event_id)
    wait_until(lambda: WebhookDelivery.objects.get().status == "succeeded", timeout=15)

    page.click(f"text=delivery {delivery.pk}")
    page.wait_for_url(f"**{DELIVERIES}{delivery.pk}/change/")
    assert page.inner_text(".field-status .readonly") == "Succeeded"
    attempt = WebhookAttempt.objects.get(delivery=delivery)
    (shown,) = attempts_shown(page)
    assert (shown["number"], shown["status_code"], shown["response_excerpt"], shown["error"]) == (
        "1",
        "200",
        '{"ok":true}',
        "-",
    )
    assert float(shown["duration_ms"].replace(",", "")) == pytest.approx(attempt.duration_ms, abs=0.01)
    assert attempt.duration_ms > 0
    assert str(delivery.event_id) in page.inner_text(".field-event_link")


def test_a_failed_delivery_is_replayed_from_the_admin_and_then_succeeds(admin_page, celery_worker, receiver):
    page = admin_page
    branch = BranchFactory(code="BLR")
    subscription, secret = create_subscription(page, receiver.url(), branch)

    receiver.reply_with(Reply(status=500, body=b"ERP database down"))
    page.goto(SUBSCRIPTIONS)
    run_action(page, subscription.pk, "send_test_event")
    page.wait_for_selector("text=Test event queued for Hospital ERP")
    (first,) = receiver.wait_for(1)
    wait_until(lambda: WebhookDelivery.objects.get().status == "failed", timeout=15)  # a test event is not retried
    delivery = WebhookDelivery.objects.get()

    # Found from the list filtered to failed deliveries; its page shows why.
    page.goto(DELIVERIES)
    page.click("#changelist-filter >> text=Failed")
    page.wait_for_url("**status__exact=failed**")
    assert page.locator("#result_list tbody tr").count() == 1
    page.goto(f"{DELIVERIES}{delivery.pk}/change/")
    (failed,) = attempts_shown(page)
    assert (failed["status_code"], failed["response_excerpt"]) == ("500", "ERP database down")

    # The receiver is back (it answers 200 again): replay from the list.
    page.goto(f"{DELIVERIES}?status__exact=failed")
    run_action(page, delivery.pk, "replay")
    page.wait_for_selector("text=Queued 1 delivery(ies) again.")
    second = receiver.wait_for(2)[1]
    assert second.webhook_id == first.webhook_id == str(delivery.event_id)
    assert verify(second, secret)["type"] == "webhook.test"
    wait_until(lambda: WebhookDelivery.objects.get().status == "succeeded", timeout=15)

    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempt_count, delivery.last_status_code) == ("succeeded", 1, 200)
    assert list(WebhookAttempt.objects.filter(delivery=delivery).values_list("status_code", flat=True)) == [500, 200]
    page.goto(f"{DELIVERIES}{delivery.pk}/change/")
    assert [(a["status_code"], a["response_excerpt"]) for a in attempts_shown(page)] == [
        ("500", "ERP database down"),
        ("200", '{"ok":true}'),
    ]
