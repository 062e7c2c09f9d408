"""Redis stopping and starting under the API (docs/operations.md §1): the API keeps serving, rate limits fall
back to a per-process approximation with one log line and a metric, and go back to Redis when it answers.
The Redis is the tests' own (tests/operations/conftest.py), stopped and started for real."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest
from prometheus_client import REGISTRY

from clinic.api import ratelimit
from tests.helpers import bearer, stored_token
from tests.operations.conftest import PrivateRedis

pytestmark = pytest.mark.django_db
BRANCHES = "/api/v1/branches"


@pytest.fixture
def redis_for_the_api(settings: Any, private_redis: PrivateRedis, monkeypatch: Any) -> Iterator[PrivateRedis]:
    settings.REDIS_URL = private_redis.url
    ratelimit._redis_script.cache_clear()
    ratelimit._local_logs.clear()
    monkeypatch.setattr(ratelimit, "_redis_down_until", None)
    yield private_redis
    ratelimit._redis_script.cache_clear()
    ratelimit._local_logs.clear()


def _fallbacks() -> float:
    return REGISTRY.get_sample_value("clinic_ratelimit_fallback_total") or 0.0


def test_with_redis_stopped_the_api_serves_and_limits_per_process_and_says_so_once(
    client: Any, api_client_factory: Any, redis_for_the_api: PrivateRedis, caplog: Any
) -> None:
    token = stored_token(api_client_factory(rate_limit_per_minute=3))
    assert client.get(BRANCHES, **bearer(token))["RateLimit-Remaining"] == "2"  # counted in Redis
    redis_for_the_api.stop()
    before = _fallbacks()

    with caplog.at_level(logging.WARNING, logger="clinic.api.ratelimit"):
        responses = [client.get(BRANCHES, **bearer(token)) for _ in range(4)]

    # The in-process log starts empty: it admits the full limit, then refuses, as Redis would have.
    assert [r.status_code for r in responses] == [200, 200, 200, 429]
    assert [r["RateLimit-Remaining"] for r in responses] == ["2", "1", "0", "0"]
    assert responses[3].json()["code"] == "rate_limited"
    assert [r.getMessage() for r in caplog.records] == [
        "Redis unavailable (ConnectionError): rate limits fall back to a per-process approximation"
    ]
    assert _fallbacks() - before == 4


def test_when_redis_is_back_the_limit_is_shared_again_and_that_is_logged(
    client: Any, api_client_factory: Any, redis_for_the_api: PrivateRedis, caplog: Any, monkeypatch: Any
) -> None:
    monkeypatch.setattr(ratelimit, "RETRY_REDIS_AFTER_SECONDS", 0.0)  # try Redis again at once
    token = stored_token(api_client_factory(rate_limit_per_minute=5))
    redis_for_the_api.stop()
    assert client.get(BRANCHES, **bearer(token)).status_code == 200  # decided in process
    redis_for_the_api.start()  # empty: --save ""
    caplog.clear()

    with caplog.at_level(logging.WARNING, logger="clinic.api.ratelimit"):
        back = client.get(BRANCHES, **bearer(token))

    assert back.status_code == 200
    assert back["RateLimit-Remaining"] == "4"  # counted in the fresh Redis, not the process's log
    assert [r.getMessage() for r in caplog.records] == [
        "Redis answers again: rate limits are shared across processes again"
    ]


def test_while_redis_is_known_down_requests_do_not_wait_for_it(
    client: Any, api_client_factory: Any, redis_for_the_api: PrivateRedis
) -> None:
    import time

    token = stored_token(api_client_factory(rate_limit_per_minute=100))
    redis_for_the_api.stop()
    client.get(BRANCHES, **bearer(token))  # the failure that marks Redis down

    started = time.perf_counter()
    responses = [client.get(BRANCHES, **bearer(token)) for _ in range(20)]
    elapsed = time.perf_counter() - started

    assert {r.status_code for r in responses} == {200}
    assert elapsed < 20 * 0.5  # not one Redis timeout each


@pytest.mark.django_db(transaction=True)
def test_a_notification_committed_while_the_broker_is_down_is_queued_when_it_is_back(
    redis_for_the_api: PrivateRedis,
) -> None:
    # The broker is the tests' own Redis, stopped for real: publishing fails inside kombu, not in a mock.
    import redis as redis_client
    from django.db import transaction

    from clinic.celery import app as celery_app
    from integrations.models import NotificationOutboxMessage
    from integrations.notifications.outbox import notification_outbox_add
    from integrations.tasks import relay_notifications

    previous = (celery_app.conf.broker_write_url, celery_app.conf.task_always_eager)
    # The write URL: what publishing uses (broker_url alone was ignored once an earlier test had connected).
    celery_app.conf.broker_write_url, celery_app.conf.task_always_eager = redis_for_the_api.url, False
    _forget_broker_connections(celery_app)
    try:
        redis_for_the_api.stop()
        with transaction.atomic():
            notification_outbox_add(task="appointments.tasks.appointment_notify", args=["a-1", "appointment.booked", 1])
        message = NotificationOutboxMessage.objects.get()
        assert (message.claim_token, message.claimed_until) == (None, None)  # released for the relay

        redis_for_the_api.start()
        assert relay_notifications() == 1

        queued = redis_client.Redis.from_url(redis_for_the_api.url).lrange("celery", 0, -1)
        assert len(queued) == 1
        assert b"integrations.tasks.notification_outbox_run" in queued[0]
        message.refresh_from_db()
        assert message.claim_token is not None
        assert message.finished_at is None
    finally:
        celery_app.conf.broker_write_url, celery_app.conf.task_always_eager = previous
        _forget_broker_connections(celery_app)


def _forget_broker_connections(app: Any) -> None:
    """Drop the app's connection and producer pools: built by earlier tests, they still point at the
    shared Redis, where publishing would succeed."""
    app._pool = None
    app.amqp._producer_pool = None
