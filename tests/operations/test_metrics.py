"""/metrics (docs/operations.md §1): Prometheus text, behind METRICS_TOKEN, any Host, with request counts per
route, the rate-limit fallback counter and the outbox backlog read from PostgreSQL."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from integrations.models import NotificationOutboxMessage
from tests.integrations.webhook_receiver import receiver

pytestmark = pytest.mark.django_db
__all__ = ["receiver"]
TOKEN = "m3trics-" + "x" * 24


@pytest.fixture
def metrics_token(settings: Any) -> str:
    settings.METRICS_TOKEN = TOKEN
    return TOKEN


def _samples(response: Any) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(response.content.decode())
        for sample in family.samples
    }


def test_metrics_do_not_exist_without_a_configured_token(client: Any, settings: Any) -> None:
    settings.METRICS_TOKEN = ""

    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer anything").status_code == 404


@pytest.mark.parametrize("authorization", [None, "Bearer wrong", f"Basic {TOKEN}"])
def test_metrics_without_the_token_are_401_and_reveal_nothing(
    client: Any, metrics_token: str, authorization: str | None
) -> None:
    extra = {"HTTP_AUTHORIZATION": authorization} if authorization else {}

    response = client.get("/metrics", **extra)

    assert response.status_code == 401
    assert response["WWW-Authenticate"] == 'Bearer realm="metrics"'
    assert b"clinic_" not in response.content


def test_metrics_with_the_token_answer_the_pod_ip_as_host_with_routes_and_the_outbox_backlog(
    client: Any, settings: Any, metrics_token: str
) -> None:
    settings.ALLOWED_HOSTS = ["clinic.example.com"]
    now = timezone.now()
    NotificationOutboxMessage.objects.create(task="t", args=[], created_at=now - timedelta(minutes=5))
    NotificationOutboxMessage.objects.create(task="t", args=[], created_at=now - timedelta(minutes=1))
    NotificationOutboxMessage.objects.create(task="t", args=[], created_at=now - timedelta(hours=2), finished_at=now)
    client.get("/api/v1/branches", HTTP_HOST="clinic.example.com")  # 401: no token

    response = client.get("/metrics", HTTP_HOST="10.42.3.17:8000", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")

    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain; version=")
    samples = _samples(response)
    assert samples[("clinic_outbox_backlog_messages", (("kind", "notification"),))] == 2
    assert samples[("clinic_outbox_backlog_messages", (("kind", "webhook"),))] == 0
    age = samples[("clinic_outbox_backlog_age_seconds", (("kind", "notification"),))]
    assert 300 <= age < 360
    assert samples[("clinic_outbox_backlog_age_seconds", (("kind", "webhook"),))] == 0
    key = ("clinic_http_requests_total", (("method", "GET"), ("route", "branch-list"), ("status", "4xx")))
    assert samples[key] >= 1
    assert ("clinic_ratelimit_fallback_total", ()) in samples
    assert b"/api/v1/branches" not in response.content  # routes by name, never raw paths


def test_metrics_carry_celery_task_counts_and_run_time_and_database_connections(
    client: Any, settings: Any, metrics_token: str
) -> None:
    """A real task run through Celery's signals (apply(): in this process, prerun and postrun fire as in a
    worker) is counted in Redis, which every pod's /metrics reads; connections come from pg_stat_activity."""
    from clinic.heartbeat import redis_connection
    from clinic.task_metrics import metrics_key
    from integrations.tasks import purge_expired_tokens

    redis_connection().delete(metrics_key())
    purge_expired_tokens.apply()
    purge_expired_tokens.apply()

    response = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")

    samples = _samples(response)
    name = purge_expired_tokens.name
    assert samples[("clinic_celery_tasks_total", (("state", "SUCCESS"), ("task", name)))] == 2
    assert 0 < samples[("clinic_celery_task_seconds_total", (("task", name),))] < 10
    assert samples[("clinic_database_connections", (("state", "active"),))] >= 1  # this scrape's own query
    assert samples[("clinic_database_max_connections", ())] >= 10


def test_metrics_carry_webhook_attempts_by_outcome_and_notification_sends_from_every_worker(
    client: Any, settings: Any, metrics_token: str, receiver: Any
) -> None:
    """Workers count in Redis (clinic.worker_counters), so a scrape of any pod shows the deployment's figures.
    Real attempts against a local receiver: one delivered, one answered 500 (a retry is scheduled)."""
    from clinic.heartbeat import redis_connection
    from clinic.worker_counters import counters_key
    from integrations.webhooks.delivery import delivery_attempt
    from integrations.webhooks.events import event_publish
    from integrations.webhooks.models import WebhookDelivery
    from tests.integrations.webhook_receiver import Reply, subscribe

    redis_connection().delete(counters_key())
    subscribe(receiver.url())
    receiver.reply_with(Reply(status=204, body=b""), Reply(status=500, body=b"busy"))
    for _ in range(2):
        event_publish(event_type="appointment.booked", payload={"appointment": {"status": "booked"}})
        assert delivery_attempt(delivery_id=WebhookDelivery.objects.latest("id").pk) in ("succeeded", "retry")

    samples = _samples(client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}"))

    assert samples[("clinic_webhook_attempts_total", (("outcome", "delivered"),))] == 1
    assert samples[("clinic_webhook_attempts_total", (("outcome", "retrying"),))] == 1
    assert ("clinic_webhook_outcomes_deferred_total", ()) not in samples
